package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

// createClusterWith creates a cluster of 3 members with its retention policy set (nil leaves
// the default).
func createClusterWith(t *testing.T, ns, name string, policy *etcdv1.PVCRetentionPolicy) {
	t.Helper()
	c := &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: etcdv1.EtcdClusterSpec{Replicas: ptr(int32(3)), Version: etcdVersion, PersistentVolumeClaimRetentionPolicy: policy}}
	if err := k8s.Create(context.Background(), c); err != nil {
		t.Fatal(err)
	}
}

// A mistaken `kubectl delete etcdcluster` is recoverable by default, also with
// --cascade=foreground (garbage collection deletes the dependents before the owner's
// finalizers are done): the PVCs stay, and the cluster created again under the same name comes back with the same etcd cluster and member
// IDs and every write acknowledged before the delete (and after the re-creation).
func TestDeletedClusterComesBackFromItsKeptPVCs(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	createClusterWith(t, ns, "keep", nil)
	before := waitSettled(t, ns, "keep", 3, 4*time.Minute)
	w := startWriter(t, ns, "keep", "keep")
	eventually(t, time.Minute, "writes acknowledged before the delete", func() error {
		if n := w.acknowledged(); n < 40 {
			return fmt.Errorf("%d acknowledged", n)
		}
		return nil
	})

	deleteAndWaitGone(t, ns, "keep", client.PropagationPolicy(metav1.DeletePropagationForeground))
	kept, err := keptPVCs(ns, "keep")
	if err != nil || len(kept) != 3 {
		t.Fatalf("%d PVCs kept (%v), want 3", len(kept), err)
	}

	createClusterWith(t, ns, "keep", nil)
	after := waitSettled(t, ns, "keep", 3, 5*time.Minute)
	if after.Status.ClusterID != before.Status.ClusterID {
		t.Fatalf("cluster ID %s after re-creation, want the kept cluster's %s", after.Status.ClusterID, before.Status.ClusterID)
	}
	if got, want := fmt.Sprint(sorted(memberIDs(after))), fmt.Sprint(sorted(memberIDs(before))); got != want {
		t.Fatalf("member IDs %s after re-creation, want %s", got, want)
	}
	w.stopAndVerify(t, 40)
}

// whenDeleted Delete takes the PVCs with the cluster.
func TestWhenDeletedDeleteRemovesEverything(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	createClusterWith(t, ns, "bye", &etcdv1.PVCRetentionPolicy{WhenDeleted: etcdv1.PVCDelete})
	waitSettled(t, ns, "bye", 3, 4*time.Minute)
	deleteAndWaitGone(t, ns, "bye")
}

// The documented "delete and create again from yesterday's snapshot", with the PVCs kept (the
// default): the cluster created again with spec.bootstrap.restore neither serves the kept data
// as if it were the snapshot nor writes over it. Nothing is created and Degraded names the
// kept PVCs; once they are deleted (one of the two ways out it names), the snapshot is
// restored: every key written before it, none of those written after.
func TestRecreatedWithARestoreRefusesTheKeptPVCs(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	create(t, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "backups", Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}})
	createClusterWith(t, ns, "again", nil)
	waitSettled(t, ns, "again", 3, 4*time.Minute)
	src := dialClusterWith(t, ns, "again", access{})
	loadKeys(t, src, "/old", 20)
	createSnapshot(t, ns, "yesterday", "again", etcdv1.SnapshotLocation{PVC: &etcdv1.PVCSnapshotLocation{ClaimName: "backups", SubPath: "etcd"}})
	waitSnapshotDone(t, ns, "yesterday", etcdv1.SnapshotComplete)
	loadKeys(t, src, "/new", 30)

	deleteAndWaitGone(t, ns, "again")
	kept, err := keptPVCs(ns, "again")
	if err != nil || len(kept) != 3 {
		t.Fatalf("%d PVCs kept (%v), want 3", len(kept), err)
	}
	createRestoredCluster(t, ns, "again", 3, restoreFromSnapshot("yesterday"))
	eventually(t, 2*time.Minute, "the restore refused, naming the kept PVCs", func() error {
		c := getCluster(t, ns, "again")
		deg := meta.FindStatusCondition(c.Status.Conditions, etcdv1.ConditionDegraded)
		if deg == nil || deg.Reason != "RetainedDataBlocksRestore" {
			return fmt.Errorf("Degraded %+v", deg)
		}
		for _, pvc := range kept {
			if !strings.Contains(deg.Message, pvc.Name) {
				return fmt.Errorf("Degraded does not name PVC %s: %s", pvc.Name, deg.Message)
			}
		}
		return nil
	})
	members := &etcdv1.EtcdMemberList{}
	if err := k8s.List(context.Background(), members, client.InNamespace(ns), client.MatchingLabels{etcdv1.LabelCluster: "again"}); err != nil || len(members.Items) != 0 {
		t.Fatalf("%d EtcdMembers made while the restore is refused (%v)", len(members.Items), err)
	}

	for i := range kept {
		if err := k8s.Delete(context.Background(), &kept[i]); client.IgnoreNotFound(err) != nil {
			t.Fatal(err)
		}
	}
	waitSettled(t, ns, "again", 3, 6*time.Minute)
	dst := dialClusterWith(t, ns, "again", access{})
	if old, newer := countKeys(t, dst, "/old"), countKeys(t, dst, "/new"); old != 20 || newer != 0 {
		t.Fatalf("the restored cluster holds %d keys written before the snapshot (want 20) and %d written after it (want 0)", old, newer)
	}
}
