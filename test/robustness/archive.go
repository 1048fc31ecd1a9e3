package robustness

import (
	"fmt"
	"sort"
)

// RestoredKey is a key as a cluster restored from an archive holds it.
type RestoredKey struct {
	Value       string
	ModRevision int64
}

// CheckRestoredAt checks what a cluster restored to revision rev holds of the workload's keys
// (restored: every key under the workload's prefix) against the history of the source
// cluster: every write acknowledged at a revision up to rev is there (its key holds it, or a
// later write at or before rev), nothing written after rev is there, and every value held was
// written by the workload to that key, at the mod revision its acknowledgement named. A write
// without an answer may or may not be there, but only at a mod revision up to rev. It returns
// one line per violation, sorted; none when the restore holds exactly the history at rev.
func CheckRestoredAt(ops []Operation, rev int64, restored map[string]RestoredKey) []string {
	written, latest := writesUpTo(ops, rev)
	var out []string
	for key, kv := range restored {
		if kv.ModRevision > rev {
			out = append(out, fmt.Sprintf("%s: mod revision %d is after the target %d", key, kv.ModRevision, rev))
		}
		op, ok := written[kv.Value]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("%s: value %q was never written", key, kv.Value))
		case op.Input.Key != key:
			out = append(out, fmt.Sprintf("%s: value %q was written to %s", key, kv.Value, op.Input.Key))
		case op.acknowledged() && op.Output.Revision != kv.ModRevision:
			out = append(out, fmt.Sprintf("%s: value %q acknowledged at revision %d, restored at mod revision %d", key, kv.Value, op.Output.Revision, kv.ModRevision))
		}
	}
	for key, op := range latest {
		kv, ok := restored[key]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("%s: missing (write acknowledged at revision %d, target %d)", key, op.Output.Revision, rev))
		case kv.ModRevision < op.Output.Revision:
			out = append(out, fmt.Sprintf("%s: holds mod revision %d, older than the write acknowledged at revision %d (target %d)", key, kv.ModRevision, op.Output.Revision, rev))
		}
	}
	sort.Strings(out)
	return out
}

// writesUpTo indexes the history's writes: every write by its value (values are unique in a
// run), and by key the newest write acknowledged at or before rev.
func writesUpTo(ops []Operation, rev int64) (written, latest map[string]Operation) {
	written, latest = map[string]Operation{}, map[string]Operation{}
	for _, op := range ops {
		if !op.writes() {
			continue
		}
		written[op.Input.Value] = op
		if !op.acknowledged() || op.Output.Revision > rev {
			continue
		}
		if l, ok := latest[op.Input.Key]; !ok || op.Output.Revision > l.Output.Revision {
			latest[op.Input.Key] = op
		}
	}
	return written, latest
}
