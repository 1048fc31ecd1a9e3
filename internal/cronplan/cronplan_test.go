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
		// More missed times in a week than maxSteps: the run is now, the next one after it.
		{"every second, a day behind", "@every 1s", now.AddDate(0, 0, -1), now, now.Add(time.Second)},
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
