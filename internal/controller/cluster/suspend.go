package cluster

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller/kit"
)

// suspendedCondition says the operator leaves the cluster alone, and how to hand it back.
func suspendedCondition() metav1.Condition {
	return metav1.Condition{Type: etcdv1.ConditionReconcileSuspended, Status: metav1.ConditionTrue,
		Reason: etcdv1.ReasonReconcileSuspended,
		Message: fmt.Sprintf("the operator leaves this cluster and its members alone (no member started, replaced or removed, no status kept); "+
			"remove the annotation %s to hand it back", etcdv1.AnnotationSuspendReconcile)}
}

// dropSuspendedCondition removes the condition once the annotation is gone; the look that
// follows writes the rest of the status anew.
func (r *Reconciler) dropSuspendedCondition(ctx context.Context, c *etcdv1.EtcdCluster) error {
	if meta.FindStatusCondition(c.Status.Conditions, etcdv1.ConditionReconcileSuspended) == nil {
		return nil
	}
	before := c.DeepCopy()
	meta.RemoveStatusCondition(&c.Status.Conditions, etcdv1.ConditionReconcileSuspended)
	if err := r.Status().Patch(ctx, c, client.MergeFrom(before)); err != nil {
		return kit.IgnoreConflict(err)
	}
	r.event(ctx, c, corev1.EventTypeNormal, etcdv1.ReasonReconcileResumed, etcdv1.ConditionReconcileSuspended, "the annotation %s is gone: the operator looks after the cluster again", etcdv1.AnnotationSuspendReconcile)
	return nil
}
