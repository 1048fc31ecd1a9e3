package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

// createClusterWith creates a cluster of n members with its retention policy set (nil leaves
// the default).
func createClusterWith(t *testing.T, ns, name string, n int32, policy *etcdv1.PVCRetentionPolicy) {
	t.Helper()
	c := &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: etcdv1.EtcdClusterSpec{Replicas: &n, Version: etcdVersion, PersistentVolumeClaimRetentionPolicy: policy}}
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
	createClusterWith(t, ns, "keep", 3, nil)
	before := waitSettled(t, ns, "keep", 3, 4*time.Minute)
	w := startWriter(t, ns, "keep", "keep")
	eventually(t, time.Minute, "writes acknowledged before the delete", func() error {
		w.mu.Lock()
		defer w.mu.Unlock()
		if len(w.acked) < 40 {
			return fmt.Errorf("%d acknowledged", len(w.acked))
		}
		return nil
	})

	deleteAndWaitGone(t, ns, "keep", client.PropagationPolicy(metav1.DeletePropagationForeground))
	kept, err := keptPVCs(ns, "keep")
	if err != nil || len(kept) != 3 {
		t.Fatalf("%d PVCs kept (%v), want 3", len(kept), err)
	}

	createClusterWith(t, ns, "keep", 3, nil)
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
	createClusterWith(t, ns, "bye", 3, &etcdv1.PVCRetentionPolicy{WhenDeleted: etcdv1.PVCDelete})
	waitSettled(t, ns, "bye", 3, 4*time.Minute)
	deleteAndWaitGone(t, ns, "bye")
}
