package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller/kit"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
	"github.com/quorumkeeper/etcd-operator/internal/metrics"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// updateStatus writes what the view shows, and only when it differs from what is stored, so
// that a cluster at rest costs no API writes.
func (r *Reconciler) updateStatus(ctx context.Context, c *etcdv1.EtcdCluster, v *clusterView, step stepResult) error {
	before := c.DeepCopy()
	s := &c.Status
	s.ObservedGeneration = c.Generation
	s.Selector = specs.Selector(c.Name)
	if v.reachable && v.clusterID != 0 {
		s.ClusterID = etcd.FormatID(v.clusterID)
	}
	s.Members = memberSummaries(c, v)
	s.Version = clusterVersion(s.Members, s.Version)
	s.ReadyMembers, s.Voters, s.Learners = 0, 0, 0
	for _, m := range s.Members {
		if m.Ready {
			s.ReadyMembers++
		}
		switch m.Role {
		case etcdv1.RoleVoter:
			s.Voters++
		case etcdv1.RoleLearner:
			s.Learners++
		}
	}
	since, voters := v.quorumLoss(c, r.now())
	s.QuorumLostSince = since
	logQuorumLossClock(ctx, before.Status.QuorumLostSince, since, voters)
	setConditions(c, v, step, r.now())
	r.setAlarmCondition(ctx, c, v)
	setDiscardedCondition(c, v.discardedCondition)
	if v.caRotation != nil {
		meta.SetStatusCondition(&c.Status.Conditions, *v.caRotation)
	}
	if v.caRotationStatus != nil {
		c.Status.CARotation = v.caRotationStatus
	}
	if v.volumes != nil {
		v.volumes.ObservedGeneration = c.Generation
		meta.SetStatusCondition(&c.Status.Conditions, *v.volumes)
	}
	metrics.ObserveStatus(before, c, step.err, r.now())
	if equality.Semantic.DeepEqual(before.Status, c.Status) {
		return nil
	}
	if restoreFailed(c) && !restoreFailed(before) {
		cond := meta.FindStatusCondition(c.Status.Conditions, etcdv1.ConditionAvailable)
		r.event(ctx, c, corev1.EventTypeWarning, etcdv1.ReasonRestoreFailed, "Restore", "%s", cond.Message)
	}
	if deadlineExceeded(c) && !deadlineExceeded(before) {
		cond := meta.FindStatusCondition(c.Status.Conditions, etcdv1.ConditionProgressing)
		r.event(ctx, c, corev1.EventTypeWarning, etcdv1.ReasonProgressDeadlineExceeded, "Reconcile", "%s", cond.Message)
	}
	// With the resourceVersion read: a copy from a cache that has not caught up with the last
	// write (ours or a person's) must not overwrite what is newer, which would turn condition
	// times back and undo fields written since. The conflict brings the newer object, which
	// is looked at again.
	return kit.IgnoreConflict(r.Status().Patch(ctx, c, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})))
}

func memberSummaries(c *etcdv1.EtcdCluster, v *clusterView) []etcdv1.MemberSummary {
	out := make([]etcdv1.MemberSummary, 0, len(v.members))
	for _, m := range v.members {
		sum := etcdv1.MemberSummary{Name: m.Name, ID: m.Status.MemberID, Role: m.Status.Role, Version: m.Status.Version}
		if em, ok := v.etcdMemberFor(c, m); ok {
			sum.ID = em.IDHex()
			sum.Role = etcdv1.RoleVoter
			if em.IsLearner {
				sum.Role = etcdv1.RoleLearner
			}
			// The Pod too: the EtcdMember's Ready condition follows its Pod a moment later,
			// and etcd of a member restarted in place answers before its new Pod turns Ready;
			// a status written in between read as settled in the middle of a roll.
			sum.Ready = v.healthy[em.ID] && meta.IsStatusConditionTrue(m.Status.Conditions, etcdv1.MemberConditionReady) &&
				podServes(v.pods[m.Name])
			if ver := v.versions[em.ID]; ver != "" {
				sum.Version = ver
			}
		}
		out = append(out, sum)
	}
	return out
}

// stepResult is what the reconcile's one step did: a change, or why it waited or failed.
type stepResult struct {
	progressed bool
	err        error
}

// availableCondition says whether the cluster serves: paused, bootstrapping, unreachable, its
// quorum lost (with what each member still has), or healthy.
func availableCondition(c *etcdv1.EtcdCluster, v *clusterView, replicas int) metav1.Condition {
	total, healthy := v.voters()
	available := metav1.Condition{Type: etcdv1.ConditionAvailable, Status: metav1.ConditionFalse}
	switch {
	case replicas == 0:
		available.Reason, available.Message = etcdv1.ReasonPaused, "spec.replicas is 0: every member is stopped, its data kept"
	case !v.reachable && c.Status.ClusterID == "" && v.restoreFailure != "":
		available.Reason, available.Message = etcdv1.ReasonRestoreFailed, restoreSubject(c)+" failed, no member serves: "+v.restoreFailure
	case !v.reachable && c.Status.ClusterID == "":
		available.Reason, available.Message = etcdv1.ReasonBootstrapping, "the founding members have not formed the cluster yet"
		if v.restoreProgress != "" {
			available.Message += ": " + v.restoreProgress
		}
	case !v.reachable && v.clientErr != nil:
		available.Reason, available.Message = etcdv1.ReasonUnreachable, "no etcd client could be opened: "+v.clientErr.Error()
	case !v.reachable:
		// etcd's member list is a linearizable read: without a quorum nothing answers it,
		// but each member still says what it has.
		available.Reason, available.Message = etcdv1.ReasonQuorumLost, quorumLostMessage(v.survivors)
	case healthy >= etcd.Quorum(total):
		available.Status, available.Reason = metav1.ConditionTrue, etcdv1.ReasonQuorumHealthy
		available.Message = fmt.Sprintf("%d of %d voters healthy", healthy, total)
	default:
		// etcd's member list answered, which only a quorum does: what failed is the
		// operator's health checks (loaded members, ones starting). Never QuorumLost here:
		// kubectl etcd recover acts only on that reason, and would throw members away from a
		// cluster that has its quorum.
		available.Reason = etcdv1.ReasonMembersUnhealthy
		available.Message = fmt.Sprintf("etcd's member list answers, so a quorum serves, but only %d of %d voters answered the operator's health check", healthy, total)
	}
	return available
}

// setConditions turns the view into Available, Progressing and Degraded with reasons a
// person can act on.
func setConditions(c *etcdv1.EtcdCluster, v *clusterView, step stepResult, now time.Time) {
	replicas := int(ptrOr(c.Spec.Replicas, 3))
	stepErr := step.err
	var waiting kit.Waiting
	isWaiting := errors.As(stepErr, &waiting)

	available := availableCondition(c, v, replicas)

	progressing := metav1.Condition{Type: etcdv1.ConditionProgressing, Status: metav1.ConditionFalse, Reason: etcdv1.ReasonIdle, Message: "the cluster matches its spec"}
	if inMotion(v, replicas) || isWaiting {
		progressing.Status, progressing.Reason = metav1.ConditionTrue, etcdv1.ReasonScaling
		progressing.Message = fmt.Sprintf("%d members, %d wanted", len(v.active()), replicas)
		if isWaiting {
			progressing.Reason, progressing.Message = waiting.Reason, waiting.Message
		}
	}
	if step.progressed && progressing.Status != metav1.ConditionTrue {
		// The view was read before this reconcile's change (a Pod deleted for a roll, a
		// learner added): it may show nothing left to do, and Idle written now would read
		// as settled while the change is under way. The next look records its effect.
		progressing.Status, progressing.Reason = metav1.ConditionTrue, etcdv1.ReasonChanging
		progressing.Message = "a change toward the spec was just made; the next look records its effect"
	}
	if stepErr != nil && !isWaiting {
		progressing.Status, progressing.Reason, progressing.Message = metav1.ConditionTrue, etcdv1.ReasonStepFailed, stepErr.Error()
	}

	progressing = applyDeadline(c, progressing, step.progressed, now)

	degraded := metav1.Condition{Type: etcdv1.ConditionDegraded, Status: metav1.ConditionFalse, Reason: etcdv1.ReasonAllMembersHealthy, Message: "every member is healthy"}
	if sick, reason := unhealthyMembers(c, v, now); replicas > 0 && len(sick) > 0 {
		degraded.Status, degraded.Reason = metav1.ConditionTrue, reason
		degraded.Message = "unhealthy: " + strings.Join(sick, ", ")
	}
	if msg, lost := nodeLossCondition(c, v, now); replicas > 0 && lost {
		degraded.Status, degraded.Reason, degraded.Message = metav1.ConditionTrue, etcdv1.ReasonNodeLost, msg
	}
	if isWaiting && waiting.Degraded {
		degraded.Status, degraded.Reason, degraded.Message = metav1.ConditionTrue, waiting.Reason, waiting.Message
	}
	for _, cond := range []metav1.Condition{available, progressing, degraded} {
		cond.ObservedGeneration = c.Generation
		meta.SetStatusCondition(&c.Status.Conditions, cond)
	}
}

// applyDeadline starts the progress clock when work begins, a change is made or the spec
// changes, and turns Progressing to False with ProgressDeadlineExceeded when the clock runs
// past spec.progressDeadlineSeconds. The operator keeps trying; the condition tells a person
// to look. Its message names the time of the last progress, not the time since, so a stuck
// cluster's status is not rewritten on every retry.
func applyDeadline(c *etcdv1.EtcdCluster, progressing metav1.Condition, progressed bool, now time.Time) metav1.Condition {
	if progressing.Status != metav1.ConditionTrue {
		return progressing
	}
	prev := meta.FindStatusCondition(c.Status.Conditions, etcdv1.ConditionProgressing)
	working := prev != nil && prev.ObservedGeneration == c.Generation &&
		(prev.Status == metav1.ConditionTrue || prev.Reason == etcdv1.ReasonProgressDeadlineExceeded)
	if progressed || !working || c.Status.LastProgressTime == nil {
		c.Status.LastProgressTime = &metav1.Time{Time: now.Truncate(time.Second)}
		return progressing
	}
	deadline := time.Duration(ptrOr(c.Spec.ProgressDeadlineSeconds, 600)) * time.Second
	if now.Sub(c.Status.LastProgressTime.Time) <= deadline {
		return progressing
	}
	progressing.Status, progressing.Reason = metav1.ConditionFalse, etcdv1.ReasonProgressDeadlineExceeded
	progressing.Message = fmt.Sprintf("no change toward the spec was possible since %s (spec.progressDeadlineSeconds %d); still trying: %s",
		c.Status.LastProgressTime.UTC().Format(time.RFC3339), int(deadline/time.Second), progressing.Message)
	return progressing
}

func deadlineExceeded(c *etcdv1.EtcdCluster) bool {
	cond := meta.FindStatusCondition(c.Status.Conditions, etcdv1.ConditionProgressing)
	return cond != nil && cond.Reason == etcdv1.ReasonProgressDeadlineExceeded
}

func inMotion(v *clusterView, replicas int) bool {
	if len(v.active()) != replicas || len(v.active()) != len(v.members) || len(v.learners()) > 0 {
		return true
	}
	for _, m := range v.members {
		if m.Spec.Dormant != (replicas == 0) {
			return true
		}
	}
	return false
}

// unhealthyMembers names members that should run but do not answer, with what their
// EtcdMember says about why (PVC pending, image not found, ...), and the Degraded reason:
// MembersUnhealthy, or the member's own reason when a child object of it is refused or
// someone else's (NameConflict, ObjectRefused), which needs a person.
func unhealthyMembers(c *etcdv1.EtcdCluster, v *clusterView, now time.Time) (out []string, reason string) {
	reason = etcdv1.ReasonMembersUnhealthy
	for _, m := range v.active() {
		em, ok := v.etcdMemberFor(c, m)
		if ok && v.healthy[em.ID] {
			continue
		}
		if v.reachable && (!ok || em.IsLearner) && joiningOnItsWay(m, now) {
			continue
		}
		why := "not answering"
		if cond := meta.FindStatusCondition(m.Status.Conditions, etcdv1.MemberConditionReady); cond != nil && cond.Status != metav1.ConditionTrue {
			why = cond.Reason
			if cond.Reason == etcdv1.ReasonNameConflict || cond.Reason == etcdv1.ReasonObjectRefused {
				reason = cond.Reason
			}
			if cond.Message != "" {
				why += ": " + cond.Message
			}
		}
		out = append(out, fmt.Sprintf("%s (%s)", m.Name, why))
	}
	return out, reason
}

// logQuorumLossClock says when the count towards spec.quorumLoss's grace period starts or
// ends, with what each voter looked like: the facts an automatic recovery was decided on.
func logQuorumLossClock(ctx context.Context, was, is *metav1.Time, voters []lossVoter) {
	if (was == nil) == (is == nil) {
		return
	}
	states := make([]string, len(voters))
	for i, m := range voters {
		states[i] = m.String()
	}
	if is != nil {
		log.FromContext(ctx).Info("the quorum is lost: counting towards spec.quorumLoss's grace period", "since", is.UTC().Format(time.RFC3339), "voters", states)
		return
	}
	log.FromContext(ctx).Info("the quorum loss count ends", "voters", states)
}

// joiningGrace is how long a member being brought in may be on its way before Degraded names
// it: a learner step takes seconds; minutes mean something holds it (and Progressing's
// deadline says so too).
const joiningGrace = 2 * time.Minute

// startingReasons are the Ready reasons of a member on its way: created, its Pod scheduled or
// starting, waiting to be added. The kubelet's reasons of a stuck start (a crash loop, an
// image that cannot be pulled) and the operator's (Unschedulable, DataLost, ...) are not.
var startingReasons = map[string]bool{
	etcdv1.ReasonWaitingForMemberAdd: true,
	etcdv1.ReasonPodPending:          true,
	etcdv1.ReasonPodStarting:         true,
	etcdv1.ReasonPodNotReady:         true,
	"PodInitializing":                true,
	"ContainerCreating":              true,
}

// joiningOnItsWay: m is a member a scale-out (or a replacement) brings in, which etcd lists
// not yet or as a learner (the caller checks), that has never started in etcd, was created
// less than joiningGrace ago and says it is starting. Degraded does not name it: each new
// member takes seconds to start, and a cluster Degraded through every scale-out reads as a
// fault to whoever waits on the condition. One stuck on its way is named as any other.
func joiningOnItsWay(m *etcdv1.EtcdMember, now time.Time) bool {
	if m.Status.Joined || now.Sub(m.CreationTimestamp.Time) >= joiningGrace {
		return false
	}
	cond := meta.FindStatusCondition(m.Status.Conditions, etcdv1.MemberConditionReady)
	return cond == nil || (cond.Status != metav1.ConditionTrue && startingReasons[cond.Reason])
}
