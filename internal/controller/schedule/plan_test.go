package schedule

import (
	"slices"
	"testing"
	"time"

	"github.com/quorumkeeper/etcd-operator/internal/cronplan"
)

func mustTime(t *testing.T, s string) time.Time {
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestDueRunsMissedTimesOnce(t *testing.T) {
	for _, tc := range []struct {
		name, expr, zone, last, now string
		ok                          bool
		due, next                   string
	}{
		{"not yet", "*/5 * * * *", "", "2026-01-01T10:00:00Z", "2026-01-01T10:03:00Z", false, "", "2026-01-01T10:05:00Z"},
		{"exactly due", "*/5 * * * *", "", "2026-01-01T10:00:00Z", "2026-01-01T10:05:00Z", true, "2026-01-01T10:05:00Z", "2026-01-01T10:10:00Z"},
		{"three missed make one run, the newest", "0 * * * *", "", "2026-01-01T10:00:00Z", "2026-01-01T13:30:00Z", true, "2026-01-01T13:00:00Z", "2026-01-01T14:00:00Z"},
		{"time zone", "0 3 * * *", "Europe/Berlin", "2026-01-01T00:00:00Z", "2026-01-01T02:30:00Z", true, "2026-01-01T02:00:00Z", "2026-01-02T02:00:00Z"},
		{"time zone in summer", "0 3 * * *", "Europe/Berlin", "2026-07-01T00:00:00Z", "2026-07-01T01:30:00Z", true, "2026-07-01T01:00:00Z", "2026-07-02T01:00:00Z"},
		{"every minute, down a month", "* * * * *", "", "2026-01-01T00:00:00Z", "2026-02-01T00:00:30Z", true, "2026-02-01T00:00:00Z", "2026-02-01T00:01:00Z"},
	} {
		s, loc, err := Parse(tc.expr, tc.zone)
		if err != nil {
			t.Fatal(err)
		}
		due, ok, next := cronplan.Due(s, loc, mustTime(t, tc.last), mustTime(t, tc.now))
		if ok != tc.ok || (ok && !due.Equal(mustTime(t, tc.due))) || !next.Equal(mustTime(t, tc.next)) {
			t.Errorf("%s: due %v (%v), next %v; want %s (%v), %s", tc.name, due, ok, next, tc.due, tc.ok, tc.next)
		}
	}
	if _, _, err := Parse("* * *", ""); err == nil {
		t.Error("a 3-field expression was accepted")
	}
	if _, _, err := Parse("* * * * *", "Mars/Olympus"); err == nil {
		t.Error("an unknown time zone was accepted")
	}
}

func TestExpiredKeepsTheNewestCompleteSnapshots(t *testing.T) {
	now := mustTime(t, "2026-01-10T00:00:00Z")
	day := func(d int) time.Time { return now.Add(-time.Duration(d) * 24 * time.Hour) }
	snaps := []Snap{
		{Name: "c1", Complete: true, Time: day(5)},
		{Name: "c2", Complete: true, Time: day(4)},
		{Name: "f1", Failed: true, Time: day(3)},
		{Name: "c3", Complete: true, Time: day(2)},
		{Name: "c4", Complete: true, Time: day(1)},
		{Name: "f2", Failed: true, Time: day(0)},
		{Name: "running", Time: day(0)},
	}
	for _, tc := range []struct {
		name   string
		keep   int
		maxAge time.Duration
		want   []string
	}{
		{"keep last 2", 2, 0, []string{"c1", "c2", "f1"}},
		{"max age 3 days", 0, 72 * time.Hour, []string{"c1", "c2", "f1"}},
		{"both", 3, 36 * time.Hour, []string{"c1", "c2", "c3", "f1"}},
		{"no limit", 0, 0, []string{"f1"}},
		{"max age keeps the newest complete", 0, time.Hour, []string{"c1", "c2", "c3", "f1"}},
	} {
		if got := Expired(snaps, tc.keep, tc.maxAge, now); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	if got := Expired([]Snap{{Name: "f", Failed: true, Time: day(9)}}, 1, 0, now); len(got) != 0 {
		t.Errorf("failures with no complete snapshot are kept to be looked at: %v", got)
	}
}
