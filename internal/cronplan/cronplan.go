// Package cronplan says when a cron schedule is due. The EtcdSnapshotSchedule controller and
// the defrag schedule (spec.defrag) share it, so both treat missed times alike: the times
// missed while the operator was down make ONE run, the newest.
package cronplan

import (
	"time"

	"github.com/robfig/cron/v3"
)

const (
	// horizon bounds how far back missed times are looked for: an object created long ago, or
	// an operator down for long, costs at most a week of steps.
	horizon = 7 * 24 * time.Hour
	// maxSteps bounds the walk for schedules finer than a minute (@every 1s).
	maxSteps = 20000
)

// Due returns the latest time s names after last and not after now (ok is false when there is
// none), and next, the first time s names after now. The schedule is read in loc.
func Due(s cron.Schedule, loc *time.Location, last, now time.Time) (due time.Time, ok bool, next time.Time) {
	if earliest := now.Add(-horizon); last.Before(earliest) {
		last = earliest
	}
	t := s.Next(last.In(loc))
	for i := 0; !t.After(now) && i < maxSteps; i++ {
		due, ok = t, true
		t = s.Next(t)
	}
	if ok && !t.After(now) {
		// More missed times than maxSteps: the newest one is what matters.
		due, t = now, s.Next(now.In(loc))
	}
	return due, ok, t
}
