package robustness

import (
	"strings"
	"testing"
	"time"
)

func TestLeaderLast(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	ids := map[string]uint64{"a": 0xa, "b": 0xb, "c": 0xc}
	turns := func(members ...string) []Turn {
		out := make([]Turn, len(members))
		for i, m := range members {
			out[i] = Turn{Member: m, Done: at(10 * (i + 1))}
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		turns   []Turn
		leaders Leaders
		fault   string // "" when the order is right
	}{
		{"followers, then the leader moved away and taken", turns("a", "b", "c"),
			Leaders{{at(0), 0xc, 2}, {at(25), 0xa, 3}}, ""},
		{"the leader first", turns("c", "a", "b"),
			Leaders{{at(0), 0xc, 2}, {at(5), 0xa, 3}}, "member c (c) led when its turn came"},
		{"each new leader taken next", turns("a", "b", "c"),
			Leaders{{at(0), 0xa, 2}, {at(5), 0xb, 3}, {at(15), 0xc, 4}}, "member a (a) led"},
		{"an election between turns moves the leader's place", turns("c", "a", "b"),
			Leaders{{at(-1), 0xb, 2}, {at(15), 0xa, 3}, {at(25), 0xb, 4}}, ""},
		{"no leader known", turns("a"), Leaders{{at(1), 0xa, 2}}, "no leader known"},
		{"the only member leads", turns("a"), Leaders{{at(0), 0xa, 2}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := LeaderLast(tc.turns, t0, tc.leaders, ids)
			switch {
			case tc.fault == "" && err != nil:
				t.Fatalf("refused a right order: %v", err)
			case tc.fault != "" && (err == nil || !strings.Contains(err.Error(), tc.fault)):
				t.Fatalf("got %v, want an error saying %q", err, tc.fault)
			}
		})
	}
}

func TestLeadersElections(t *testing.T) {
	l := Leaders{{time.Now(), 0xa, 4}, {time.Now(), 0xb, 7}}
	if got := l.Elections(); got != 3 {
		t.Fatalf("%d elections from term 4 to 7, want 3", got)
	}
	if got := (Leaders{}).Elections(); got != 0 {
		t.Fatalf("%d elections without a sample", got)
	}
}
