// Package cronplan says when a cron schedule is due. The EtcdSnapshotSchedule controller and
// the defrag schedule (spec.defrag) share it, so both treat missed times alike: the times
// missed while the operator was down make ONE run, the newest.
//
// The due time names what it starts (the snapshot, the defrag pass), so it must be the same
// at every look until a run is recorded: a look that created the run and failed to record it
// must find the same name at the next look, not make a second run.
package cronplan

import (
	"time"

	"github.com/robfig/cron/v3"
)

const (
	// horizon bounds how far back missed times are looked for: an object created long ago, or
	// an operator down for long, costs at most a week of steps. A five-field schedule runs at
	// most once a minute, so a week is at most 10,080 steps; its times are the wall clock's,
	// so where the walk starts does not move them.
	horizon = 7 * 24 * time.Hour
	// maxSteps bounds the walk for any other cron.Schedule.
	maxSteps = 20000
)

// Due returns the latest time s names after last and not after now (ok is false when there is
// none), and next, the first time s names after now. The schedule is read in loc.
func Due(s cron.Schedule, loc *time.Location, last, now time.Time) (due time.Time, ok bool, next time.Time) {
	if every, isEvery := s.(cron.ConstantDelaySchedule); isEvery {
		return dueEvery(every, last, now)
	}
	if earliest := now.Add(-horizon); last.Before(earliest) {
		last = earliest
	}
	t := s.Next(last.In(loc))
	for i := 0; !t.After(now) && i < maxSteps; i++ {
		due, ok = t, true
		t = s.Next(t)
	}
	// A walk cut short at maxSteps ends on the same time at every look; the next time is then
	// already due, and the runs catch up one look at a time.
	return due, ok, t
}

// dueEvery is Due for @every: its times count from last, not from the clock, so they are
// computed from last, however far back (a walk from a horizon that moves with now would move
// them at every look).
func dueEvery(s cron.ConstantDelaySchedule, last, now time.Time) (due time.Time, ok bool, next time.Time) {
	first := s.Next(last)
	if first.After(now) {
		return time.Time{}, false, first
	}
	due = first.Add(now.Sub(first) / s.Delay * s.Delay)
	return due, true, due.Add(s.Delay)
}
