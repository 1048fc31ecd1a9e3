package cronplan

import (
	"testing"
	"time"

	"github.com/robfig/cron/v3"
)

func TestDueBoundsTheWalkOverMissedTimes(t *testing.T) {
	now := time.Date(2026, 2, 1, 0, 0, 30, 0, time.UTC)
	for _, tc := range []struct {
		name, expr string
		last       time.Time
		due, next  time.Time
	}{
		// A year behind: only the last week is walked, and the newest missed time runs.
		{"every minute, a year behind", "* * * * *", now.AddDate(-1, 0, 0),
			time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 2, 1, 0, 1, 0, 0, time.UTC)},
		// @every counts from the last run however far back: 86,400 s = 12,342 x 7 s + 6 s.
		{"every 7 s, a day behind", "@every 7s", now.AddDate(0, 0, -1), now.Add(-6 * time.Second), now.Add(time.Second)},
		{"every second, a day behind", "@every 1s", now.AddDate(0, 0, -1), now, now.Add(time.Second)},
		// 31 days = 44,640 min = 6,377 x 7 min + 1 min.
		{"every 7 minutes, a month behind", "@every 7m", now.AddDate(0, -1, 0), now.Add(-time.Minute), now.Add(6 * time.Minute)},
	} {
		s, err := cron.ParseStandard(tc.expr)
		if err != nil {
			t.Fatal(err)
		}
		due, ok, next := Due(s, time.UTC, tc.last, now)
		if !ok || !due.Equal(tc.due) || !next.Equal(tc.next) {
			t.Errorf("%s: due %v (%v), next %v; want %v, %v", tc.name, due, ok, next, tc.due, tc.next)
		}
	}
}

// The due time names the run it starts: until a run is recorded, every later look finds the
// same one, however long the schedule was missed and whatever the schedule.
func TestDueIsTheSameAtEveryLook(t *testing.T) {
	now := time.Date(2026, 2, 1, 0, 0, 30, 0, time.UTC)
	for _, tc := range []struct {
		expr string
		last time.Time
	}{
		{"@every 10m", now.AddDate(-1, 0, 0)},
		{"@every 7s", now.AddDate(0, 0, -1)},
		{"*/5 * * * *", now.AddDate(0, -2, 0)},
	} {
		s, err := cron.ParseStandard(tc.expr)
		if err != nil {
			t.Fatal(err)
		}
		first, ok, next := Due(s, time.UTC, tc.last, now)
		if !ok {
			t.Fatalf("%s: not due", tc.expr)
		}
		for _, later := range []time.Duration{time.Second, 3 * time.Second} {
			if at := now.Add(later); at.Before(next) {
				if due, _, _ := Due(s, time.UTC, tc.last, at); !due.Equal(first) {
					t.Errorf("%s: due %v at %v, %v %s later", tc.expr, first, now, due, later)
				}
			}
		}
	}
}
