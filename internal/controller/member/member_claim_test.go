package member

import (
	"context"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller/kit"
	"github.com/quorumkeeper/etcd-operator/internal/controller/kit/kittest"
)

// A member of a cluster another operator claims is left alone: no Pod, and its finalizer
// does not run when it is deleted (the claimant takes it out of etcd). Once the cluster is
// this operator's, the member is realized.
func TestMemberOfAnotherOperatorsClusterIsLeftAlone(t *testing.T) {
	h := newMemberHarness(t, etcdv1.StorageMediumDefault)
	h.r.Claims = &kit.Claims{Me: "ops-a/x"}
	kittest.SetClaim(t, h.api, client.ObjectKeyFromObject(h.cluster), "ops-b/x")
	h.reconcile("db-1")
	if h.pod("db-1") != nil {
		t.Fatal("a Pod was made for a member of another operator's cluster")
	}
	if err := h.api.Delete(context.Background(), h.member("db-2")); err != nil {
		t.Fatal(err)
	}
	h.reconcile("db-2")
	if m := h.member("db-2"); m == nil || len(m.Finalizers) == 0 {
		t.Fatal("the finalizer of a member of another operator's cluster ran")
	}
	kittest.SetClaim(t, h.api, client.ObjectKeyFromObject(h.cluster), "ops-a/x")
	h.reconcile("db-1")
	if h.pod("db-1") == nil {
		t.Fatal("no Pod once the cluster is this operator's")
	}
}

// The claim written on a cluster wakes its members, which waited for it.
func TestClaimChangeWakesMembers(t *testing.T) {
	t.Parallel()
	old := &etcdv1.EtcdCluster{}
	claimed := old.DeepCopy()
	claimed.Annotations = map[string]string{etcdv1.AnnotationOperator: "ops-a/x"}
	if !claimChanged.Update(event.UpdateEvent{ObjectOld: old, ObjectNew: claimed}) {
		t.Fatal("a claim written did not wake the members")
	}
	if claimChanged.Update(event.UpdateEvent{ObjectOld: claimed, ObjectNew: claimed.DeepCopy()}) {
		t.Fatal("an unchanged claim woke the members")
	}
}

// A cluster's labels changed wake its members (it may have come back into this operator's
// --cluster-selector); its status alone does not.
func TestLabelChangeWakesMembers(t *testing.T) {
	t.Parallel()
	old := &etcdv1.EtcdCluster{}
	old.Labels = map[string]string{"shard": "b"}
	back := old.DeepCopy()
	back.Labels = map[string]string{"shard": "a"}
	if !clusterWakesMembers.Update(event.UpdateEvent{ObjectOld: old, ObjectNew: back}) {
		t.Fatal("a label change did not wake the members")
	}
	status := old.DeepCopy()
	status.Status.ObservedGeneration = 7
	if clusterWakesMembers.Update(event.UpdateEvent{ObjectOld: old, ObjectNew: status}) {
		t.Fatal("a status write woke the members")
	}
}
