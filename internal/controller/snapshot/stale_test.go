package snapshot

import (
	"context"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// A snapshot deleted just as its Job is created: the deletion makes the write that records
// the start conflict. The record must survive it, or the snapshot goes as if its Job had
// never run, and the file the Job writes stays in the store, no snapshot's.
func TestADeletionThatConflictsWithTheStartStillDeletesTheStoredFile(t *testing.T) {
	ctx := context.Background()
	s := pvcSnapshot()
	s.Spec.DeletionPolicy = etcdv1.SnapshotDelete
	r, api := harness(t, s, availableCluster(), &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "backups", Namespace: "ns"}})
	deleted := false
	r.Client = interceptor.NewClient(api.(client.WithWatch), interceptor.Funcs{
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			if s, ok := obj.(*etcdv1.EtcdSnapshot); ok && !deleted && s.Status.Phase == etcdv1.SnapshotStarted {
				deleted = true
				if err := c.Delete(ctx, s.DeepCopy()); err != nil {
					return err
				}
			}
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
	})
	r.APIReader = api
	deleteJob := types.NamespacedName{Namespace: "ns", Name: specs.SnapshotJobName("s1", specs.ActionDelete)}
	for range 6 {
		// A reconcile that fails is retried by the controller: errors are part of the run.
		_, _ = r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "s1"}})
	}
	if !deleted {
		t.Fatal("the snapshot was not deleted as its start was recorded: the test tests nothing")
	}
	if err := api.Get(ctx, deleteJob, &batchv1.Job{}); err != nil {
		t.Fatalf("no delete Job for a snapshot whose Job had started (%v): its file would stay in the store (snapshot %s)", err, phaseOrGone(api))
	}
}

// phaseOrGone is the snapshot's phase, or "gone".
func phaseOrGone(api client.Client) string {
	s := &etcdv1.EtcdSnapshot{}
	if err := api.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "s1"}, s); err != nil {
		return "gone"
	}
	return string(s.Status.Phase)
}

// A snapshot deleted with its namespace: no delete Job can be created there any more, so the
// finalizer goes without one and the stored file stays, said in an event, instead of holding
// the namespace's deletion forever.
func TestANamespaceBeingDeletedKeepsTheFileAndLetsTheSnapshotGo(t *testing.T) {
	ctx := context.Background()
	s := pvcSnapshot()
	s.Spec.DeletionPolicy = etcdv1.SnapshotDelete
	s.Finalizers = []string{etcdv1.FinalizerSnapshotFile}
	s.Status = etcdv1.EtcdSnapshotStatus{Phase: etcdv1.SnapshotComplete, Artifact: &etcdv1.SnapshotArtifact{URI: "pvc://backups/d/s1.db", Checksum: goodSum}}
	r, api := harness(t, s, availableCluster(), &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "backups", Namespace: "ns"}})
	refused := 0
	r.Client = interceptor.NewClient(api.(client.WithWatch), interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if _, ok := obj.(*batchv1.Job); ok {
				refused++
				return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Reason: metav1.StatusReasonForbidden,
					Message: "unable to create new content in namespace ns because it is being terminated",
					Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: corev1.NamespaceTerminatingCause}}}}}
			}
			return c.Create(ctx, obj, opts...)
		},
	})
	if err := api.Delete(ctx, get(t, api)); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		_, _ = r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "s1"}})
	}
	if refused == 0 {
		t.Fatal("no delete Job was attempted: the test tests nothing")
	}
	if phaseOrGone(api) != "gone" {
		t.Fatalf("the snapshot is still there (%s): its finalizer holds the namespace's deletion", phaseOrGone(api))
	}
}
