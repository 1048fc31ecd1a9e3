// Package robustness records what clients did against an etcd cluster while the operator
// worked on it and faults were injected, and checks the record: linearizability of the
// key-value operations (with porcupine, over a per-key register model), the guarantees of
// watches (ordered, no duplicate, no gap), and that every acknowledged write reads back.
package robustness

import (
	"math"
	"sync"
	"time"
)

// Kind is what an operation did.
type Kind string

// The operations of the workload. A CAS is a transaction: if the key's value is Expected,
// put Value, else read the key.
const (
	Put Kind = "put"
	Get Kind = "get"
	CAS Kind = "cas"
)

// Input is what a client asked for.
type Input struct {
	Kind     Kind
	Key      string
	Value    string // Put and CAS: the value written (unique in a run)
	Expected string // CAS: the value the key must have ("" for absent)
}

// Output is what etcd answered. Unknown means the client got an error or no answer: a write
// may or may not have been applied, so the model allows both.
type Output struct {
	Unknown   bool
	Value     string // Get, and a CAS that failed its compare: the value read ("" for absent)
	Succeeded bool   // CAS: the compare held and the put was applied
	Revision  int64  // Put and a succeeded CAS: the revision of the write
}

// Operation is one call with its invocation and response times (nanoseconds since the
// history began). An operation without an answer returns at Pending: it may take effect at
// any time after its call, or never.
type Operation struct {
	Client int
	Input  Input
	Output Output
	Call   int64
	Return int64
}

// Pending is the response time of an operation whose outcome is unknown.
const Pending = math.MaxInt64

// writes reports whether the operation may have written: a put or a CAS that did not
// fail its compare.
func (o Operation) writes() bool {
	return o.Input.Kind == Put || (o.Input.Kind == CAS && (o.Output.Unknown || o.Output.Succeeded))
}

// acknowledged reports whether etcd confirmed the write.
func (o Operation) acknowledged() bool { return o.writes() && !o.Output.Unknown }

// History is the record of a run: operations and what watchers saw. Safe for concurrent use.
type History struct {
	start time.Time

	mu      sync.Mutex
	ops     []Operation
	watches []*WatchRecord
}

// NewHistory starts a history; times are measured from now on the monotonic clock.
func NewHistory() *History { return &History{start: time.Now()} }

// Now is the time since the history began, for Call and Return.
func (h *History) Now() int64 { return int64(time.Since(h.start)) }

// Record adds a finished operation. A read without an answer says nothing and is dropped; a
// write without an answer is kept as pending.
func (h *History) Record(op Operation) {
	if op.Output.Unknown {
		if op.Input.Kind == Get {
			return
		}
		op.Return = Pending
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops = append(h.ops, op)
}

// Operations is a copy of the recorded operations.
func (h *History) Operations() []Operation {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Operation(nil), h.ops...)
}

// NewWatch registers a watcher's record.
func (h *History) NewWatch(prefix string) *WatchRecord {
	w := &WatchRecord{Prefix: prefix}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.watches = append(h.watches, w)
	return w
}

// Watches are the watchers' records.
func (h *History) Watches() []*WatchRecord {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]*WatchRecord(nil), h.watches...)
}
