package schedule

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

// scheduleFixture is one EtcdSnapshotSchedule in a fake API, reconciled at a clock the test
// moves.
type scheduleFixture struct {
	t   *testing.T
	api client.Client
	r   *Reconciler
	now time.Time
}

// newScheduleFixture builds the API holding sc; wrap, when set, wraps the client the
// reconciler uses.
func newScheduleFixture(t *testing.T, sc *etcdv1.EtcdSnapshotSchedule, now time.Time, wrap func(client.Client) client.Client) *scheduleFixture {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := etcdv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	f := &scheduleFixture{t: t, now: now}
	f.api = fake.NewClientBuilder().WithScheme(scheme).WithObjects(sc).
		WithStatusSubresource(&etcdv1.EtcdSnapshotSchedule{}, &etcdv1.EtcdSnapshot{}).Build()
	c := f.api
	if wrap != nil {
		c = wrap(f.api)
	}
	f.r = &Reconciler{Client: c, Now: func() time.Time { return f.now }}
	return f
}

// pvcSchedule is the EtcdSnapshotSchedule "nightly" of cluster "main", created at created,
// storing to the PVC "b" on schedule.
func pvcSchedule(created time.Time, schedule string) *etcdv1.EtcdSnapshotSchedule {
	return &etcdv1.EtcdSnapshotSchedule{
		ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "ns", UID: "sched-uid", CreationTimestamp: metav1.NewTime(created)},
		Spec: etcdv1.EtcdSnapshotScheduleSpec{ClusterRef: corev1.LocalObjectReference{Name: "main"}, Schedule: schedule,
			Destination: etcdv1.SnapshotLocation{PVC: &etcdv1.PVCSnapshotLocation{ClaimName: "b"}}},
	}
}

func (f *scheduleFixture) reconcile() {
	f.t.Helper()
	if _, err := f.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "nightly"}}); err != nil {
		f.t.Fatal(err)
	}
}

func (f *scheduleFixture) snapshots() []etcdv1.EtcdSnapshot {
	f.t.Helper()
	list := &etcdv1.EtcdSnapshotList{}
	if err := f.api.List(context.Background(), list, client.InNamespace("ns")); err != nil {
		f.t.Fatal(err)
	}
	return list.Items
}

func TestScheduleRunsOnceAtATimeAndExpiresOldSnapshots(t *testing.T) {
	ctx := context.Background()
	created := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	keep := int32(2)
	sc := &etcdv1.EtcdSnapshotSchedule{
		ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "ns", UID: "sched-uid", CreationTimestamp: metav1.NewTime(created)},
		Spec: etcdv1.EtcdSnapshotScheduleSpec{ClusterRef: corev1.LocalObjectReference{Name: "main"}, Schedule: "* * * * *",
			Destination: etcdv1.SnapshotLocation{PVC: &etcdv1.PVCSnapshotLocation{ClaimName: "b"}},
			Retention:   etcdv1.SnapshotRetention{KeepLast: &keep},
			Resources:   &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}},
	}
	f := newScheduleFixture(t, sc, created.Add(10*time.Minute+30*time.Second), nil) // ten runs missed
	api, reconcile, snapshots := f.api, f.reconcile, f.snapshots
	reconcile() // finalizer
	reconcile()
	if got := snapshots(); len(got) != 1 {
		t.Fatalf("ten missed runs made %d snapshots, want one", len(got))
	}
	f.now = f.now.Add(time.Minute)
	reconcile()
	if got := snapshots(); len(got) != 1 {
		t.Fatalf("a second snapshot started while the first runs: %d", len(got))
	}
	// Complete every snapshot as it appears, run on for five minutes.
	for range 5 {
		for _, s := range snapshots() {
			if s.Status.Phase == "" {
				s.Status.Phase, s.Status.CompletionTime = etcdv1.SnapshotComplete, &metav1.Time{Time: f.now}
				if err := api.Status().Update(ctx, &s); err != nil {
					t.Fatal(err)
				}
			}
		}
		f.now = f.now.Add(time.Minute)
		reconcile()
	}
	checkKeptTwo(t, api, sc, snapshots())
}

// checkKeptTwo: two complete snapshots remain, each owned by the schedule with policy
// Delete, and the schedule's status names its runs.
func checkKeptTwo(t *testing.T, api client.Client, sc *etcdv1.EtcdSnapshotSchedule, snapshots []etcdv1.EtcdSnapshot) {
	t.Helper()
	complete := 0
	for _, s := range snapshots {
		if s.Status.Phase == etcdv1.SnapshotComplete {
			complete++
		}
		if s.Spec.DeletionPolicy != etcdv1.SnapshotDelete || !metav1.IsControlledBy(&s, sc) {
			t.Errorf("snapshot %s: policy %q, owned %v", s.Name, s.Spec.DeletionPolicy, metav1.IsControlledBy(&s, sc))
		}
		if !equality.Semantic.DeepEqual(s.Spec.Resources, sc.Spec.Resources) {
			t.Errorf("snapshot %s: resources %v, the schedule's %v", s.Name, s.Spec.Resources, sc.Spec.Resources)
		}
	}
	if complete != 2 {
		t.Errorf("%d complete snapshots remain, keepLast is 2", complete)
	}
	got := &etcdv1.EtcdSnapshotSchedule{}
	if err := api.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "nightly"}, got); err != nil {
		t.Fatal(err)
	}
	if got.Status.LastSuccessfulSnapshot == "" || got.Status.NextScheduleTime == nil || got.Status.LastScheduleTime == nil {
		t.Errorf("status %+v", got.Status)
	}
}

// countingStatus counts status writes.
type countingStatus struct {
	client.Client
	writes *int
}

func (c countingStatus) Status() client.SubResourceWriter {
	return countingWriter{c.Client.Status(), c.writes}
}

type countingWriter struct {
	client.SubResourceWriter
	writes *int
}

func (w countingWriter) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	*w.writes++
	return w.SubResourceWriter.Update(ctx, obj, opts...)
}

// A run whose snapshot was created but not recorded (the operator died between the two)
// makes no second snapshot; a reconcile that changes nothing writes nothing.
func TestARunIsTakenOnceAcrossACrashAndQuietReconcilesWriteNothing(t *testing.T) {
	ctx := context.Background()
	created := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	sc := &etcdv1.EtcdSnapshotSchedule{
		ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "ns", UID: "sched-uid", CreationTimestamp: metav1.NewTime(created)},
		Spec: etcdv1.EtcdSnapshotScheduleSpec{ClusterRef: corev1.LocalObjectReference{Name: "main"}, Schedule: "0 * * * *",
			Destination: etcdv1.SnapshotLocation{PVC: &etcdv1.PVCSnapshotLocation{ClaimName: "b"}}},
	}
	writes := 0
	f := newScheduleFixture(t, sc, created.Add(time.Hour+time.Minute), func(c client.Client) client.Client { return countingStatus{c, &writes} })
	api, reconcile, snapshots := f.api, f.reconcile, f.snapshots
	reconcile() // finalizer
	reconcile()
	if got := snapshots(); len(got) != 1 {
		t.Fatalf("%d snapshots, want 1", len(got))
	}
	// The status write of that run is lost.
	got := &etcdv1.EtcdSnapshotSchedule{}
	if err := api.Get(ctx, types.NamespacedName{Namespace: "ns", Name: "nightly"}, got); err != nil {
		t.Fatal(err)
	}
	got.Status = etcdv1.EtcdSnapshotScheduleStatus{}
	if err := api.Status().Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	reconcile()
	s := snapshots()[0]
	s.Status.Phase, s.Status.CompletionTime = etcdv1.SnapshotComplete, &metav1.Time{Time: f.now}
	if err := api.Status().Update(ctx, &s); err != nil {
		t.Fatal(err)
	}
	reconcile()
	if got := snapshots(); len(got) != 1 {
		t.Fatalf("the run was taken again after the lost status write: %d snapshots", len(got))
	}
	if err := api.Get(ctx, types.NamespacedName{Namespace: "ns", Name: "nightly"}, got); err != nil {
		t.Fatal(err)
	}
	if got.Status.LastScheduleTime == nil || !got.Status.LastScheduleTime.Time.Equal(created.Add(time.Hour)) || got.Status.LastSuccessfulSnapshot != s.Name {
		t.Fatalf("status after the run: %+v", got.Status)
	}
	reconcile() // Ready now says when the next run is
	before := writes
	reconcile()
	reconcile()
	if writes != before {
		t.Errorf("%d status writes by reconciles that changed nothing", writes-before)
	}
}

// A suspended schedule starts nothing however many runs pass, plans no next run, and says
// why; resumed, it runs once for the runs it missed.
func TestASuspendedScheduleStartsNothing(t *testing.T) {
	created := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	sc := &etcdv1.EtcdSnapshotSchedule{
		ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "ns", UID: "sched-uid", CreationTimestamp: metav1.NewTime(created)},
		Spec: etcdv1.EtcdSnapshotScheduleSpec{ClusterRef: corev1.LocalObjectReference{Name: "main"}, Schedule: "* * * * *", Suspend: true,
			Destination: etcdv1.SnapshotLocation{PVC: &etcdv1.PVCSnapshotLocation{ClaimName: "b"}}},
	}
	f := newScheduleFixture(t, sc, created.Add(30*time.Second), nil)
	f.reconcile() // finalizer
	for range 5 {
		f.now = f.now.Add(time.Minute)
		f.reconcile()
	}
	got := &etcdv1.EtcdSnapshotSchedule{}
	if err := f.api.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "nightly"}, got); err != nil {
		t.Fatal(err)
	}
	ready := meta.FindStatusCondition(got.Status.Conditions, "Ready")
	if n := len(f.snapshots()); n != 0 || got.Status.NextScheduleTime != nil || got.Status.LastScheduleTime != nil || ready == nil || ready.Reason != "Suspended" {
		t.Fatalf("suspended: %d snapshots, status %+v", n, got.Status)
	}
	got.Spec.Suspend = false
	if err := f.api.Update(context.Background(), got); err != nil {
		t.Fatal(err)
	}
	f.reconcile()
	if n := len(f.snapshots()); n != 1 {
		t.Fatalf("resumed after five missed runs: %d snapshots, want one", n)
	}
}
