package cluster

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
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
// write it (the winner's write brings the next look, which refuses), or this operator's
// --cluster-selector does not match it (nothing written: a change of its labels brings the
// next look).
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
	case kit.Ignore:
		lg.Info("the cluster does not match this operator's --cluster-selector: nothing done", "operator", r.Claims.Me, "selector", r.Claims.Selector, "claim", verdict.Holder)
		return true, ctrl.Result{}, nil
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
	lg.Info("the cluster is another operator's: nothing done", "operator", r.Claims.Me, "claim", verdict.Holder, "why", verdict.Why)
	// Looked at again to notice the claimant gone: its Lease is read at most every few
	// seconds for all the clusters it claims.
	return true, ctrl.Result{RequeueAfter: resyncPeriod}, r.reportConflict(ctx, c, verdict)
}

// reportConflict writes the OperatorConflict condition of this operator's refusal, unless
// another refuser's stands (conflictStands): two operators refused by one claimant would
// otherwise rewrite it in turns, each with its own name.
func (r *Reconciler) reportConflict(ctx context.Context, c *etcdv1.EtcdCluster, verdict kit.Verdict) error {
	existing := meta.FindStatusCondition(c.Status.Conditions, etcdv1.ConditionOperatorConflict)
	state, err := r.refuserState(ctx, existing)
	if err != nil {
		return err
	}
	if conflictStands(existing, r.Claims.Me, state, c.Namespace, c.Labels, r.now()) {
		return nil
	}
	return kit.SetCondition(ctx, r.Client, r.Recorder, c, conflictCondition(r.Claims.Me, verdict.Holder, c.Namespace, verdict.Why))
}

// conflictCondition says that operator refuser leaves the cluster to operator holder, and how
// to end the overlap; why is the verdict's (kit.WhyUnelected for a refuser without leader
// election, which the overlap of namespaces does not explain). Its message begins with the
// refuser's identity, which refuserOf reads back: the claimant removes the condition once that
// operator no longer serves the namespace.
func conflictCondition(refuser, holder, namespace, why string) metav1.Condition {
	cond := metav1.Condition{Type: etcdv1.ConditionOperatorConflict, Status: metav1.ConditionTrue,
		Reason: etcdv1.ReasonClaimedByAnotherOperator,
		Message: fmt.Sprintf("%s%s watches namespace %s too and does nothing to this cluster: operator %s manages it (annotation %s). "+
			"Remove %s from one operator's --watch-namespaces (chart value watchNamespaces), or make their --cluster-selector (chart value clusterSelector) exclusive; "+
			"to hand the cluster over instead, set the annotation to the other operator's name",
			conflictPrefix, refuser, namespace, holder, etcdv1.AnnotationOperator, namespace)}
	if why == kit.WhyUnelected {
		cond.Message = fmt.Sprintf("%s%s%s and does nothing to this cluster: operator %s manages it (annotation %s), "+
			"and nobody can tell this one alive to hand it over. Run it with leader election (chart value leaderElection.enabled), "+
			"or remove %s from its --watch-namespaces (chart value watchNamespaces)",
			conflictPrefix, refuser, unelectedMark, holder, etcdv1.AnnotationOperator, namespace)
	}
	return cond
}

// conflictPrefix begins an OperatorConflict message, before the refuser's identity.
const conflictPrefix = "operator "

// unelectedMark follows the refuser's identity in the message of a refuser without leader
// election.
const unelectedMark = " runs without leader election (--leader-elect=false)"

// refuserOf is the operator that wrote an OperatorConflict condition ("" when the message
// does not say), and whether it runs without leader election.
func refuserOf(cond *metav1.Condition) (string, bool) {
	rest, ok := strings.CutPrefix(cond.Message, conflictPrefix)
	if !ok {
		return "", false
	}
	refuser, _, _ := strings.Cut(rest, " ")
	return refuser, strings.HasPrefix(rest, refuser+unelectedMark)
}

// refuserState is what the Lease of the operator that wrote cond says of it, read when
// conflictOver needs it: cond written by another elected operator.
func (r *Reconciler) refuserState(ctx context.Context, cond *metav1.Condition) (kit.Claimant, error) {
	if cond == nil {
		return kit.Claimant{}, nil
	}
	refuser, unelected := refuserOf(cond)
	if refuser == "" || refuser == r.Claims.Me || unelected {
		return kit.Claimant{}, nil
	}
	return r.Claims.Claimant(ctx, refuser)
}

// conflictOver: the OperatorConflict condition cond no longer holds for operator me, because
// its refuser is me (I took the cluster since, or I am to write it anew) or no longer serves
// the cluster (refuserState: its Lease gone, expired, or published without the namespace or
// with a selector the cluster's labels lbls do not match). While the
// refuser serves it, the condition stays: removing or rewriting it would have the refuser
// write it again, and the two operators would write it in turns. A refuser without leader
// election cannot be told gone: its condition stays until a person removes it.
func conflictOver(cond *metav1.Condition, me string, refuserState kit.Claimant, namespace string, lbls labels.Set, now time.Time) bool {
	refuser, unelected := refuserOf(cond)
	switch {
	case refuser == "" || refuser == me:
		return true
	case unelected:
		return false
	}
	serves, _ := refuserState.Serves(namespace, lbls, now)
	return !serves
}

// conflictStands: a refuser me finds the OperatorConflict condition existing (nil when none)
// written by another refuser that still serves the cluster, and leaves it as it is.
func conflictStands(existing *metav1.Condition, me string, refuserState kit.Claimant, namespace string, lbls labels.Set, now time.Time) bool {
	return existing != nil && existing.Status == metav1.ConditionTrue && !conflictOver(existing, me, refuserState, namespace, lbls, now)
}

// dropConflict removes the OperatorConflict condition once the overlap it reports is over
// (conflictOver). A cluster without it costs nothing.
func (r *Reconciler) dropConflict(ctx context.Context, c *etcdv1.EtcdCluster) error {
	cond := meta.FindStatusCondition(c.Status.Conditions, etcdv1.ConditionOperatorConflict)
	if cond == nil {
		return nil
	}
	state, err := r.refuserState(ctx, cond)
	if err != nil {
		return err
	}
	if !conflictOver(cond, r.Claims.Me, state, c.Namespace, c.Labels, r.now()) {
		return nil
	}
	refuser, _ := refuserOf(cond)
	before := c.DeepCopy()
	meta.RemoveStatusCondition(&c.Status.Conditions, etcdv1.ConditionOperatorConflict)
	if err := r.Status().Patch(ctx, c, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return kit.IgnoreConflict(err)
	}
	r.event(ctx, c, corev1.EventTypeNormal, etcdv1.ReasonOperatorConflictResolved, etcdv1.ConditionOperatorConflict,
		"operator %s no longer watches namespace %s or no longer selects this cluster's labels: only operator %s does", refuser, c.Namespace, r.Claims.Me)
	return nil
}
