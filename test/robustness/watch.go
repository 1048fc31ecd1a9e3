package robustness

import (
	"fmt"
	"sort"
	"strings"
	"sync"
)

// WatchEvent is one event a watcher received.
type WatchEvent struct {
	Key, Value string
	Revision   int64
	Delete     bool
}

// WatchRecord is what one watcher of Prefix saw: the events from StartRevision on, and the
// revision up to which the stream said it had delivered everything (the last event's, or a
// progress notification's). Failure is why the watch ended early, if it did.
type WatchRecord struct {
	Prefix        string
	StartRevision int64

	mu      sync.Mutex
	events  []WatchEvent
	covered int64
	failure string
}

// Add records events received in one response.
func (w *WatchRecord) Add(events ...WatchEvent) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.events = append(w.events, events...)
	for _, e := range events {
		w.covered = max(w.covered, e.Revision)
	}
}

// Progress records that the stream delivered every event up to revision.
func (w *WatchRecord) Progress(revision int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.covered = max(w.covered, revision)
}

// Fail records why the watch ended before the run did.
func (w *WatchRecord) Fail(why string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failure == "" {
		w.failure = why
	}
}

// Covered is the revision up to which the watcher saw everything.
func (w *WatchRecord) Covered() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.covered
}

// LastRevision is the revision of the last event received (0 before any).
func (w *WatchRecord) LastRevision() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.events) == 0 {
		return 0
	}
	return w.events[len(w.events)-1].Revision
}

func (w *WatchRecord) snapshot() ([]WatchEvent, int64, string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]WatchEvent(nil), w.events...), w.covered, w.failure
}

// WatchVerdict is the watch checker's verdict: one line per violation.
type WatchVerdict struct {
	Events     int
	Violations []string
}

// CheckWatches checks every watcher against itself and against the operations: revisions
// in order, no event twice, no event that no write explains or that disagrees with the
// write's acknowledged revision, and every acknowledged write in the watcher's range seen
// (no gap).
func CheckWatches(ops []Operation, watches []*WatchRecord) WatchVerdict {
	var v WatchVerdict
	writes := writesByValue(ops)
	for i, w := range watches {
		events, covered, failure := w.snapshot()
		v.Events += len(events)
		report := func(format string, args ...any) {
			v.Violations = append(v.Violations, fmt.Sprintf("watcher %d (%s from %d): ", i, w.Prefix, w.StartRevision)+fmt.Sprintf(format, args...))
		}
		if failure != "" {
			report("ended early: %s", failure)
		}
		seen := checkOrder(events, report)
		checkExplained(events, writes, report)
		checkNoGap(ops, w, covered, seen, report)
	}
	return v
}

type eventID struct {
	revision int64
	key      string
}

// checkOrder reports revisions going back and events delivered twice; it returns the
// events by revision and key.
func checkOrder(events []WatchEvent, report func(string, ...any)) map[eventID]WatchEvent {
	seen := map[eventID]WatchEvent{}
	var last int64
	for _, e := range events {
		id := eventID{e.Revision, e.Key}
		if _, dup := seen[id]; dup {
			report("event %s at revision %d delivered twice", e.Key, e.Revision)
			continue
		}
		if e.Revision < last {
			report("event %s at revision %d after revision %d", e.Key, e.Revision, last)
		}
		seen[id] = e
		last = max(last, e.Revision)
	}
	return seen
}

// checkExplained reports events that no write of the history made, and events at another
// revision than the write's acknowledged one.
func checkExplained(events []WatchEvent, writes map[string]Operation, report func(string, ...any)) {
	for _, e := range events {
		if e.Delete {
			report("delete of %s at revision %d: the workload deletes nothing", e.Key, e.Revision)
			continue
		}
		op, ok := writes[e.Value]
		switch {
		case !ok || op.Input.Key != e.Key:
			report("event %s=%q at revision %d that no write made", e.Key, e.Value, e.Revision)
		case op.acknowledged() && op.Output.Revision != e.Revision:
			report("event %s=%q at revision %d, but the write was acknowledged at revision %d", e.Key, e.Value, e.Revision, op.Output.Revision)
		}
	}
}

// checkNoGap reports acknowledged writes under the watcher's prefix, in the range it
// covered, that it did not see.
func checkNoGap(ops []Operation, w *WatchRecord, covered int64, seen map[eventID]WatchEvent, report func(string, ...any)) {
	var missed []string
	for _, op := range ops {
		r := op.Output.Revision
		if !op.acknowledged() || !strings.HasPrefix(op.Input.Key, w.Prefix) || r < w.StartRevision || r > covered {
			continue
		}
		if e, ok := seen[eventID{r, op.Input.Key}]; !ok || e.Value != op.Input.Value {
			missed = append(missed, fmt.Sprintf("%s=%q@%d", op.Input.Key, op.Input.Value, r))
		}
	}
	sort.Strings(missed)
	for _, m := range missed {
		report("acknowledged write %s not seen, though the watch covered up to revision %d", m, covered)
	}
}

// writesByValue indexes the writes by the value they wrote (values are unique in a run).
func writesByValue(ops []Operation) map[string]Operation {
	out := map[string]Operation{}
	for _, op := range ops {
		if op.writes() {
			out[op.Input.Value] = op
		}
	}
	return out
}

// LostWrites names the acknowledged writes that the final state does not show although no
// other write to their key could have come after them: a write acknowledged to a client
// and then lost.
func LostWrites(ops []Operation, final map[string]string) []string {
	byKey := map[string][]Operation{}
	for _, op := range ops {
		if op.writes() {
			byKey[op.Input.Key] = append(byKey[op.Input.Key], op)
		}
	}
	var lost []string
	for key, writes := range byKey {
		for _, w := range writes {
			if !w.acknowledged() || final[key] == w.Input.Value || overtaken(w, writes, final[key]) {
				continue
			}
			lost = append(lost, fmt.Sprintf("%s=%q@%d (reads %q)", key, w.Input.Value, w.Output.Revision, final[key]))
		}
	}
	sort.Strings(lost)
	return lost
}

// overtaken reports whether the final value is another write's that could have taken effect
// after w: one that had not returned when w was called.
func overtaken(w Operation, writes []Operation, final string) bool {
	for _, o := range writes {
		if o.Input.Value == final && o.Input.Value != w.Input.Value && o.Return >= w.Call {
			return true
		}
	}
	return false
}
