package robustness

import (
	"slices"
	"testing"
)

func TestCheckRestoredAt(t *testing.T) {
	// a: 1 at 2, 2 at 5 (acknowledged); b: 1 at 3, then an unknown put; c: written only at 7.
	ops := []Operation{
		put(0, "a", "a1", 0, 10, 2), put(0, "a", "a2", 20, 30, 5), get(1, "a", "a2", 40, 50),
		put(1, "b", "b1", 0, 10, 3), unknown(put(1, "b", "b2", 20, 0, 0)),
		cas(2, "c", "", "c1", true, "", 0, 10, 7), cas(2, "c", "", "c2", false, "c1", 20, 30, 0),
	}
	for _, tc := range []struct {
		name     string
		rev      int64
		restored map[string]RestoredKey
		want     []string
	}{
		{"exactly the history at 5", 5, map[string]RestoredKey{"a": {"a2", 5}, "b": {"b1", 3}}, nil},
		{"exactly the history at 4", 4, map[string]RestoredKey{"a": {"a1", 2}, "b": {"b1", 3}}, nil},
		{"an unknown write applied before the target", 5, map[string]RestoredKey{"a": {"a2", 5}, "b": {"b2", 4}}, nil},
		{"everything at 7", 7, map[string]RestoredKey{"a": {"a2", 5}, "b": {"b1", 3}, "c": {"c1", 7}}, nil},
		{"an acknowledged write missing", 5, map[string]RestoredKey{"a": {"a2", 5}},
			[]string{"b: missing (write acknowledged at revision 3, target 5)"}},
		{"an older value than acknowledged before the target", 5, map[string]RestoredKey{"a": {"a1", 2}, "b": {"b1", 3}},
			[]string{"a: holds mod revision 2, older than the write acknowledged at revision 5 (target 5)"}},
		{"a write after the target", 5, map[string]RestoredKey{"a": {"a2", 5}, "b": {"b1", 3}, "c": {"c1", 7}},
			[]string{"c: mod revision 7 is after the target 5"}},
		{"an unknown write applied after the target", 3, map[string]RestoredKey{"a": {"a1", 2}, "b": {"b2", 4}},
			[]string{"b: mod revision 4 is after the target 3"}},
		{"a value nobody wrote", 5, map[string]RestoredKey{"a": {"x", 5}, "b": {"b1", 3}},
			[]string{`a: value "x" was never written`}},
		{"a value of another key", 5, map[string]RestoredKey{"a": {"b1", 3}, "b": {"b1", 3}},
			[]string{"a: holds mod revision 3, older than the write acknowledged at revision 5 (target 5)", `a: value "b1" was written to b`}},
		{"a value at another revision than acknowledged", 5, map[string]RestoredKey{"a": {"a1", 5}, "b": {"b1", 3}},
			[]string{`a: value "a1" acknowledged at revision 2, restored at mod revision 5`}},
		{"nothing restored before any write", 1, map[string]RestoredKey{}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := CheckRestoredAt(ops, tc.rev, tc.restored); !slices.Equal(got, tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}
