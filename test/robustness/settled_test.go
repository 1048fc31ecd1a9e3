package robustness

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

func settledCluster(changed time.Time) *etcdv1.EtcdCluster {
	at := metav1.NewTime(changed)
	c := &etcdv1.EtcdCluster{}
	c.Generation = 2
	c.Status = etcdv1.EtcdClusterStatus{ObservedGeneration: 2, ReadyMembers: 3, Voters: 3, Conditions: []metav1.Condition{
		{Type: etcdv1.ConditionAvailable, Status: metav1.ConditionTrue, ObservedGeneration: 2, LastTransitionTime: at},
		{Type: etcdv1.ConditionProgressing, Status: metav1.ConditionFalse, ObservedGeneration: 2, LastTransitionTime: at},
		{Type: etcdv1.ConditionDegraded, Status: metav1.ConditionFalse, ObservedGeneration: 2, LastTransitionTime: at},
	}}
	return c
}

func TestSettled(t *testing.T) {
	for _, tc := range []struct {
		name    string
		edit    func(*etcdv1.EtcdCluster)
		settled bool
	}{
		{"settled", func(*etcdv1.EtcdCluster) {}, true},
		{"status of an older spec", func(c *etcdv1.EtcdCluster) { c.Generation = 3 }, false},
		{"a condition of an older spec", func(c *etcdv1.EtcdCluster) { c.Status.Conditions[1].ObservedGeneration = 1 }, false},
		{"a learner", func(c *etcdv1.EtcdCluster) { c.Status.Learners = 1 }, false},
		{"one not ready", func(c *etcdv1.EtcdCluster) { c.Status.ReadyMembers = 2 }, false},
		{"progressing", func(c *etcdv1.EtcdCluster) { c.Status.Conditions[1].Status = metav1.ConditionTrue }, false},
		{"degraded", func(c *etcdv1.EtcdCluster) { c.Status.Conditions[2].Status = metav1.ConditionTrue }, false},
		{"not available", func(c *etcdv1.EtcdCluster) { c.Status.Conditions[0].Status = metav1.ConditionFalse }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := settledCluster(time.Now())
			tc.edit(c)
			if err := Settled(c, 3); (err == nil) != tc.settled {
				t.Fatalf("Settled = %v, want settled %v", err, tc.settled)
			}
		})
	}
}

func TestChangedAfter(t *testing.T) {
	disruption := time.Date(2026, 1, 1, 10, 0, 0, 700_000_000, time.UTC)
	for _, tc := range []struct {
		name    string
		changed time.Time
		want    bool
	}{
		{"a second later", disruption.Add(time.Second), true},
		{"before", disruption.Add(-time.Minute), false},
		// Stored with whole seconds: 10:00:00 may be before 10:00:00.7, so it does not count.
		{"in the same second", disruption.Add(200 * time.Millisecond).Truncate(time.Second), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ChangedAfter(settledCluster(tc.changed).Status.Conditions, disruption); got != tc.want {
				t.Fatalf("ChangedAfter = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestSeenSince(t *testing.T) {
	disruption := time.Date(2026, 1, 1, 10, 0, 0, 700_000_000, time.UTC)
	pod := func(created time.Time, ready bool) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(created)}}
		status := corev1.ConditionFalse
		if ready {
			status = corev1.ConditionTrue
		}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
		return p
	}
	before, after := disruption.Add(-time.Hour), disruption.Add(2*time.Second)
	readyAgainAt := func(at time.Time) corev1.Pod { // restarted in place: same Pod, Ready anew
		p := pod(before, true)
		p.Status.Conditions[0].LastTransitionTime = metav1.NewTime(at)
		return p
	}
	for _, tc := range []struct {
		name    string
		changed time.Time
		pods    []corev1.Pod
		seen    bool
	}{
		{"a condition changed after", after, nil, true},
		{"nothing changed, the old Pods", before, []corev1.Pod{pod(before, true), pod(before, true), pod(before, true)}, false},
		{"nothing changed, a new Pod Ready", before, []corev1.Pod{pod(before, true), pod(after, true), pod(before, true)}, true},
		{"nothing changed, a new Pod not Ready", before, []corev1.Pod{pod(before, true), pod(after, false), pod(before, true)}, false},
		{"nothing changed, a Pod missing", before, []corev1.Pod{pod(before, true), pod(after, true)}, false},
		{"nothing changed, a Pod Ready again after", before, []corev1.Pod{pod(before, true), readyAgainAt(after), pod(before, true)}, true},
		{"nothing changed, a Pod Ready again before", before, []corev1.Pod{pod(before, true), readyAgainAt(before), pod(before, true)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := SeenSince(settledCluster(tc.changed).Status.Conditions, tc.pods, 3, disruption)
			if (err == nil) != tc.seen {
				t.Fatalf("SeenSince = %v, want seen %v", err, tc.seen)
			}
		})
	}
}
