// Package schedule is the EtcdSnapshotSchedule controller: it creates an EtcdSnapshot at each
// cron time (one at a time per cluster), and deletes the snapshots its retention expires,
// together with their stored files (their deletionPolicy is Delete by default).
package schedule

// time/tzdata: the operator's image is its binary alone, without /usr/share/zoneinfo; without
// the database compiled in (about 450 KB) every spec.timeZone but UTC failed there with
// InvalidSchedule, while the unit tests, on a host with zoneinfo, passed.
import (
	"fmt"
	"sort"
	"time"
	_ "time/tzdata"

	"github.com/robfig/cron/v3"
)

// Parse reads a 5-field cron expression in a time zone ("" is UTC).
func Parse(expr, zone string) (cron.Schedule, *time.Location, error) {
	loc := time.UTC
	if zone != "" {
		l, err := time.LoadLocation(zone)
		if err != nil {
			return nil, nil, fmt.Errorf("spec.timeZone %q is no IANA time zone, for example Europe/Berlin: %w", zone, err)
		}
		loc = l
	}
	s, err := cron.ParseStandard(expr)
	if err != nil {
		return nil, nil, fmt.Errorf("spec.schedule %q: %w", expr, err)
	}
	return s, loc, nil
}

// Snap is what retention needs to know of one EtcdSnapshot.
type Snap struct {
	Name     string
	Complete bool
	Failed   bool
	Time     time.Time // completion time, or creation time while running
}

// Expired lists the snapshots to delete: complete snapshots beyond the newest keepLast or
// older than maxAge (the newest complete snapshot is always kept), and failed snapshots older
// than the newest complete one. Running snapshots are never expired. keepLast 0 and maxAge 0
// mean no limit.
func Expired(snaps []Snap, keepLast int, maxAge time.Duration, now time.Time) []string {
	var complete []Snap
	var newestComplete time.Time
	for _, s := range snaps {
		if s.Complete {
			complete = append(complete, s)
			if s.Time.After(newestComplete) {
				newestComplete = s.Time
			}
		}
	}
	sort.SliceStable(complete, func(i, j int) bool { return complete[i].Time.After(complete[j].Time) })
	var out []string
	for i, s := range complete {
		if i == 0 {
			continue
		}
		if (keepLast > 0 && i >= keepLast) || (maxAge > 0 && now.Sub(s.Time) > maxAge) {
			out = append(out, s.Name)
		}
	}
	for _, s := range snaps {
		if s.Failed && !newestComplete.IsZero() && s.Time.Before(newestComplete) {
			out = append(out, s.Name)
		}
	}
	sort.Strings(out)
	return out
}
