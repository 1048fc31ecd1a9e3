package cluster

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/failpoint"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// recoveryPlan is what a recovery from the requested member would do, or why it must not.
type recoveryPlan struct {
	source  string
	key     string   // names the recovery in the loss statement; stable while etcd has no quorum
	discard []string // the other members, whose data goes
	loss    string   // what is lost, said before anything happens
	refusal string
}

// planRecovery checks the request against what the members still say about themselves:
// the source must answer as a voter, and no answering member may have applied more than it
// (that member's writes would be lost for nothing). members are every EtcdMember's name.
func planRecovery(requested string, survivors []survivor, members []string, tmpfs bool) recoveryPlan {
	plan := recoveryPlan{source: requested}
	if tmpfs {
		plan.refusal = "a tmpfs cluster cannot be recovered from a member: restarting its Pod with --force-new-cluster would lose the data it is to keep; restore it from a snapshot"
		return plan
	}
	var src *survivor
	var answering []string
	for i := range survivors {
		if survivors[i].answered {
			answering = append(answering, survivors[i].name)
		}
		if survivors[i].name == requested {
			src = &survivors[i]
		}
	}
	switch {
	case src == nil || !src.answered:
		plan.refusal = fmt.Sprintf("member %s does not answer; members that answer: [%s]; set %s to one of them", requested, strings.Join(answering, ", "), etcdv1.AnnotationRecoverFrom)
		return plan
	case src.status.IsLearner:
		plan.refusal = fmt.Sprintf("member %s is a learner and may lack committed writes; recover from a voter", requested)
		return plan
	}
	for _, s := range survivors {
		if s.answered && s.name != requested && s.status.RaftAppliedIndex > src.status.RaftAppliedIndex {
			plan.refusal = fmt.Sprintf("member %s has applied more than %s (raft index %d > %d): recovering from %s would lose writes %s has; set %s to %s",
				s.name, requested, s.status.RaftAppliedIndex, src.status.RaftAppliedIndex, requested, s.name, etcdv1.AnnotationRecoverFrom, s.name)
			return plan
		}
	}
	for _, name := range members {
		if name != requested {
			plan.discard = append(plan.discard, name)
		}
	}
	sort.Strings(plan.discard)
	plan.key = fmt.Sprintf("%s%d", etcdv1.RecoveryKeyPrefix(requested), src.status.Revision)
	plan.loss = fmt.Sprintf("%s (raft term %d, applied index %d): writes the lost quorum acknowledged after that, if any, are lost; the data of [%s] is discarded (their PVCs kept, no member's, until deleted) and new members are added as learners under new names",
		plan.key, src.status.RaftTerm, src.status.RaftAppliedIndex, strings.Join(plan.discard, ", "))
	return plan
}

// statedLoss is the loss statement of a recovery from source that Progressing carries, ""
// when it carries none.
func statedLoss(c *etcdv1.EtcdCluster, source string) string {
	prev := meta.FindStatusCondition(c.Status.Conditions, etcdv1.ConditionProgressing)
	if prev == nil {
		return ""
	}
	if i := strings.Index(prev.Message, etcdv1.RecoveryKeyPrefix(source)); i >= 0 {
		return prev.Message[i:]
	}
	return ""
}

// forcedSourceLoss is the stated loss of a recovery whose source is already marked for
// --force-new-cluster, "" before that.
func forcedSourceLoss(c *etcdv1.EtcdCluster, v *clusterView, requested string) string {
	src := memberNamed(v.members, requested)
	if src == nil || !src.DeletionTimestamp.IsZero() || src.Annotations[etcdv1.AnnotationForceNewCluster] != "true" {
		return ""
	}
	return statedLoss(c, requested)
}

// planRecoveryOf plans a recovery from requested over what the reconcile observed.
func planRecoveryOf(c *etcdv1.EtcdCluster, v *clusterView, requested string, now time.Time) recoveryPlan {
	names := make([]string, 0, len(v.members))
	for _, m := range v.members {
		names = append(names, m.Name)
	}
	plan := planRecovery(requested, v.survivors, names, c.Spec.Storage.Medium == etcdv1.StorageMediumMemory)
	if plan.refusal != "" {
		return plan
	}
	if m := memberNamed(v.members, requested); m != nil && !m.DeletionTimestamp.IsZero() {
		// A recovery under way removes every member but its source: a request changed to
		// one of those would remove (and force) a second member, and its EtcdMember, going,
		// gets no Pod to start.
		plan.refusal = fmt.Sprintf("member %s is being removed (a recovery from another member removes it, and cannot be taken back): it cannot be the source", requested)
	} else if serving := servingOutOfReach(v.lossVotersNow(c, now)); len(serving) > 0 {
		// The recovery would delete their Pods, and their kubelets, which reach the API
		// server, would stop them: the operator would end a quorum that serves and discard
		// what it acknowledged. Proof that they stopped (unstoppedPod) cannot tell this apart.
		plan.refusal = fmt.Sprintf("members [%s] do not answer the operator, but their Pods are Ready: their etcd serves reads through a quorum, so the operator is cut off from them and the quorum is not lost; "+
			"a recovery would stop them and discard what they acknowledged. If they are in fact down, their Pods turn not Ready within seconds (or, on a node that stopped reporting, once the node is marked NotReady)", strings.Join(serving, ", "))
	}
	return plan
}

// recoverQuorum carries out a requested recovery while etcd has no quorum, one act per
// reconcile, each looked for before it is done so that a crash repeats nothing: say what will
// be lost (status and a Warning event) and go no further in that reconcile; then remove every
// other member (the removal mark and the discarded mark: their finalizers keep their PVCs as
// discarded data, and take them out of etcd once the new cluster answers); then stop their Pods; then mark the source; then
// restart its Pod with --force-new-cluster.
func (r *Reconciler) recoverQuorum(ctx context.Context, c *etcdv1.EtcdCluster, v *clusterView) (bool, error) {
	requested := c.Annotations[etcdv1.AnnotationRecoverFrom]
	if requested == "" || v.reachable || c.Status.ClusterID == "" {
		return false, nil
	}
	if loss := forcedSourceLoss(c, v, requested); loss != "" {
		// Past the last check: every other member is removed and stopped, and the source
		// restarts with --force-new-cluster, not answering meanwhile. Nothing is left to
		// choose, so nothing is checked again (a check would refuse, as the source does not
		// answer, and tell the person to pick a member that is gone); the acts go on.
		did, err := r.recoveryAct(ctx, c, v, recoveryPlan{source: requested})
		if err != nil {
			return true, err
		}
		return true, waitFor(etcdv1.ReasonQuorumRecovery, "%s; %s", did, loss)
	}
	plan := planRecoveryOf(c, v, requested, r.now())
	if plan.refusal != "" {
		if !saidInStatus(c, plan.refusal) {
			r.event(ctx, c, corev1.EventTypeWarning, etcdv1.ReasonRecoveryRefused, "RecoverQuorum", "not recovering: %s", plan.refusal)
		}
		return false, waitFor(etcdv1.ReasonRecoveryRefused, "the quorum is lost and %s=%s asks for a recovery, but: %s", etcdv1.AnnotationRecoverFrom, requested, plan.refusal)
	}
	// The statement of what is lost must be in status before any act. Progressing may carry
	// it under ProgressDeadlineExceeded (a quorum lost long ago), so its message is what counts.
	if !saidInStatus(c, plan.key) {
		r.event(ctx, c, corev1.EventTypeWarning, etcdv1.ReasonQuorumRecovery, "RecoverQuorum", "%s", plan.loss)
		return false, waitFor(etcdv1.ReasonQuorumRecovery, "%s", plan.loss)
	}
	did, err := r.recoveryAct(ctx, c, v, plan)
	if err != nil {
		return true, err
	}
	// Each act keeps Progressing on QuorumRecovery (a wait, not a change toward the spec),
	// so the statement of what is lost stays in status until etcd answers: the one first
	// stated, not one recomputed as the acts remove the members it names.
	loss := plan.loss
	if stated := statedLoss(c, requested); stated != "" {
		loss = stated
	}
	return true, waitFor(etcdv1.ReasonQuorumRecovery, "%s; %s", did, loss)
}

// recoveryAct makes the next act of the recovery and says what it did or waits for.
func (r *Reconciler) recoveryAct(ctx context.Context, c *etcdv1.EtcdCluster, v *clusterView, plan recoveryPlan) (string, error) {
	for _, m := range v.members {
		if m.Name != plan.source && m.DeletionTimestamp.IsZero() {
			r.eventAbout(ctx, c, m, corev1.EventTypeWarning, etcdv1.ReasonRecoveryRemovesMember, "RecoverQuorum", "removing member %s: the cluster is rebuilt from %s; its PVC is kept, no member's, until deleted (%s)", m.Name, plan.source, etcdv1.AnnotationDiscardedByRecovery)
			// Removed as any member is, and its data kept rather than deleted (the second
			// mark): it has what the recovery gives up.
			return "removed member " + m.Name, r.markWithAndDelete(ctx, c, m, failpoint.AfterRemovalMark, etcdv1.AnnotationRemove, etcdv1.AnnotationDiscardedByRecovery)
		}
	}
	if pod := unstoppedPod(v, plan.source); pod != nil {
		if !pod.DeletionTimestamp.IsZero() {
			return waitingToStop(pod), nil
		}
		deleted, err := r.deletePod(ctx, pod)
		if deleted {
			r.event(ctx, c, corev1.EventTypeWarning, etcdv1.ReasonRecoveryStopsMember, "RecoverQuorum", "stopping member %s (Pod %s) before %s forces a new cluster", pod.Labels[etcdv1.LabelMember], pod.Name, plan.source)
		}
		return "stopping member " + pod.Labels[etcdv1.LabelMember], err
	}
	src := memberNamed(v.members, plan.source)
	if src == nil {
		return "waiting for the EtcdMember of " + plan.source + " to be rebuilt from its PVC", nil
	}
	if src.Annotations[etcdv1.AnnotationForceNewCluster] != "true" {
		patch := client.MergeFrom(src.DeepCopy())
		if src.Annotations == nil {
			src.Annotations = map[string]string{}
		}
		src.Annotations[etcdv1.AnnotationForceNewCluster] = "true"
		return "marked member " + src.Name + " to start with --force-new-cluster", r.Patch(ctx, src, patch)
	}
	if pod := v.pods[src.Name]; pod != nil && pod.DeletionTimestamp.IsZero() && !specs.ForcesNewCluster(pod) {
		deleted, err := r.deletePod(ctx, pod)
		if deleted {
			r.eventAbout(ctx, c, src, corev1.EventTypeWarning, etcdv1.ReasonForcingNewCluster, "RecoverQuorum", "restarting member %s with --force-new-cluster: it becomes a one-member cluster with its data", src.Name)
		}
		return "restarting member " + src.Name + " with --force-new-cluster", err
	}
	return "waiting for member " + src.Name + " to start as a one-member cluster", nil
}

// unstoppedPod is the first Pod (by name) of a member other than the source that is not
// proven stopped. Those members must stop before the source forces a new cluster: were enough
// of them to serve on (a node cut off from the API server) or come back (a node that returns),
// they would form the old cluster's quorum beside the new one, with the same cluster ID. A
// deletion asked is no proof: a kubelet that cannot reach the API server neither stops the
// containers for it nor says so. The proof is the kubelet's word: a terminal phase (it stopped
// every container and will start none), or the Pod object gone, which the kubelet deletes once
// its containers are gone (Kubernetes does the same for the Pods of a node a person fenced
// with the out-of-service taint). Their EtcdMembers are going by then, so nothing recreates
// these Pods, and their PVCs are kept as discarded data (the removal finalizer).
func unstoppedPod(v *clusterView, source string) *corev1.Pod {
	names := make([]string, 0, len(v.pods))
	for name := range v.pods {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		pod := v.pods[name]
		if member := pod.Labels[etcdv1.LabelMember]; member != "" && member != source && !podStopped(pod) {
			return pod
		}
	}
	return nil
}

// podStopped: the kubelet has said that none of the Pod's containers runs or will run again.
func podStopped(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded
}

// waitingToStop says what a recovery waits for while a member's Pod is being deleted and its
// node has not confirmed it stopped, and how a person ends the wait for a node that is gone.
func waitingToStop(pod *corev1.Pod) string {
	node := pod.Spec.NodeName
	if node == "" {
		node = "(none)"
	}
	return fmt.Sprintf("waiting for member %s to stop: its Pod %s on node %s was deleted at %s and its kubelet has not confirmed that etcd stopped; "+
		"if that node is down or cut off, fence it (kubectl taint node %s node.kubernetes.io/out-of-service=nodeshutdown:NoExecute) or, once you know etcd no longer runs there, "+
		"delete the Pod with --force --grace-period=0: forcing a new cluster while it may serve would leave two clusters with one cluster ID",
		pod.Labels[etcdv1.LabelMember], pod.Name, node, pod.DeletionTimestamp.UTC().Format(time.RFC3339), node)
}

// saidInStatus: Progressing's message says it.
func saidInStatus(c *etcdv1.EtcdCluster, what string) bool {
	prev := meta.FindStatusCondition(c.Status.Conditions, etcdv1.ConditionProgressing)
	return prev != nil && strings.Contains(prev.Message, what)
}

// finishRecovery, once etcd answers again: the request is removed (an event says whether a
// recovery happened), then the source's mark, then the Pod that still carries
// --force-new-cluster is restarted without it before any member joins (a restart of its
// container would otherwise drop the new members again).
func (r *Reconciler) finishRecovery(ctx context.Context, c *etcdv1.EtcdCluster, v *clusterView) (bool, error) {
	var forced *etcdv1.EtcdMember
	for _, m := range v.members {
		if m.Annotations[etcdv1.AnnotationForceNewCluster] == "true" {
			forced = m
		}
	}
	if from := c.Annotations[etcdv1.AnnotationRecoverFrom]; from != "" {
		patch := client.MergeFrom(c.DeepCopy())
		delete(c.Annotations, etcdv1.AnnotationRecoverFrom)
		if err := r.Patch(ctx, c, patch); err != nil {
			return true, err
		}
		if forced != nil {
			r.event(ctx, c, corev1.EventTypeNormal, etcdv1.ReasonQuorumRecovered, "RecoverQuorum", "the cluster answers again as a one-member cluster from %s; new members are added as learners up to %d", forced.Name, ptrOr(c.Spec.Replicas, 3))
		} else {
			r.event(ctx, c, corev1.EventTypeNormal, etcdv1.ReasonRecoveryNotNeeded, "RecoverQuorum", "etcd has a quorum: nothing was recovered, %s=%s removed", etcdv1.AnnotationRecoverFrom, from)
		}
		return true, nil
	}
	if forced != nil {
		patch := client.MergeFrom(forced.DeepCopy())
		delete(forced.Annotations, etcdv1.AnnotationForceNewCluster)
		return true, r.Patch(ctx, forced, patch)
	}
	for _, m := range v.members {
		if pod := v.pods[m.Name]; pod != nil && pod.DeletionTimestamp.IsZero() && specs.ForcesNewCluster(pod) {
			if deleted, err := r.deletePod(ctx, pod); !deleted || err != nil {
				return err != nil, err
			}
			r.eventAbout(ctx, c, m, corev1.EventTypeNormal, etcdv1.ReasonRestartingWithoutForce, "RecoverQuorum", "restarting member %s without --force-new-cluster before members join", m.Name)
			return true, nil
		}
	}
	return false, nil
}

// deletePod deletes that very Pod; false when it was already gone (a stale cache).
func (r *Reconciler) deletePod(ctx context.Context, pod *corev1.Pod) (bool, error) {
	err := r.Delete(ctx, pod, client.Preconditions{UID: &pod.UID})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return false, nil
	}
	return err == nil, err
}
