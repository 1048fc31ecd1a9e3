package cluster

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
)

var joiningNow = time.Date(2026, 12, 6, 1, 0, 0, 0, time.UTC)

// memberReady is an EtcdMember created age ago whose Ready condition has reason ("" for none).
func memberReady(name string, age time.Duration, reason string, joined bool) *etcdv1.EtcdMember {
	m := &etcdv1.EtcdMember{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", CreationTimestamp: metav1.NewTime(joiningNow.Add(-age))}}
	m.Status.Joined = joined
	if reason != "" {
		m.Status.Conditions = []metav1.Condition{{Type: etcdv1.MemberConditionReady, Status: metav1.ConditionFalse, Reason: reason}}
	}
	return m
}

func TestJoiningOnItsWay(t *testing.T) {
	for _, tc := range []struct {
		name string
		m    *etcdv1.EtcdMember
		want bool
	}{
		{"just created, no status yet", memberReady("db-4", time.Second, "", false), true},
		{"waiting to be added", memberReady("db-4", 2*time.Second, etcdv1.ReasonWaitingForMemberAdd, false), true},
		{"its Pod pending", memberReady("db-4", 2*time.Second, etcdv1.ReasonPodPending, false), true},
		{"its Pod not ready yet", memberReady("db-4", 3*time.Second, etcdv1.ReasonPodNotReady, false), true},
		{"in a crash loop", memberReady("db-4", 3*time.Second, "CrashLoopBackOff", false), false},
		{"its image cannot be pulled", memberReady("db-4", 3*time.Second, etcdv1.ReasonImagePullFailed, false), false},
		{"no node for it", memberReady("db-4", 3*time.Second, etcdv1.ReasonUnschedulable, false), false},
		{"on its way for longer than the grace", memberReady("db-4", joiningGrace, etcdv1.ReasonPodPending, false), false},
		{"it started in etcd before", memberReady("db-4", time.Second, etcdv1.ReasonPodNotReady, true), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := joiningOnItsWay(tc.m, joiningNow); got != tc.want {
				t.Fatalf("joiningOnItsWay = %v, want %v", got, tc.want)
			}
		})
	}
}

// Degraded names neither a member not yet added nor a learner starting, but names a voter
// down, a learner stuck, and any member when etcd's member list did not answer.
func TestDegradedLeavesOutMembersOnTheirWay(t *testing.T) {
	c := &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns"}}
	voter := memberReady("db-1", time.Hour, etcdv1.ReasonPodNotReady, true)
	voter.Status.MemberID = "a1"
	learner := memberReady("db-4", time.Second, etcdv1.ReasonPodNotReady, false)
	learner.Status.MemberID = "a4"
	stuckLearner := memberReady("db-5", time.Second, "CrashLoopBackOff", false)
	stuckLearner.Status.MemberID = "a5"
	notAdded := memberReady("db-6", time.Second, etcdv1.ReasonWaitingForMemberAdd, false)
	view := func(reachable bool) *clusterView {
		return &clusterView{
			members:   []*etcdv1.EtcdMember{voter, learner, stuckLearner, notAdded},
			reachable: reachable,
			etcdMembers: []etcd.Member{
				{ID: 0xa1, Name: "db-1"},
				{ID: 0xa4, Name: "db-4", IsLearner: true},
				{ID: 0xa5, Name: "db-5", IsLearner: true},
			},
			healthy: map[uint64]bool{},
		}
	}
	sick, _ := unhealthyMembers(c, view(true), joiningNow)
	got := strings.Join(sick, "; ")
	for _, name := range []string{"db-1 ", "db-5 "} {
		if !strings.Contains(got, name) {
			t.Errorf("Degraded does not name %s: %q", name, got)
		}
	}
	for _, name := range []string{"db-4 ", "db-6 "} {
		if strings.Contains(got, name) {
			t.Errorf("Degraded names %s, a member on its way: %q", name, got)
		}
	}
	unreachable := view(false)
	unreachable.etcdMembers = nil
	if sick, _ := unhealthyMembers(c, unreachable, joiningNow); len(sick) != 4 {
		t.Errorf("with etcd's member list unanswered, Degraded names %v; want all 4 members", sick)
	}
}
