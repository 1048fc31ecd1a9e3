package schedule

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

var t0 = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

func mt(d time.Duration) *metav1.Time { return &metav1.Time{Time: t0.Add(d)} }

func TestWindowStartsAtTheOldestSnapshotInsideTheRun(t *testing.T) {
	run := &etcdv1.ArchivedRun{FirstRevision: 100, LastRevision: 500, Until: mt(time.Hour)}
	bases := []Base{{"before", 50, t0}, {"at-start", 99, t0.Add(time.Minute)}, {"inside", 300, t0.Add(30 * time.Minute)}, {"ahead", 600, t0.Add(2 * time.Hour)}}
	for _, tc := range []struct {
		name  string
		run   *etcdv1.ArchivedRun
		bases []Base
		want  int64 // earliest revision; 0: no window
	}{
		{"no report", nil, bases, 0},
		{"a snapshot the run continues", run, bases, 99},
		{"only one inside", run, []Base{bases[0], bases[2]}, 300},
		{"only before the run (a gap) or ahead of it", run, []Base{bases[0], bases[3]}, 0},
		{"no snapshot", run, nil, 0},
	} {
		w := Window(tc.run, tc.bases)
		switch {
		case tc.want == 0 && w != nil:
			t.Errorf("%s: window %+v, want none", tc.name, w)
		case tc.want != 0 && (w == nil || w.Earliest.Revision != tc.want || w.Latest.Revision != 500 || !w.Latest.Time.Equal(run.Until)):
			t.Errorf("%s: window %+v, want from %d to 500", tc.name, w, tc.want)
		}
	}
	if w := Window(run, bases[1:2]); !w.Earliest.Time.Time.Equal(t0.Add(time.Minute)) {
		t.Errorf("earliest time %v, want the snapshot's completion", w.Earliest.Time)
	}
	if got := RetainFrom(bases); got != 50 {
		t.Errorf("retain from %d", got)
	}
	if got := RetainFrom(nil); got != 0 {
		t.Errorf("retain from %d without snapshots", got)
	}
}

func TestNeedsBaseOnceWhenNoSnapshotIsInsideTheRun(t *testing.T) {
	run := &etcdv1.ArchivedRun{FirstRevision: 100, LastRevision: 200}
	old := t0.Add(-time.Hour)
	for _, tc := range []struct {
		name    string
		run     *etcdv1.ArchivedRun
		bases   []Base
		running bool
		newest  time.Time
		want    bool
	}{
		{"a new archive without snapshots", run, nil, false, time.Time{}, true},
		{"after a gap: the snapshots are before it", run, []Base{{"a", 50, old}}, false, old, true},
		{"a snapshot inside", run, []Base{{"a", 150, old}}, false, old, false},
		{"a snapshot just before the start", run, []Base{{"a", 99, old}}, false, old, false},
		{"a snapshot runs", run, nil, true, old, false},
		{"the last one started a moment ago", run, nil, false, t0.Add(-time.Minute), false},
		{"no report yet", nil, nil, false, old, false},
	} {
		if got := NeedsBase(tc.run, tc.bases, tc.running, tc.newest, t0); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestArchivedConditionSaysWhatTheArchiveCanDo(t *testing.T) {
	run := &etcdv1.ArchivedRun{FirstRevision: 100, LastRevision: 200}
	window := &etcdv1.RestoreWindow{Earliest: etcdv1.RestorePoint{Revision: 120, Time: mt(0)}, Latest: etcdv1.RestorePoint{Revision: 200, Time: mt(time.Hour)}}
	gap := &etcdv1.ArchiveGap{FromRevision: 60, ToRevision: 99}
	for _, tc := range []struct {
		name   string
		st     *etcdv1.ArchiveStatus
		window *etcdv1.RestoreWindow
		status metav1.ConditionStatus
		reason string
		says   string
	}{
		{"no report", nil, nil, metav1.ConditionFalse, etcdv1.ReasonArchiveStarting, "not reported"},
		{"the store fails", &etcdv1.ArchiveStatus{Archived: run, StoreError: "AccessDenied"}, window, metav1.ConditionFalse, etcdv1.ReasonArchiveStoreFailing, "AccessDenied"},
		{"a gap, no snapshot after it", &etcdv1.ArchiveStatus{Archived: run, LastGap: gap}, nil, metav1.ConditionFalse, etcdv1.ReasonArchiveGap, "revisions 60 to 99"},
		{"a gap, a snapshot after it", &etcdv1.ArchiveStatus{Archived: run, LastGap: gap}, window, metav1.ConditionTrue, etcdv1.ReasonArchiving, "revision 120"},
		{"no snapshot yet", &etcdv1.ArchiveStatus{Archived: run}, nil, metav1.ConditionFalse, etcdv1.ReasonArchiveStarting, "from revision 100"},
		{"archiving", &etcdv1.ArchiveStatus{Archived: run}, window, metav1.ConditionTrue, etcdv1.ReasonArchiving, "revision 120 (2026-12-02T10:00:00Z) to revision 200 (2026-12-02T11:00:00Z)"},
	} {
		status, reason, msg := Archived(tc.st, tc.window)
		if status != tc.status || reason != tc.reason || !strings.Contains(msg, tc.says) {
			t.Errorf("%s: %s %s %q", tc.name, status, reason, msg)
		}
	}
}

// A snapshot retention deleted but a restore still holds keeps the segments after it: the
// archiver prunes only before the oldest of the kept and the held.
func TestHeldSnapshotsKeepTheirSegments(t *testing.T) {
	sc := &etcdv1.EtcdSnapshotSchedule{ObjectMeta: metav1.ObjectMeta{Name: "nightly"}}
	gone := metav1.NewTime(t0)
	snap := func(name string, deleting bool, finalizers ...string) etcdv1.EtcdSnapshot {
		s := etcdv1.EtcdSnapshot{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{etcdv1.LabelSnapshotSchedule: "nightly"}, Finalizers: finalizers}}
		if deleting {
			s.DeletionTimestamp = &gone
		}
		return s
	}
	items := []etcdv1.EtcdSnapshot{
		snap("kept", false, etcdv1.FinalizerRestoreSource),
		snap("held", true, etcdv1.FinalizerRestoreSource),
		snap("going", true),
	}
	other := snap("other", true, etcdv1.FinalizerRestoreSource)
	other.Labels[etcdv1.LabelSnapshotSchedule] = "hourly"
	got := held(sc, append(items, other))
	if len(got) != 1 || got[0].Name != "held" {
		t.Fatalf("held %v, want the one being deleted that a restore holds", got)
	}
}
