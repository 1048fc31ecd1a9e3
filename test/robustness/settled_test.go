package robustness

import (
	"testing"
	"time"

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
