package kit

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

// SetCondition records one of the cluster's conditions that is kept apart from the status the
// reconcile writes at its end (TLSReady, AuthReady, ReconcileSuspended) at once, with an event
// when it changes, so the user sees why the cluster waits. Nothing is written while the
// condition stays the same. It is here, not with the cluster reconciler, because the
// certificates and auth components under children record theirs too.
func SetCondition(ctx context.Context, cl client.StatusClient, rec events.EventRecorder, c *etcdv1.EtcdCluster, cond metav1.Condition) error {
	cond.ObservedGeneration = c.Generation
	old := meta.FindStatusCondition(c.Status.Conditions, cond.Type)
	news := old == nil || old.Status != cond.Status || old.Reason != cond.Reason || old.Message != cond.Message
	if !news && old.ObservedGeneration == cond.ObservedGeneration {
		return nil
	}
	before := c.DeepCopy()
	meta.SetStatusCondition(&c.Status.Conditions, cond)
	// With the resourceVersion read: the patch replaces the whole list of conditions, and a
	// copy older than the stored status (another operator's, refused the cluster, whose
	// cache lags its claimant's writes) must not put older conditions back.
	if err := cl.Status().Patch(ctx, c, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return IgnoreConflict(err)
	}
	if news {
		Emit(ctx, rec, c, nil, eventTypeOf(cond), cond.Reason, cond.Type, "%s", cond.Message)
	}
	return nil
}

// troubleWhenTrue are the condition types that report a problem by being True: the others do
// by being False.
var troubleWhenTrue = map[string]bool{etcdv1.ConditionOperatorConflict: true}

// eventTypeOf is the type of the event that announces cond: Warning for a problem.
func eventTypeOf(cond metav1.Condition) string {
	if (cond.Status == metav1.ConditionTrue) == troubleWhenTrue[cond.Type] {
		return corev1.EventTypeWarning
	}
	return corev1.EventTypeNormal
}

// IgnoreConflict drops a write's conflict: the object changed meanwhile, and the next
// reconcile, which that change brings, looks again.
func IgnoreConflict(err error) error {
	if apierrors.IsConflict(err) {
		return nil
	}
	return err
}
