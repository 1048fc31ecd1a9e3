package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/testrestore"
)

// putKnown writes n keys under prefix, one at a time, and returns the revisions of the first
// and the last.
func putKnown(t *testing.T, cli *clientv3.Client, prefix string, n int) (first, last int64) {
	t.Helper()
	for i := range n {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		resp, err := cli.Put(ctx, fmt.Sprintf("%s/%03d", prefix, i), fmt.Sprintf("%s-%d", prefix, i))
		cancel()
		if err != nil {
			t.Fatalf("putting %s/%03d: %v", prefix, i, err)
		}
		if i == 0 {
			first = resp.Header.Revision
		}
		last = resp.Header.Revision
	}
	return first, last
}

// pitrSchedule is the schedule of TestRestoreToATimeHoldsExactlyTheWritesBeforeIt.
const pitrSchedule = "pitr"

// archiveWindow waits until the archive window of pitrSchedule satisfies ok.
func archiveWindow(t *testing.T, ns, what string, ok func(*etcdv1.RestoreWindow) bool) {
	t.Helper()
	eventually(t, 5*time.Minute, what, func() error {
		st := getSchedule(t, ns, pitrSchedule).Status
		if st.Archive == nil || st.Archive.Window == nil {
			return fmt.Errorf("no window yet: Archived %+v", meta.FindStatusCondition(st.Conditions, etcdv1.SnapshotScheduleConditionArchived))
		}
		if w := st.Archive.Window; !ok(w) {
			return fmt.Errorf("window %d (%v) to %d (%v)", w.Earliest.Revision, w.Earliest.Time, w.Latest.Revision, w.Latest.Time)
		}
		return nil
	})
}

// createClusterAtTarget creates a one-member cluster restored from the snapshots and archive
// of pitrSchedule to target.
func createClusterAtTarget(t *testing.T, ns, name string, target etcdv1.RestoreTarget) {
	t.Helper()
	create(t, &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: etcdv1.EtcdClusterSpec{
		Replicas: ptr(int32(1)), Version: etcdVersion,
		Bootstrap: &etcdv1.BootstrapSpec{Restore: &etcdv1.RestoreSpec{
			Source: etcdv1.RestoreSource{ScheduleRef: &corev1.LocalObjectReference{Name: pitrSchedule}}, Target: &target}}}})
}

// Point-in-time recovery under a writer: a schedule with spec.archive on a 3-member cluster
// (its cron daily, so the only full snapshot is the base the archive asks for) archives every
// change to MinIO. Known keys are written in two batches, the second only once the archive's
// window has passed a whole second T after the first was archived. A one-member cluster
// restored to time T (made by kubectl etcd restore --to T) holds exactly what the source held
// at its own revision (every key, value and mod revision, the writer's keys too): every key
// of the first batch, none of the second. A cluster restored to the first batch's last
// revision holds exactly the source at it.
func TestRestoreToATimeHoldsExactlyTheWritesBeforeIt(t *testing.T) {
	t.Parallel()
	ns, bucket := s3Namespace(t)
	createCluster(t, ns, "source", 3)
	waitSettled(t, ns, "source", 3, 5*time.Minute)
	src := dialClusterWith(t, ns, "source", access{})
	create(t, &etcdv1.EtcdSnapshotSchedule{ObjectMeta: metav1.ObjectMeta{Name: pitrSchedule, Namespace: ns},
		Spec: etcdv1.EtcdSnapshotScheduleSpec{ClusterRef: corev1.LocalObjectReference{Name: "source"}, Schedule: "0 3 * * *",
			Destination: s3Location(t, bucket, "pitr/"),
			Archive:     &etcdv1.SnapshotArchive{SegmentInterval: &metav1.Duration{Duration: time.Second}}}})
	w := startWriter(t, ns, "source", "/writer")
	archiveWindow(t, ns, "a window from the base snapshot", func(*etcdv1.RestoreWindow) bool { return true })
	if c := meta.FindStatusCondition(getSchedule(t, ns, pitrSchedule).Status.Conditions, etcdv1.SnapshotScheduleConditionArchived); c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("Archived %+v with a window", c)
	}

	_, revA := putKnown(t, src, "/known/a", 20)
	archiveWindow(t, ns, fmt.Sprintf("the archive past the first batch (revision %d)", revA), func(w *etcdv1.RestoreWindow) bool {
		return w.Latest.Revision >= revA
	})
	// T: the next whole second (status and spec times are whole seconds); every change of the
	// first batch was received before now. The second batch is written once the archive has
	// stored a moment after T, so each of its changes comes after T.
	target := time.Now().Truncate(time.Second).Add(time.Second)
	archiveWindow(t, ns, "the archive past T", func(w *etcdv1.RestoreWindow) bool {
		return w.Latest.Time != nil && w.Latest.Time.After(target)
	})
	firstB, revB := putKnown(t, src, "/known/b", 20)
	archiveWindow(t, ns, fmt.Sprintf("the archive past the second batch (revision %d)", revB), func(w *etcdv1.RestoreWindow) bool {
		return w.Latest.Revision >= revB
	})
	w.stopAndVerify(t, 10)

	// The cluster at T through the plugin, with the source's settings but one member.
	mustPlugin(t, buildPlugin(t), ns, "restore", "at-time", "--from-schedule", pitrSchedule, "--to", target.UTC().Format(time.RFC3339), "--replicas", "1")
	if got := getCluster(t, ns, "at-time").Spec; got.Version != etcdVersion || got.Bootstrap == nil || !got.Bootstrap.Restore.Target.Time.Equal(&metav1.Time{Time: target}) {
		t.Fatalf("kubectl etcd restore made %+v", got)
	}
	createClusterAtTarget(t, ns, "at-revision", etcdv1.RestoreTarget{Revision: ptr(revA)})
	waitSettled(t, ns, "at-time", 1, 6*time.Minute)
	waitSettled(t, ns, "at-revision", 1, 6*time.Minute)

	atTime := dialClusterWith(t, ns, "at-time", access{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	head, err := atTime.Get(ctx, "/known/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	got := head.Header.Revision
	if got < revA || got >= firstB {
		t.Fatalf("restored to %v at revision %d: want at least the first batch's %d and before the second batch's first %d", target, got, revA, firstB)
	}
	if len(head.Kvs) != 20 || string(head.Kvs[0].Key) != "/known/a/000" || string(head.Kvs[19].Key) != "/known/a/019" {
		t.Fatalf("restored to %v: %d known keys, want exactly the first batch's 20", target, len(head.Kvs))
	}
	testrestore.Compare(t, src, atTime, got, 20)
	if r := testrestore.Compare(t, src, dialClusterWith(t, ns, "at-revision", access{}), revA, 20); r != revA {
		t.Fatalf("restored to revision %d: the cluster is at %d", revA, r)
	}
}
