package cluster

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// memberPVCs gives each member a PVC controlled by the cluster, as an operator before the
// retention policy left them, annotated as the member controller does.
func (h *harness) memberPVCs() {
	h.t.Helper()
	for _, m := range h.members() {
		pvc := &corev1.PersistentVolumeClaim{}
		err := h.api.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: m.Name}, pvc)
		if apierrors.IsNotFound(err) {
			pvc = &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: m.Name, Namespace: "ns", Labels: specs.MemberLabels("db", m.Name)}}
			err = h.api.Create(context.Background(), pvc)
		}
		if err != nil {
			h.t.Fatal(err)
		}
		pvc.Annotations = map[string]string{etcdv1.AnnotationMemberID: m.Status.MemberID, etcdv1.AnnotationClusterID: m.Status.ClusterID}
		pvc.OwnerReferences = nil
		if err := controllerutil.SetControllerReference(h.clusterObj(), pvc, h.api.Scheme()); err != nil {
			h.t.Fatal(err)
		}
		if err := h.api.Update(context.Background(), pvc); err != nil {
			h.t.Fatal(err)
		}
	}
}

func (h *harness) pvc(name string) *corev1.PersistentVolumeClaim {
	return getNamed[corev1.PersistentVolumeClaim](h, name)
}

func (h *harness) deleteCluster() {
	h.t.Helper()
	if err := h.api.Delete(context.Background(), h.clusterObj()); err != nil {
		h.t.Fatal(err)
	}
	h.reconcile()
	if err := h.api.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "db"}, &etcdv1.EtcdCluster{}); !apierrors.IsNotFound(err) {
		h.t.Fatalf("the cluster is still there after its finalizer ran: %v", err)
	}
}

func TestDeletedClusterKeepsItsPVCsByDefault(t *testing.T) {
	h := runningHarness(t)
	h.memberPVCs()
	h.deleteCluster()
	for _, name := range []string{"db-1", "db-2", "db-3"} {
		if refs := h.pvc(name).OwnerReferences; len(refs) != 0 {
			t.Fatalf("PVC %s still has owners %v: garbage collection would delete it", name, refs)
		}
	}
}

func TestDeletedClusterWithWhenDeletedDeleteLeavesPVCsToGarbageCollection(t *testing.T) {
	h := newHarness(t)
	h.editSpec(func(s *etcdv1.EtcdClusterSpec) {
		s.PersistentVolumeClaimRetentionPolicy = &etcdv1.PVCRetentionPolicy{WhenDeleted: etcdv1.PVCDelete}
	})
	h.reconcile()
	h.running()
	if fin := h.clusterObj().Finalizers; len(fin) != 0 {
		t.Fatalf("finalizers %v on a cluster that deletes its PVCs", fin)
	}
	h.memberPVCs()
	h.deleteCluster()
	if ref := metav1.GetControllerOf(h.pvc("db-1")); ref == nil || ref.Kind != "EtcdCluster" {
		t.Fatalf("PVC db-1 controller %+v, want the cluster, for garbage collection", ref)
	}
}

// Under Retain a running cluster's PVCs have no owner at all, so that no garbage collection
// can take them, also not a foreground deletion of the cluster (which deletes dependents
// before any finalizer of the owner could release them); under Delete the cluster controls
// them. A policy change moves them over.
func TestPVCOwnersFollowTheRetentionPolicy(t *testing.T) {
	h := runningHarness(t)
	h.memberPVCs()
	h.reconcile()
	for _, name := range []string{"db-1", "db-2", "db-3"} {
		if refs := h.pvc(name).OwnerReferences; len(refs) != 0 {
			t.Fatalf("Retain: PVC %s has owners %v", name, refs)
		}
	}
	h.editSpec(func(s *etcdv1.EtcdClusterSpec) {
		s.PersistentVolumeClaimRetentionPolicy = &etcdv1.PVCRetentionPolicy{WhenDeleted: etcdv1.PVCDelete}
	})
	h.reconcile()
	for _, name := range []string{"db-1", "db-2", "db-3"} {
		if !metav1.IsControlledBy(h.pvc(name), h.clusterObj()) {
			t.Fatalf("Delete: PVC %s owners %v, want the cluster", name, h.pvc(name).OwnerReferences)
		}
	}
}

// changedAfterRead is a harness in which someone else makes the change *pending, once, right
// after the next read of the cluster, which is then stale.
func changedAfterRead(t *testing.T, pending *func(*etcdv1.EtcdCluster)) *harness {
	return harnessWith(t, interceptor.Funcs{Get: func(ctx context.Context, cl client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		if err := cl.Get(ctx, key, obj, opts...); err != nil {
			return err
		}
		c, ok := obj.(*etcdv1.EtcdCluster)
		if !ok || *pending == nil {
			return nil
		}
		theirs := c.DeepCopy()
		(*pending)(theirs)
		*pending = nil
		return cl.Update(ctx, theirs)
	}})
}

// The retention finalizer is written over the cluster as the reconcile read it: a finalizer
// someone else added or removed meanwhile stays as they left it. The write conflicts, and
// the reconcile ends there without an error (and without a step): the change brings the
// next one, which looks at the cluster as it is then.
func TestTheRetentionFinalizerLeavesOthersFinalizersAlone(t *testing.T) {
	const theirs = "example.com/theirs"
	ctx, req := context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "db"}}
	pending := func(c *etcdv1.EtcdCluster) { controllerutil.AddFinalizer(c, theirs) }
	h := changedAfterRead(t, &pending)
	if res, err := h.r.Reconcile(ctx, req); err != nil || res != (ctrl.Result{}) {
		t.Fatalf("reconcile over a stale read: %+v, %v; want it ended quietly", res, err)
	}
	if fin := h.clusterObj().Finalizers; !slices.Equal(fin, []string{theirs}) {
		t.Fatalf("finalizers %v, want only %s: the stale write is refused", fin, theirs)
	}
	if members := h.members(); len(members) != 0 {
		t.Fatalf("%d members created on a stale read", len(members))
	}
	h.reconcile()
	if fin := h.clusterObj().Finalizers; !slices.Equal(fin, []string{theirs, etcdv1.FinalizerRetainPVCs}) {
		t.Fatalf("finalizers %v after the next reconcile, want %s kept and the retention finalizer added", fin, theirs)
	}

	// Deleting: their finalizer goes while the reconcile releases the PVCs, and must not
	// come back with the retention finalizer's removal.
	if err := h.api.Delete(ctx, h.clusterObj()); err != nil {
		t.Fatal(err)
	}
	pending = func(c *etcdv1.EtcdCluster) { controllerutil.RemoveFinalizer(c, theirs) }
	if res, err := h.r.Reconcile(ctx, req); err != nil || res != (ctrl.Result{}) {
		t.Fatalf("deleting reconcile over a stale read: %+v, %v; want it ended quietly", res, err)
	}
	if fin := h.clusterObj().Finalizers; !slices.Equal(fin, []string{etcdv1.FinalizerRetainPVCs}) {
		t.Fatalf("finalizers %v, want only the retention finalizer: the stale write is refused", fin)
	}
	h.reconcile()
	if err := h.api.Get(ctx, req.NamespacedName, &etcdv1.EtcdCluster{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the cluster is still there after the next reconcile: %v", err)
	}
}
