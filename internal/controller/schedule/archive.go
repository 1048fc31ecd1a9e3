package schedule

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

// Base is what the archive needs of a Complete snapshot of the schedule: the revision it
// holds and when it completed.
type Base struct {
	Name     string
	Revision int64
	Time     time.Time
}

// baseRetry is how long after the schedule's newest snapshot started a base is asked for
// again: a failing snapshot is not retried in a loop.
const baseRetry = 5 * time.Minute

// Window is what a restore can reach with the archive's newest unbroken run: from the oldest
// base inside it (a revision the run continues: at or after its first revision less one, and
// not after its last) to the newest change stored. Nil while no base is inside the run.
func Window(run *etcdv1.ArchivedRun, bases []Base) *etcdv1.RestoreWindow {
	if run == nil {
		return nil
	}
	var earliest *Base
	for i, b := range bases {
		if b.Revision < run.FirstRevision-1 || b.Revision > run.LastRevision {
			continue
		}
		if earliest == nil || b.Revision < earliest.Revision {
			earliest = &bases[i]
		}
	}
	if earliest == nil {
		return nil
	}
	return &etcdv1.RestoreWindow{
		Earliest: etcdv1.RestorePoint{Revision: earliest.Revision, Time: &metav1.Time{Time: earliest.Time}},
		Latest:   etcdv1.RestorePoint{Revision: run.LastRevision, Time: run.Until.DeepCopy()},
	}
}

// RetainFrom is the revision of the oldest base kept: the segments that end before it serve
// no restore. 0 without a base (nothing is pruned).
func RetainFrom(bases []Base) int64 {
	var oldest int64
	for _, b := range bases {
		if oldest == 0 || b.Revision < oldest {
			oldest = b.Revision
		}
	}
	return oldest
}

// NeedsBase says whether a full snapshot is to be taken now for the archive: the archiver
// reported a run that no base is inside (it just started, or met a gap), no snapshot of the
// cluster runs, and the schedule's newest snapshot started at least baseRetry ago.
func NeedsBase(run *etcdv1.ArchivedRun, bases []Base, running bool, newestStart, now time.Time) bool {
	if run == nil || running || now.Sub(newestStart) < baseRetry {
		return false
	}
	for _, b := range bases {
		if b.Revision >= run.FirstRevision-1 {
			return false
		}
	}
	return true
}

// Archived is the schedule's Archived condition for the archive's status and window.
func Archived(st *etcdv1.ArchiveStatus, window *etcdv1.RestoreWindow) (metav1.ConditionStatus, string, string) {
	switch {
	case st == nil || st.Archived == nil:
		return metav1.ConditionFalse, etcdv1.ReasonArchiveStarting, "the archiver has not reported yet"
	case st.StoreError != "":
		return metav1.ConditionFalse, etcdv1.ReasonArchiveStoreFailing, "the archiver cannot write to the store, and retries: " + st.StoreError
	case window == nil && st.LastGap != nil:
		g := st.LastGap
		return metav1.ConditionFalse, etcdv1.ReasonArchiveGap, fmt.Sprintf(
			"etcd compacted revisions %d to %d before the archiver stored them: no restore crosses them; a full snapshot is taken to start a new window", g.FromRevision, g.ToRevision)
	case window == nil:
		return metav1.ConditionFalse, etcdv1.ReasonArchiveStarting, fmt.Sprintf(
			"the archive runs from revision %d; no Complete snapshot is inside it yet: a full snapshot is taken to start the window", st.Archived.FirstRevision)
	}
	return metav1.ConditionTrue, etcdv1.ReasonArchiving, fmt.Sprintf("a restore can reach revision %d (%s) to revision %d (%s)",
		window.Earliest.Revision, timeOf(window.Earliest.Time), window.Latest.Revision, timeOf(window.Latest.Time))
}

func timeOf(t *metav1.Time) string {
	if t == nil {
		return "time unknown"
	}
	return t.UTC().Format(time.RFC3339)
}
