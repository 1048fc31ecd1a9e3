package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// updateStatus writes what the view shows, and only when it differs from what is stored, so
// that a cluster at rest costs no API writes.
func (r *ClusterReconciler) updateStatus(ctx context.Context, c *etcdv1.EtcdCluster, v *clusterView, stepErr error) error {
	before := c.DeepCopy()
	s := &c.Status
	s.ObservedGeneration = c.Generation
	s.Selector = specs.Selector(c.Name)
	if v.reachable && v.clusterID != 0 {
		s.ClusterID = etcd.FormatID(v.clusterID)
	}
	s.Members = memberSummaries(c, v)
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
	setConditions(c, v, stepErr)
	if equality.Semantic.DeepEqual(before.Status, c.Status) {
		return nil
	}
	return ignoreConflict(r.Status().Patch(ctx, c, client.MergeFrom(before)))
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
			sum.Ready = v.healthy[em.ID] && meta.IsStatusConditionTrue(m.Status.Conditions, etcdv1.MemberConditionReady)
			if ver := v.versions[em.ID]; ver != "" {
				sum.Version = ver
			}
		}
		out = append(out, sum)
	}
	return out
}

// setConditions turns the view into Available, Progressing and Degraded with reasons a
// person can act on.
func setConditions(c *etcdv1.EtcdCluster, v *clusterView, stepErr error) {
	replicas := int(ptrOr(c.Spec.Replicas, 3))
	total, healthy := v.voters()
	var waiting errWaiting
	isWaiting := errors.As(stepErr, &waiting)

	available := metav1.Condition{Type: etcdv1.ConditionAvailable, Status: metav1.ConditionFalse}
	switch {
	case replicas == 0:
		available.Reason, available.Message = "Paused", "spec.replicas is 0: every member is stopped, its data kept"
	case !v.reachable && c.Status.ClusterID == "":
		available.Reason, available.Message = "Bootstrapping", "the founding members have not formed the cluster yet"
	case !v.reachable:
		available.Reason, available.Message = "Unreachable", "no member answers"
	case healthy >= quorum(total):
		available.Status, available.Reason = metav1.ConditionTrue, "QuorumHealthy"
		available.Message = fmt.Sprintf("%d of %d voters healthy", healthy, total)
	default:
		available.Reason, available.Message = "QuorumLost", fmt.Sprintf("only %d of %d voters healthy", healthy, total)
	}

	progressing := metav1.Condition{Type: etcdv1.ConditionProgressing, Status: metav1.ConditionFalse, Reason: "Idle", Message: "the cluster matches its spec"}
	if inMotion(v, replicas) || isWaiting {
		progressing.Status, progressing.Reason = metav1.ConditionTrue, "Scaling"
		progressing.Message = fmt.Sprintf("%d members, %d wanted", len(v.active()), replicas)
		if isWaiting {
			progressing.Reason, progressing.Message = waiting.reason, waiting.message
		}
	}
	if stepErr != nil && !isWaiting {
		progressing.Status, progressing.Reason, progressing.Message = metav1.ConditionTrue, "StepFailed", stepErr.Error()
	}

	degraded := metav1.Condition{Type: etcdv1.ConditionDegraded, Status: metav1.ConditionFalse, Reason: "AllMembersHealthy", Message: "every member is healthy"}
	if sick := unhealthyMembers(c, v); replicas > 0 && len(sick) > 0 {
		degraded.Status, degraded.Reason = metav1.ConditionTrue, "MembersUnhealthy"
		degraded.Message = "unhealthy: " + strings.Join(sick, ", ")
	}
	for _, cond := range []metav1.Condition{available, progressing, degraded} {
		cond.ObservedGeneration = c.Generation
		meta.SetStatusCondition(&c.Status.Conditions, cond)
	}
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
// EtcdMember says about why (PVC pending, image not found, ...).
func unhealthyMembers(c *etcdv1.EtcdCluster, v *clusterView) []string {
	var out []string
	for _, m := range v.active() {
		em, ok := v.etcdMemberFor(c, m)
		if ok && v.healthy[em.ID] {
			continue
		}
		why := "not answering"
		if cond := meta.FindStatusCondition(m.Status.Conditions, etcdv1.MemberConditionReady); cond != nil && cond.Status != metav1.ConditionTrue {
			why = cond.Reason
			if cond.Message != "" {
				why += ": " + cond.Message
			}
		}
		out = append(out, fmt.Sprintf("%s (%s)", m.Name, why))
	}
	return out
}
