package robustness

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

// Settled says why a cluster's status does not show n healthy voters, no learners and
// nothing in motion or degraded, in a status written for the current spec (its
// observedGeneration and that of Available, Progressing and Degraded); nil when it does. A status of an older
// generation may predate a spec change, so it does not count.
func Settled(c *etcdv1.EtcdCluster, n int32) error {
	s := c.Status
	if s.ObservedGeneration != c.Generation {
		return fmt.Errorf("status of generation %d, spec is %d", s.ObservedGeneration, c.Generation)
	}
	for _, kind := range []string{etcdv1.ConditionAvailable, etcdv1.ConditionProgressing, etcdv1.ConditionDegraded} {
		if cond := meta.FindStatusCondition(s.Conditions, kind); cond == nil || cond.ObservedGeneration != c.Generation {
			return fmt.Errorf("condition %s not written for generation %d: %+v", kind, c.Generation, cond)
		}
	}
	switch {
	case !meta.IsStatusConditionTrue(s.Conditions, etcdv1.ConditionAvailable):
		return fmt.Errorf("not Available: %+v", meta.FindStatusCondition(s.Conditions, etcdv1.ConditionAvailable))
	case s.ReadyMembers != n || s.Voters != n || s.Learners != 0:
		return fmt.Errorf("ready %d, voters %d, learners %d", s.ReadyMembers, s.Voters, s.Learners)
	case meta.IsStatusConditionTrue(s.Conditions, etcdv1.ConditionProgressing):
		return fmt.Errorf("still progressing: %+v", meta.FindStatusCondition(s.Conditions, etcdv1.ConditionProgressing))
	case meta.IsStatusConditionTrue(s.Conditions, etcdv1.ConditionDegraded):
		return fmt.Errorf("degraded: %+v", meta.FindStatusCondition(s.Conditions, etcdv1.ConditionDegraded))
	}
	return nil
}

// ChangedAfter reports whether a condition changed in a later second than since's.
// Condition times have whole seconds, so a change in since's own second may have come before
// it and does not count. After a disruption that changes no spec (a Pod deleted, a restart),
// the settled status written before it would pass Settled unchanged; a condition that
// changed after it shows the operator saw the disruption and its end.
func ChangedAfter(conds []metav1.Condition, since time.Time) bool {
	for _, cond := range conds {
		if cond.LastTransitionTime.After(since.Truncate(time.Second)) {
			return true
		}
	}
	return false
}

// SeenSince says why a settled status may predate a disruption at since that changed no spec;
// nil when it shows the disruption was seen: a condition changed after since (ChangedAfter),
// or, since a Pod replaced within a second may change no condition of the cluster, the n
// member Pods are Ready and not going, one of them created after since or Ready again after
// it (its containers restarted in place: a node that came back before the operator, which
// may have gone down with it, noticed the member was away).
func SeenSince(conds []metav1.Condition, pods []corev1.Pod, n int, since time.Time) error {
	if since.IsZero() || ChangedAfter(conds, since) {
		return nil
	}
	ready, fresh := 0, false
	for i := range pods {
		if pods[i].DeletionTimestamp.IsZero() && PodReady(&pods[i]) {
			ready++
		}
		if pods[i].CreationTimestamp.After(since.Truncate(time.Second)) || readySince(&pods[i], since) {
			fresh = true
		}
	}
	switch {
	case ready != n || len(pods) != n:
		return fmt.Errorf("no condition changed since the disruption, and %d of %d Pods are Ready", ready, len(pods))
	case !fresh:
		return fmt.Errorf("no condition changed since the disruption, and no Pod was created or became Ready since")
	}
	return nil
}

// readySince: the Pod's Ready condition turned True after since.
func readySince(pod *corev1.Pod, since time.Time) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue && c.LastTransitionTime.After(since.Truncate(time.Second))
		}
	}
	return false
}
