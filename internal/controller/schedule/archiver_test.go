package schedule

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

func (f *scheduleFixture) schedule() *etcdv1.EtcdSnapshotSchedule {
	f.t.Helper()
	sc := &etcdv1.EtcdSnapshotSchedule{}
	if err := f.api.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "nightly"}, sc); err != nil {
		f.t.Fatal(err)
	}
	return sc
}

func (f *scheduleFixture) archiver() (*appsv1.Deployment, error) {
	d := &appsv1.Deployment{}
	return d, f.api.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: specs.ArchiverName("nightly")}, d)
}

// A schedule with spec.archive: the archiver's Deployment and access are made, owned by the
// schedule; once the archiver reports a run no snapshot is inside, a full snapshot is taken at
// once (and not again while it runs); when it completes, the window starts at it, the
// archiver is told to keep the segments from its revision on, and Archived is True; without
// spec.archive the archiver and the status go.
func TestTheArchiveRunsAnArchiverAndTakesABaseAtOnce(t *testing.T) {
	ctx := context.Background()
	created := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	sc := pvcSchedule(created, "0 3 * * *")
	sc.Spec.Archive = &etcdv1.SnapshotArchive{}
	f := newScheduleFixture(t, sc, created.Add(time.Minute), nil)
	f.r.AgentImage = "op:1"
	if err := f.api.Create(ctx, &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "main", Namespace: "ns"}}); err != nil {
		t.Fatal(err)
	}
	f.reconcile() // finalizer
	f.reconcile()
	checkArchiverMade(t, f, sc)
	checkArchiverFollowsTheSpec(t, f)
	f.baseForTheRun()
	checkArchiverRemoved(t, f)
}

// checkArchiverMade: the archiver's Deployment and access are the schedule's; Archived waits
// for its first report, and no snapshot is taken before it.
func checkArchiverMade(t *testing.T, f *scheduleFixture, sc *etcdv1.EtcdSnapshotSchedule) {
	t.Helper()
	ctx := context.Background()
	d, err := f.archiver()
	if err != nil || !metav1.IsControlledBy(d, sc) || d.Spec.Template.Spec.Containers[0].Image != "op:1" {
		t.Fatalf("archiver %v: %+v", err, d)
	}
	if err := f.api.Get(ctx, types.NamespacedName{Namespace: "ns", Name: specs.ArchiverName("nightly")}, &rbacv1.RoleBinding{}); err != nil {
		t.Fatalf("the archiver's access: %v", err)
	}
	if c := meta.FindStatusCondition(f.schedule().Status.Conditions, etcdv1.SnapshotScheduleConditionArchived); c == nil || c.Reason != etcdv1.ReasonArchiveStarting {
		t.Fatalf("Archived %+v before the archiver reported", c)
	}
	if n := len(f.snapshots()); n != 0 {
		t.Fatalf("%d snapshots before the archiver reported", n)
	}

}

// baseForTheRun: once the archiver reports a run without a base, one full snapshot is taken;
// once it completes the window starts at it.
func (f *scheduleFixture) baseForTheRun() {
	t := f.t
	t.Helper()
	ctx := context.Background()
	// The archiver reports its run (as its status sink patches it).
	live := f.schedule()
	live.Status.Archive.Archived = &etcdv1.ArchivedRun{FirstRevision: 100, LastRevision: 140, Until: &metav1.Time{Time: f.now}}
	if err := f.api.Status().Update(ctx, live); err != nil {
		t.Fatal(err)
	}
	f.reconcile()
	snaps := f.snapshots()
	if len(snaps) != 1 {
		t.Fatalf("%d snapshots after the archiver reported a run without a base, want one", len(snaps))
	}
	f.now = f.now.Add(time.Minute)
	f.reconcile()
	if n := len(f.snapshots()); n != 1 {
		t.Fatalf("another base started while one runs: %d", n)
	}
	base := snaps[0]
	base.Status.Phase, base.Status.Revision, base.Status.CompletionTime = etcdv1.SnapshotComplete, 120, &metav1.Time{Time: f.now}
	if err := f.api.Status().Update(ctx, &base); err != nil {
		t.Fatal(err)
	}
	f.reconcile()
	st := f.schedule().Status
	if w := st.Archive.Window; w == nil || w.Earliest.Revision != 120 || w.Latest.Revision != 140 || st.Archive.RetainFromRevision != 120 {
		t.Fatalf("status.archive %+v", st.Archive)
	}
	if c := meta.FindStatusCondition(st.Conditions, etcdv1.SnapshotScheduleConditionArchived); c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("Archived %+v", c)
	}

}

// checkArchiverRemoved: without spec.archive the archiver, its access and the status go.
func checkArchiverRemoved(t *testing.T, f *scheduleFixture) {
	t.Helper()
	ctx := context.Background()
	live := f.schedule()
	live.Spec.Archive = nil
	if err := f.api.Update(ctx, live); err != nil {
		t.Fatal(err)
	}
	f.reconcile()
	if _, err := f.archiver(); !apierrors.IsNotFound(err) {
		t.Fatalf("the archiver stays without spec.archive: %v", err)
	}
	if err := f.api.Get(ctx, types.NamespacedName{Namespace: "ns", Name: specs.ArchiverName("nightly")}, &corev1.ServiceAccount{}); !apierrors.IsNotFound(err) {
		t.Errorf("the archiver's ServiceAccount stays: %v", err)
	}
	if st := f.schedule().Status; st.Archive != nil || meta.FindStatusCondition(st.Conditions, etcdv1.SnapshotScheduleConditionArchived) != nil {
		t.Errorf("the archive's status stays: %+v", st)
	}
}

// checkArchiverFollowsTheSpec: a change of spec.archive reaches the archiver's Deployment.
func checkArchiverFollowsTheSpec(t *testing.T, f *scheduleFixture) {
	t.Helper()
	live := f.schedule()
	live.Spec.Archive.SegmentInterval = &metav1.Duration{Duration: time.Minute}
	if err := f.api.Update(context.Background(), live); err != nil {
		t.Fatal(err)
	}
	f.reconcile()
	d, err := f.archiver()
	if err != nil {
		t.Fatal(err)
	}
	if args := strings.Join(d.Spec.Template.Spec.Containers[0].Args, " "); !strings.Contains(args, "--segment-interval=1m0s") {
		t.Fatalf("the archiver runs %q after spec.archive.segmentInterval became 1m", args)
	}
}

// A cluster whose CA rotation moves on wakes its schedules, and only then: the archiver's
// TLS follows the rotation's stage (specs.ArchiverDeployment).
func TestACARotationWakesTheClustersSchedules(t *testing.T) {
	f := newScheduleFixture(t, pvcSchedule(time.Now(), "@daily"), time.Now(), nil)
	other := pvcSchedule(time.Now(), "@daily")
	other.Name, other.Spec.ClusterRef.Name = "other", "another-cluster"
	if err := f.api.Create(context.Background(), other); err != nil {
		t.Fatal(err)
	}
	c := &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "main", Namespace: "ns"}}
	got := f.r.schedulesOf(context.Background(), c)
	if len(got) != 1 || got[0].Name != "nightly" {
		t.Errorf("schedules of main: %v; want nightly alone", got)
	}
	moved := c.DeepCopy()
	moved.Status.CARotation = &etcdv1.CARotationStatus{Stage: etcdv1.ReasonTrustingBoth}
	rest := c.DeepCopy()
	rest.Status.ReadyMembers = 3
	for name, tc := range map[string]struct {
		before, after *etcdv1.EtcdCluster
		want          bool
	}{"a rotation begins": {c, moved, true}, "another status change": {c, rest, false}, "no change": {moved, moved.DeepCopy(), false}} {
		if got := caRotationMoved(event.UpdateEvent{ObjectOld: tc.before, ObjectNew: tc.after}); got != tc.want {
			t.Errorf("%s: %t; want %t", name, got, tc.want)
		}
	}
}
