package robustness

import (
	"strings"
	"testing"
	"time"
)

func put(client int, key, value string, call, ret, rev int64) Operation {
	return Operation{Client: client, Input: Input{Kind: Put, Key: key, Value: value}, Output: Output{Revision: rev}, Call: call, Return: ret}
}

func get(client int, key, value string, call, ret int64) Operation {
	return Operation{Client: client, Input: Input{Kind: Get, Key: key}, Output: Output{Value: value}, Call: call, Return: ret}
}

func cas(client int, key, expected, value string, succeeded bool, read string, call, ret, rev int64) Operation {
	return Operation{Client: client, Input: Input{Kind: CAS, Key: key, Value: value, Expected: expected},
		Output: Output{Succeeded: succeeded, Value: read, Revision: rev}, Call: call, Return: ret}
}

func unknown(op Operation) Operation {
	op.Output = Output{Unknown: true}
	op.Return = Pending
	return op
}

func TestLinearizability(t *testing.T) {
	for _, tc := range []struct {
		name       string
		ops        []Operation
		violations int
	}{
		{"sequential put then get", []Operation{put(0, "a", "1", 0, 10, 2), get(1, "a", "1", 20, 30)}, 0},
		{"a read concurrent with a put may see either", []Operation{put(0, "a", "1", 0, 10, 2), get(1, "a", "", 5, 30), get(2, "a", "1", 6, 31)}, 0},
		{"a stale read after an acknowledged put", []Operation{put(0, "a", "1", 0, 10, 2), get(1, "a", "", 20, 30)}, 1},
		{"a read goes back to an older value", []Operation{
			put(0, "a", "1", 0, 10, 2), put(0, "a", "2", 20, 30, 3), get(1, "a", "2", 40, 50), get(1, "a", "1", 60, 70)}, 1},
		{"a value nobody wrote", []Operation{get(0, "a", "x", 0, 10)}, 1},
		{"an unknown put may have been applied", []Operation{unknown(put(0, "a", "1", 0, 0, 0)), get(1, "a", "1", 20, 30)}, 0},
		{"an unknown put may not have been applied", []Operation{unknown(put(0, "a", "1", 0, 0, 0)), get(1, "a", "", 20, 30)}, 0},
		{"an unknown put cannot be undone once seen", []Operation{
			unknown(put(0, "a", "1", 0, 0, 0)), get(1, "a", "1", 20, 30), get(1, "a", "", 40, 50)}, 1},
		{"compare and swap in order", []Operation{
			cas(0, "a", "", "1", true, "", 0, 10, 2), cas(1, "a", "", "2", false, "1", 20, 30, 0), cas(1, "a", "1", "2", true, "", 40, 50, 3)}, 0},
		{"two swaps from the same value both succeed", []Operation{
			put(0, "a", "1", 0, 10, 2), cas(1, "a", "1", "2", true, "", 20, 30, 3), cas(2, "a", "1", "3", true, "", 40, 50, 4)}, 1},
		{"a failed compare that should have held", []Operation{put(0, "a", "1", 0, 10, 2), cas(1, "a", "1", "2", false, "1", 20, 30, 0)}, 1},
		{"an unknown swap applied when the compare held", []Operation{
			put(0, "a", "1", 0, 10, 2), unknown(cas(1, "a", "1", "2", false, "", 20, 0, 0)), get(2, "a", "2", 40, 50)}, 0},
		{"an unknown swap cannot apply when the compare failed", []Operation{
			put(0, "a", "1", 0, 10, 2), unknown(cas(1, "a", "0", "2", false, "", 20, 0, 0)), get(2, "a", "2", 40, 50)}, 1},
		{"keys are independent, each violation counted", []Operation{
			put(0, "a", "1", 0, 10, 2), get(1, "a", "", 20, 30), put(0, "b", "1", 0, 10, 3), get(1, "b", "", 20, 30), get(1, "c", "", 20, 30)}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := CheckLinearizable(tc.ops, 10*time.Second)
			if v.Unknown || v.Violations != tc.violations {
				t.Fatalf("violations %d (%v, unknown %v), want %d", v.Violations, v.Keys, v.Unknown, tc.violations)
			}
		})
	}
}

func TestHistoryDropsUnansweredReadsAndKeepsUnansweredWritesPending(t *testing.T) {
	h := NewHistory()
	h.Record(Operation{Input: Input{Kind: Get, Key: "a"}, Output: Output{Unknown: true}, Call: 1, Return: 2})
	h.Record(Operation{Input: Input{Kind: Put, Key: "a", Value: "1"}, Output: Output{Unknown: true}, Call: 1, Return: 2})
	ops := h.Operations()
	if len(ops) != 1 || ops[0].Input.Kind != Put || ops[0].Return != Pending {
		t.Fatalf("recorded %+v; want only the put, pending", ops)
	}
}

func watchOf(prefix string, start, covered int64, events ...WatchEvent) *WatchRecord {
	w := &WatchRecord{Prefix: prefix, StartRevision: start}
	w.Add(events...)
	w.Progress(covered)
	return w
}

func ev(key, value string, rev int64) WatchEvent {
	return WatchEvent{Key: key, Value: value, Revision: rev}
}

func TestWatchChecks(t *testing.T) {
	ops := []Operation{
		put(0, "p/a", "1", 0, 10, 2),
		put(0, "p/b", "2", 20, 30, 3),
		cas(1, "p/a", "1", "3", true, "", 40, 50, 4),
		cas(1, "p/a", "9", "4", false, "3", 60, 70, 0),
		unknown(put(2, "p/c", "5", 80, 0, 0)),
		put(0, "q/x", "6", 90, 100, 6),
	}
	complete := []WatchEvent{ev("p/a", "1", 2), ev("p/b", "2", 3), ev("p/a", "3", 4)}
	for _, tc := range []struct {
		name  string
		watch *WatchRecord
		want  string // a part of a violation; "" for none
	}{
		{"every write in order", watchOf("p/", 2, 6, complete...), ""},
		{"an unknown write that was applied", watchOf("p/", 2, 6, append(complete, ev("p/c", "5", 5))...), ""},
		{"started later, sees only what followed", watchOf("p/", 4, 6, ev("p/a", "3", 4)), ""},
		{"covered less, owes less", watchOf("p/", 2, 3, ev("p/a", "1", 2), ev("p/b", "2", 3)), ""},
		{"a gap", watchOf("p/", 2, 6, ev("p/a", "1", 2), ev("p/a", "3", 4)), `p/b="2"@3 not seen`},
		{"a duplicate", watchOf("p/", 2, 6, append(complete, ev("p/a", "3", 4))...), "delivered twice"},
		{"out of order", watchOf("p/", 2, 6, ev("p/a", "1", 2), ev("p/a", "3", 4), ev("p/b", "2", 3)), "after revision 4"},
		{"an event no write made", watchOf("p/", 2, 6, append(complete, ev("p/d", "7", 5))...), "that no write made"},
		{"an event at another revision than acknowledged", watchOf("p/", 2, 6, ev("p/a", "1", 2), ev("p/b", "2", 3), ev("p/a", "3", 5)), "acknowledged at revision 4"},
		{"ended early", func() *WatchRecord { w := watchOf("p/", 2, 6, complete...); w.Fail("compacted"); return w }(), "ended early: compacted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := CheckWatches(ops, []*WatchRecord{tc.watch})
			switch {
			case tc.want == "" && len(v.Violations) > 0:
				t.Fatalf("violations %q, want none", v.Violations)
			case tc.want != "" && !strings.Contains(strings.Join(v.Violations, "\n"), tc.want):
				t.Fatalf("violations %q, want one with %q", v.Violations, tc.want)
			}
		})
	}
}

func TestLostWrites(t *testing.T) {
	ops := []Operation{
		put(0, "log/1", "1", 0, 10, 2),
		put(0, "log/2", "2", 0, 10, 3),
		put(0, "reg", "a", 20, 30, 4),
		put(1, "reg", "b", 25, 35, 5), // concurrent with "a": either may be last
		unknown(put(2, "log/3", "3", 40, 0, 0)),
	}
	for _, tc := range []struct {
		name  string
		final map[string]string
		lost  string
	}{
		{"all there", map[string]string{"log/1": "1", "log/2": "2", "reg": "a"}, ""},
		{"the other concurrent write last", map[string]string{"log/1": "1", "log/2": "2", "reg": "b"}, ""},
		{"a written-once key gone", map[string]string{"log/1": "1", "reg": "b"}, `log/2="2"@3 (reads "")`},
		{"a register back to an older value", map[string]string{"log/1": "1", "log/2": "2", "reg": "z"}, `reg="a"@4 (reads "z"), reg="b"@5 (reads "z")`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := strings.Join(LostWrites(ops, tc.final), ", "); got != tc.lost {
				t.Fatalf("lost %q, want %q", got, tc.lost)
			}
		})
	}
}
