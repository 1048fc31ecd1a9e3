package agent

import (
	"context"
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/archive"
)

func scheduleClient(t *testing.T, sc *etcdv1.EtcdSnapshotSchedule) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := etcdv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	return fake.NewClientBuilder().WithScheme(scheme).WithObjects(sc).WithStatusSubresource(sc).Build()
}

// The archiver's sink writes its own fields of status.archive (the run, the lag, a gap, a
// store error) and clears a store error once a write succeeded, leaving the operator's fields
// (window, retainFromRevision) as they are; it writes at once when a gap or a store error
// comes, else at most every archiveReportEvery; and it reads retainFromRevision back for pruning.
func TestArchiveSinkWritesTheArchiversFieldsOfTheScheduleStatus(t *testing.T) {
	ctx := context.Background()
	sc := &etcdv1.EtcdSnapshotSchedule{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "nightly"},
		Status: etcdv1.EtcdSnapshotScheduleStatus{Archive: &etcdv1.ArchiveStatus{RetainFromRevision: 40,
			Window: &etcdv1.RestoreWindow{Earliest: etcdv1.RestorePoint{Revision: 40}, Latest: etcdv1.RestorePoint{Revision: 90}}}}}
	cl := scheduleClient(t, sc)
	sink, err := newArchiveSink(cl, "ns/nightly/uid")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	sink.now = func() time.Time { return now }
	read := func() *etcdv1.ArchiveStatus {
		t.Helper()
		got := &etcdv1.EtcdSnapshotSchedule{}
		if err := cl.Get(ctx, types.NamespacedName{Namespace: "ns", Name: "nightly"}, got); err != nil {
			t.Fatal(err)
		}
		return got.Status.Archive
	}
	for _, step := range sinkSteps(now) {
		now = now.Add(step.advance)
		sink.Report(ctx, step.p)
		if got := read(); !step.ok(got) {
			t.Fatalf("%s: %+v", step.what, got)
		}
	}
	if rev, err := sink.RetainFrom(ctx); err != nil || rev != 40 {
		t.Fatalf("retain from %d, %v", rev, err)
	}
}

// sinkStep is one report to the sink, after the clock advanced, and what status.archive must
// say after it.
type sinkStep struct {
	what    string
	advance time.Duration
	p       archive.Progress
	ok      func(*etcdv1.ArchiveStatus) bool
}

// sinkSteps are the reports of TestArchiveSinkWritesTheArchiversFieldsOfTheScheduleStatus,
// from now on.
func sinkSteps(now time.Time) []sinkStep {
	chain := archive.Chain{First: 30, Last: 100, Until: now.Add(-3 * time.Second)}
	moved := chain
	moved.Last = 120
	gap := &archive.Gap{From: 121, To: 150, Time: now}
	first := now
	return []sinkStep{
		{"the first report, with a store error", 0, archive.Progress{Chain: chain, StoreError: errors.New("bucket gone")}, func(got *etcdv1.ArchiveStatus) bool {
			return got.Archived != nil && got.Archived.FirstRevision == 30 && got.Archived.LastRevision == 100 && got.Lag.Duration == 3*time.Second &&
				got.StoreError == "bucket gone" && got.RetainFromRevision == 40 && got.Window != nil && got.UpdateTime.Time.Equal(first)
		}},
		{"the store error gone: at once", time.Second, archive.Progress{Chain: chain}, func(got *etcdv1.ArchiveStatus) bool {
			return got.StoreError == "" && got.UpdateTime.Time.Equal(first.Add(time.Second))
		}},
		{"only the revision moved: not yet", time.Second, archive.Progress{Chain: moved}, func(got *etcdv1.ArchiveStatus) bool {
			return got.Archived.LastRevision == 100
		}},
		{"a gap: at once", 0, archive.Progress{Chain: archive.Chain{First: 151, Last: 150}, Gap: gap}, func(got *etcdv1.ArchiveStatus) bool {
			return got.LastGap != nil && got.LastGap.FromRevision == 121 && got.LastGap.ToRevision == 150 && got.Archived.FirstRevision == 151
		}},
		{"after the report interval", archiveReportEvery, archive.Progress{Chain: archive.Chain{First: 151, Last: 160, Until: first.Add(2*time.Second + archiveReportEvery)}, Gap: gap}, func(got *etcdv1.ArchiveStatus) bool {
			return got.Archived.LastRevision == 160
		}},
	}
}
