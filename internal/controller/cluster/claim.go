package cluster

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller/kit"
)

// claim decides whether this operator manages the cluster (kit.ClaimVerdict), before anything
// else, its deletion included. True when the reconcile ends here: the cluster is another
// live operator's (the OperatorConflict condition says so, written once), or this operator
// just wrote its claim (the write brings the next look, which acts), or lost the race to
// write it (the winner's write brings the next look, which refuses).
func (r *Reconciler) claim(ctx context.Context, c *etcdv1.EtcdCluster) (bool, ctrl.Result, error) {
	if r.Claims == nil {
		return false, ctrl.Result{}, nil
	}
	verdict, err := r.Claims.Verdict(ctx, c)
	if err != nil {
		return true, ctrl.Result{}, err
	}
	lg := log.FromContext(ctx).V(1)
	switch verdict.Kind {
	case kit.Mine:
		return false, ctrl.Result{}, r.dropConflict(ctx, c)
	case kit.Take:
		taken, err := r.Claims.Take(ctx, r.Client, c)
		lg.Info("claiming the cluster", "operator", r.Claims.Me, "from", verdict.Holder, "why", verdict.Why, "taken", taken)
		if taken && verdict.Holder != "" {
			r.event(ctx, c, corev1.EventTypeNormal, etcdv1.ReasonClaimTakenOver, "Claim", "operator %s took the cluster over from operator %s: %s", r.Claims.Me, verdict.Holder, verdict.Why)
		}
		return true, ctrl.Result{}, err
	}
	lg.Info("the cluster is another operator's: nothing done", "operator", r.Claims.Me, "claim", verdict.Holder)
	// Looked at again to notice the claimant gone: its Lease is read at most every few
	// seconds for all the clusters it claims.
	return true, ctrl.Result{RequeueAfter: resyncPeriod}, kit.SetCondition(ctx, r.Client, r.Recorder, c, conflictCondition(r.Claims.Me, verdict.Holder, c.Namespace))
}

// conflictCondition says that operator refuser leaves the cluster to operator holder, and how
// to end the overlap. Its message begins with the refuser's identity, which refuserOf reads
// back: the claimant removes the condition once that operator no longer serves the namespace.
func conflictCondition(refuser, holder, namespace string) metav1.Condition {
	return metav1.Condition{Type: etcdv1.ConditionOperatorConflict, Status: metav1.ConditionTrue,
		Reason: etcdv1.ReasonClaimedByAnotherOperator,
		Message: fmt.Sprintf("%s%s watches namespace %s too and does nothing to this cluster: operator %s manages it (annotation %s). "+
			"Remove %s from one operator's --watch-namespaces (chart value watchNamespaces); to hand the cluster over instead, set the annotation to the other operator's name",
			conflictPrefix, refuser, namespace, holder, etcdv1.AnnotationOperator, namespace)}
}

// conflictPrefix begins an OperatorConflict message, before the refuser's identity.
const conflictPrefix = "operator "

// refuserOf is the operator that wrote an OperatorConflict condition ("" when the message
// does not say).
func refuserOf(cond *metav1.Condition) string {
	rest, ok := strings.CutPrefix(cond.Message, conflictPrefix)
	if !ok {
		return ""
	}
	refuser, _, _ := strings.Cut(rest, " ")
	return refuser
}

// conflictOver: the OperatorConflict condition written by refuser no longer holds for the
// claimant me, because the refuser is me (I took the cluster since) or no longer serves the
// namespace (its Lease gone, expired, or published without it). While the refuser serves it,
// the condition stays: removing it would have the refuser write it again, and the two
// operators would write it in turns.
func conflictOver(refuser, me string, refuserState kit.Claimant, namespace string, now time.Time) bool {
	if refuser == "" || refuser == me {
		return true
	}
	serves, _ := refuserState.Serves(namespace, now)
	return !serves
}

// dropConflict removes the OperatorConflict condition once the overlap it reports is over
// (conflictOver). A cluster without it costs nothing.
func (r *Reconciler) dropConflict(ctx context.Context, c *etcdv1.EtcdCluster) error {
	cond := meta.FindStatusCondition(c.Status.Conditions, etcdv1.ConditionOperatorConflict)
	if cond == nil {
		return nil
	}
	refuser := refuserOf(cond)
	var state kit.Claimant
	if refuser != "" && refuser != r.Claims.Me {
		var err error
		if state, err = r.Claims.Claimant(ctx, refuser); err != nil {
			return err
		}
	}
	if !conflictOver(refuser, r.Claims.Me, state, c.Namespace, r.now()) {
		return nil
	}
	before := c.DeepCopy()
	meta.RemoveStatusCondition(&c.Status.Conditions, etcdv1.ConditionOperatorConflict)
	if err := r.Status().Patch(ctx, c, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return kit.IgnoreConflict(err)
	}
	r.event(ctx, c, corev1.EventTypeNormal, etcdv1.ReasonOperatorConflictResolved, etcdv1.ConditionOperatorConflict,
		"operator %s no longer watches namespace %s: only operator %s does", refuser, c.Namespace, r.Claims.Me)
	return nil
}
