package cluster

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller/kit"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
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

// lossVoter is one voter of a cluster without a quorum, as the grace clock sees it.
type lossVoter struct {
	name     string
	answered bool // its etcd answers for itself (no quorum needed)
	starting bool // its Pod has not brought etcd up yet (memberStarting)
	// joining: its etcd is up but has not been Ready since it started (memberJoining): it
	// waits for peers to form a quorum with, as every member does after a resume; etcd
	// answers clients only once it has published itself through a quorum.
	joining bool
	// serving: its Pod is Ready, so its kubelet saw etcd's /readyz pass, which takes a
	// linearizable read, hence a quorum; or it answers and names a leader, which it has heard
	// from within an election timeout (a leader that hears from no quorum steps down, and its
	// followers forget it when they campaign). Ready but silent, it serves with a quorum the
	// operator cannot see: the operator, not the quorum, is cut off. A kubelet that stops
	// reporting leaves the Pod Ready until the node lifecycle controller marks it not (about
	// 40 s): a real loss then counts that much later.
	serving bool
}

// String is the voter's state as a log line shows it.
func (m lossVoter) String() string {
	var states []string
	for _, s := range []struct {
		on   bool
		word string
	}{{m.answered, "answers"}, {m.starting, "starting"}, {m.joining, "joining"}, {m.serving, "serving"}} {
		if s.on {
			states = append(states, s.word)
		}
	}
	if len(states) == 0 {
		states = []string{"silent"}
	}
	return m.name + ": " + strings.Join(states, ",")
}

// quorumLossClock is what status.quorumLostSince becomes after a look: when the quorum that
// was expected went missing. missing says the look found a formed cluster whose etcd does not
// answer (Available's QuorumLost); any other look (the quorum back, paused, bootstrapping,
// unreachable) ends the count. Members still starting may yet complete the quorum, after a
// resume or with a Pod replaced, and so may members whose etcd is up and waits for them;
// members whose Pods are Ready, or that name a leader, serve with a quorum (the operator
// may be cut off from it, on the minority side of a network partition): while, with them, a
// quorum could form, nothing expected is lost and there is no count (a recovery from the
// members the operator sees would discard what that quorum acknowledged, and stop it). Once
// none is, or even with them no quorum could form, the count starts, and an earlier start is
// kept. Members up and waiting with no peer still starting count as lost: up together, they
// form a quorum within an election timeout, and one they do not form is a loss. Available's
// transition time cannot serve: from Paused, or any other False reason, to QuorumLost it
// stays at the earlier transition.
func quorumLossClock(since *metav1.Time, missing bool, voters []lossVoter, now time.Time) *metav1.Time {
	if !missing {
		return nil
	}
	peerComing := false
	for _, m := range voters {
		peerComing = peerComing || m.starting
	}
	up, mayServe := 0, 0
	for _, m := range voters {
		expected := m.starting || m.serving || (m.joining && peerComing)
		if expected {
			mayServe++
		}
		if expected || m.answered {
			up++
		}
	}
	if mayServe > 0 && up >= etcd.Quorum(len(voters)) {
		return nil
	}
	if since != nil {
		return since
	}
	return &metav1.Time{Time: now.Truncate(time.Second)}
}

// quorumMissing: the look found a formed cluster, meant to run, whose etcd does not answer
// although a client was opened; what availableCondition calls QuorumLost without a member list.
// A cluster being deleted is not meant to run: its Pods going is no loss.
func quorumMissing(c *etcdv1.EtcdCluster, v *clusterView) bool {
	return ptrOr(c.Spec.Replicas, 3) > 0 && c.DeletionTimestamp.IsZero() && c.Status.ClusterID != "" && !v.reachable && v.clientErr == nil
}

// quorumLossCount is the grace clock as one look leaves it, and the voters it counted on.
type quorumLossCount struct {
	since  *metav1.Time
	voters []lossVoter
}

// quorumLoss works the grace clock out once a look (quorumLossClock over lossVoters, from the
// count stored in the status): the automatic recovery, a requested recovery's refusal and the
// status writer decide on the same count, and a recovery patching the cluster in between
// does not make the status writer count again from what it read back.
func (v *clusterView) quorumLoss(c *etcdv1.EtcdCluster, now time.Time) (*metav1.Time, []lossVoter) {
	if v.loss == nil {
		voters := lossVoters(v, now)
		v.loss = &quorumLossCount{since: quorumLossClock(c.Status.QuorumLostSince, quorumMissing(c, v), voters, now), voters: voters}
	}
	return v.loss.since, v.loss.voters
}

// lossVotersNow are the voters this look's grace clock counted on (quorumLoss).
func (v *clusterView) lossVotersNow(c *etcdv1.EtcdCluster, now time.Time) []lossVoter {
	_, voters := v.quorumLoss(c, now)
	return voters
}

// lossVoters are the members that may be voters (all but those that answer as learners), each
// with whether its etcd answers, whether its Pod is still starting, and whether it is Ready.
func lossVoters(v *clusterView, now time.Time) []lossVoter {
	out := make([]lossVoter, 0, len(v.survivors))
	for _, s := range v.survivors {
		if s.answered && s.status.IsLearner {
			continue
		}
		pod := v.pods[s.name]
		out = append(out, lossVoter{name: s.name, answered: s.answered, starting: memberStarting(pod, now), joining: memberJoining(pod, now),
			serving: podServes(pod) || (s.answered && s.status.Leader != 0)})
	}
	return out
}

// memberStarting: the Pod has not brought its etcd up yet and nothing in it has failed: it
// waits for a node, its volumes or its images (phase Pending), or its etcd container has not
// passed its startup probe (/livez, which needs no quorum). A Pod freshPod refuses is not
// starting: its member is lost until it answers, and a quorum lost for good is still
// recovered.
func memberStarting(pod *corev1.Pod, now time.Time) bool {
	if !freshPod(pod, now) {
		return false
	}
	switch pod.Status.Phase {
	case corev1.PodPending:
		return true
	case corev1.PodRunning:
		cs := etcdContainerStatus(pod)
		return cs != nil && (cs.Started == nil || !*cs.Started)
	}
	return false
}

// memberJoining: the Pod's etcd is up (its startup probe passed) and has not been Ready since
// its container started: it waits for peers to form a quorum with. A member that was Ready
// and no longer is has lost its quorum instead.
func memberJoining(pod *corev1.Pod, now time.Time) bool {
	if !freshPod(pod, now) || pod.Status.Phase != corev1.PodRunning {
		return false
	}
	cs := etcdContainerStatus(pod)
	if cs == nil || cs.Started == nil || !*cs.Started || cs.Ready || cs.State.Running == nil {
		return false
	}
	for _, cond := range pod.Status.Conditions {
		if cond.Type == corev1.PodReady {
			return cond.Status != corev1.ConditionTrue && !cond.LastTransitionTime.After(cs.State.Running.StartedAt.Time)
		}
	}
	return true
}

// freshPod: a Pod that may still bring its etcd up: not being deleted, placed or placeable,
// no container in it restarted, and younger than the time its startup probe gives etcd to
// come up. A Pod the scheduler can place nowhere, one being deleted, one whose containers
// started and died, or one still not up past that time (a volume that never attaches) is
// not. No Pod at all is not either: a member's Pod is made again at once, and is then
// Pending.
func freshPod(pod *corev1.Pod, now time.Time) bool {
	if pod == nil || !pod.DeletionTimestamp.IsZero() || kit.PodUnschedulable(pod) || now.Sub(pod.CreationTimestamp.Time) > startupBudget(pod) {
		return false
	}
	for _, cs := range append(append([]corev1.ContainerStatus{}, pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...) {
		if cs.RestartCount > 0 {
			return false
		}
	}
	return true
}

func etcdContainerStatus(pod *corev1.Pod) *corev1.ContainerStatus {
	for i := range pod.Status.ContainerStatuses {
		if pod.Status.ContainerStatuses[i].Name == specs.ContainerName {
			return &pod.Status.ContainerStatuses[i]
		}
	}
	return nil
}

// defaultStartupBudget bounds the start of a Pod whose etcd container has no startup probe
// (one another operator made): as long as the operator's own probe allows.
const defaultStartupBudget = 300 * time.Second

// startupBudget is how long the Pod's etcd may take to come up: its startup probe's period
// times its failure threshold, after which the kubelet would restart it.
func startupBudget(pod *corev1.Pod) time.Duration {
	for _, c := range pod.Spec.Containers {
		if c.Name == specs.ContainerName && c.StartupProbe != nil {
			return time.Duration(c.StartupProbe.PeriodSeconds*c.StartupProbe.FailureThreshold) * time.Second
		}
	}
	return defaultStartupBudget
}

// decideAutoRecovery: with policy RecoverFromMostAdvancedMember, once the quorum has been
// missing for the grace period, counted from since (quorumLossClock: when a quorum that was
// expected went missing, kept in the status across operator restarts), recover from the voter
// that answers with the most applied entries (a tie goes to the higher raft term, then to the
// lowest ordinal, so every look picks the same).
func decideAutoRecovery(policy *etcdv1.QuorumLossPolicy, since *metav1.Time, survivors []survivor, now time.Time) autoRecovery {
	if policy == nil || policy.Policy != etcdv1.QuorumLossRecoverFromMostAdvancedMember {
		return autoRecovery{}
	}
	if since == nil {
		return autoRecovery{} // no loss counted: paused, members starting, or not looked at yet
	}
	grace := defaultQuorumLossGrace
	if policy.GracePeriodSeconds != nil {
		grace = time.Duration(*policy.GracePeriodSeconds) * time.Second
	}
	at := since.Add(grace)
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
			policy.Policy, etcdv1.AnnotationRecoverFromSnapshot)}
	}
	return autoRecovery{source: best.name}
}

// cutOffFrom says, under the automatic policy, which voters serve out of the operator's
// reach (servingOutOfReach), and that nothing is recovered while so; "" when none.
func cutOffFrom(policy *etcdv1.QuorumLossPolicy, voters []lossVoter) string {
	if policy == nil || policy.Policy != etcdv1.QuorumLossRecoverFromMostAdvancedMember {
		return ""
	}
	names := servingOutOfReach(voters)
	if len(names) == 0 {
		return ""
	}
	return fmt.Sprintf("members [%s] do not answer the operator, but their Pods are Ready (their etcd serves reads through a quorum): the operator is cut off from them, the quorum is not lost; spec.quorumLoss.policy %s recovers nothing while they serve",
		strings.Join(names, ", "), policy.Policy)
}

// servingOutOfReach names the voters that do not answer the operator while their Pods are
// Ready, when with them and those that answer a quorum could form: a quorum the operator
// cannot see may serve. nil otherwise.
func servingOutOfReach(voters []lossVoter) []string {
	var names []string
	up := 0
	for _, m := range voters {
		if m.serving && !m.answered {
			names = append(names, m.name)
		}
		if m.serving || m.answered {
			up++
		}
	}
	if up < etcd.Quorum(len(voters)) {
		return nil
	}
	return names
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
func (r *Reconciler) recoverAutomatically(ctx context.Context, c *etcdv1.EtcdCluster, v *clusterView) (bool, error) {
	if c.Status.ClusterID == "" || c.Annotations[etcdv1.AnnotationRecoverFrom] != "" || c.Annotations[etcdv1.AnnotationRecoverFromSnapshot] != "" {
		return false, nil
	}
	// The clock as this look leaves it, not only as stored: a member that started since the
	// last look ends the count before anything acts on it.
	since, voters := v.quorumLoss(c, r.now())
	d := decideAutoRecovery(c.Spec.QuorumLoss, since, v.survivors, r.now())
	if d.source == "" && d.why == "" && since == nil && quorumMissing(c, v) {
		d.why = cutOffFrom(c.Spec.QuorumLoss, voters)
	}
	if d.source == "" {
		if d.why == "" {
			return false, nil
		}
		return true, kit.Waiting{Reason: etcdv1.ReasonQuorumLost, Message: quorumLostMessage(v.survivors) + "; " + d.why, RetryIn: d.wait}
	}
	if err := r.requestRecovery(ctx, c, d.source); err != nil {
		return true, err
	}
	r.event(ctx, c, corev1.EventTypeWarning, etcdv1.ReasonAutomaticRecovery, "RecoverQuorum", "the quorum has been lost since %s: spec.quorumLoss.policy %s asks for the recovery from %s, the most advanced member that answers (%s=%s)",
		since.UTC().Format(time.RFC3339), c.Spec.QuorumLoss.Policy, d.source, etcdv1.AnnotationRecoverFrom, d.source)
	return true, nil
}

// requestRecovery writes the recover-from annotation onto the version of the cluster the
// decision read, and onto no other: the recovery it starts discards what the other members
// hold, so a spec changed since (the policy set to Manual, the grace period raised, the
// cluster paused) must be looked at again, not overwritten. A conflict is the retry.
func (r *Reconciler) requestRecovery(ctx context.Context, c *etcdv1.EtcdCluster, source string) error {
	patch := client.MergeFromWithOptions(c.DeepCopy(), client.MergeFromWithOptimisticLock{})
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	c.Annotations[etcdv1.AnnotationRecoverFrom] = source
	return r.Patch(ctx, c, patch)
}
