package controller

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

// defaultQuorumLossGrace is spec.quorumLoss.gracePeriodSeconds when absent.
const defaultQuorumLossGrace = 300 * time.Second

// autoRecovery is the decision of spec.quorumLoss's automatic policy: a member to recover
// from, or how long to wait and why, or nothing (Manual, or no loss recorded yet).
type autoRecovery struct {
	source string
	wait   time.Duration
	why    string
}

// decideAutoRecovery: with policy RecoverFromMostAdvancedMember, once Available has said
// QuorumLost (False) for the grace period, recover from the voter that answers with the most
// applied entries (a tie goes to the higher raft term, then to the lowest ordinal, so every
// look picks the same). available is the condition as stored, whose transition time is when
// the cluster stopped serving, an operator restart notwithstanding.
func decideAutoRecovery(policy *etcdv1.QuorumLossPolicy, available *metav1.Condition, survivors []survivor, now time.Time) autoRecovery {
	if policy == nil || policy.Policy != etcdv1.QuorumLossRecoverFromMostAdvancedMember {
		return autoRecovery{}
	}
	if available == nil || available.Status != metav1.ConditionFalse || available.Reason != ReasonQuorumLost {
		return autoRecovery{} // the loss is recorded by this reconcile; the clock starts then
	}
	grace := defaultQuorumLossGrace
	if policy.GracePeriodSeconds != nil {
		grace = time.Duration(*policy.GracePeriodSeconds) * time.Second
	}
	at := available.LastTransitionTime.Add(grace)
	if now.Before(at) {
		return autoRecovery{wait: at.Sub(now), why: fmt.Sprintf("spec.quorumLoss.policy %s recovers from the most advanced member at %s unless the quorum comes back first",
			policy.Policy, at.UTC().Format(time.RFC3339))}
	}
	var best *survivor
	for i := range survivors {
		s := &survivors[i]
		if !s.answered || s.status.IsLearner {
			continue
		}
		if best == nil || moreAdvanced(s, best) {
			best = s
		}
	}
	if best == nil {
		return autoRecovery{why: fmt.Sprintf("spec.quorumLoss.policy %s: no member answers as a voter, so there is nothing to recover from; bring a member back, or recover from a snapshot with %s",
			policy.Policy, AnnotationRecoverFromSnapshot)}
	}
	return autoRecovery{source: best.name}
}

func moreAdvanced(a, b *survivor) bool {
	if a.status.RaftAppliedIndex != b.status.RaftAppliedIndex {
		return a.status.RaftAppliedIndex > b.status.RaftAppliedIndex
	}
	if a.status.RaftTerm != b.status.RaftTerm {
		return a.status.RaftTerm > b.status.RaftTerm
	}
	return ordinal(a.name) < ordinal(b.name)
}

// recoverAutomatically applies spec.quorumLoss: once it decides, it asks for the recovery
// exactly as a person does (the recover-from annotation), which states the loss before any
// act. A request already there, from a person or from an earlier look, is left alone.
func (r *ClusterReconciler) recoverAutomatically(ctx context.Context, c *etcdv1.EtcdCluster, v *clusterView) (bool, error) {
	if c.Status.ClusterID == "" || c.Annotations[AnnotationRecoverFrom] != "" || c.Annotations[AnnotationRecoverFromSnapshot] != "" {
		return false, nil
	}
	available := meta.FindStatusCondition(c.Status.Conditions, etcdv1.ConditionAvailable)
	d := decideAutoRecovery(c.Spec.QuorumLoss, available, v.survivors, r.now())
	if d.source == "" {
		if d.why == "" {
			return false, nil
		}
		return true, errWaiting{reason: ReasonQuorumLost, message: quorumLostMessage(v.survivors) + "; " + d.why, retryIn: d.wait}
	}
	patch := client.MergeFrom(c.DeepCopy())
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	c.Annotations[AnnotationRecoverFrom] = d.source
	if err := r.Patch(ctx, c, patch); err != nil {
		return true, err
	}
	r.event(c, corev1.EventTypeWarning, "AutomaticRecovery", "RecoverQuorum", "the quorum has been lost since %s: spec.quorumLoss.policy %s asks for the recovery from %s, the most advanced member that answers (%s=%s)",
		available.LastTransitionTime.UTC().Format(time.RFC3339), c.Spec.QuorumLoss.Policy, d.source, AnnotationRecoverFrom, d.source)
	return true, nil
}
