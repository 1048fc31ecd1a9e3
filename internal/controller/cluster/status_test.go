package cluster

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
)

// A member counts as ready only when etcd answers its health check, its EtcdMember says
// Ready and its Pod, as the same look saw it, is Ready and not going: the EtcdMember's
// condition lags its Pod, and a status that counted a member restarting for a roll as
// ready read as settled in the middle of the roll.
func TestMemberSummaryReadyNeedsItsPodReady(t *testing.T) {
	readyPod := &corev1.Pod{Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
	notReadyPod := &corev1.Pod{Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}}}
	goingPod := readyPod.DeepCopy()
	goingPod.DeletionTimestamp = &metav1.Time{Time: time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)}
	for _, tc := range []struct {
		name        string
		etcdHealthy bool
		memberReady metav1.ConditionStatus
		pod         *corev1.Pod
		want        bool
	}{
		{"all say ready", true, metav1.ConditionTrue, readyPod, true},
		{"etcd does not answer", false, metav1.ConditionTrue, readyPod, false},
		{"its EtcdMember says not ready", true, metav1.ConditionFalse, readyPod, false},
		{"its new Pod not Ready yet, the EtcdMember not told", true, metav1.ConditionTrue, notReadyPod, false},
		{"its Pod going", true, metav1.ConditionTrue, goingPod, false},
		{"no Pod", true, metav1.ConditionTrue, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns"}}
			m := &etcdv1.EtcdMember{ObjectMeta: metav1.ObjectMeta{Name: "db-1", Namespace: "ns"}}
			m.Status.Conditions = []metav1.Condition{{Type: etcdv1.MemberConditionReady, Status: tc.memberReady}}
			v := &clusterView{
				members:     []*etcdv1.EtcdMember{m},
				etcdMembers: []etcd.Member{{ID: 1, Name: "db-1"}},
				healthy:     map[uint64]bool{1: tc.etcdHealthy},
				pods:        map[string]*corev1.Pod{},
			}
			if tc.pod != nil {
				v.pods["db-1"] = tc.pod
			}
			got := memberSummaries(c, v)
			if len(got) != 1 || got[0].Ready != tc.want {
				t.Fatalf("summaries %+v, want Ready %v", got, tc.want)
			}
		})
	}
}

// Adopted members' names carry no ordinal: they sort after the operator's, by name, so that
// "the last member" (the one scale-in takes) is the same on every reconcile.
func TestByOrdinalIsATotalOrder(t *testing.T) {
	names := []string{"cz-x7k2p", "db-10", "cz-a91fq", "db-2", "db-1"}
	for range 20 {
		got := slices.Clone(names)
		rand.Shuffle(len(got), func(i, j int) { got[i], got[j] = got[j], got[i] })
		slices.SortFunc(got, byOrdinal)
		if want := []string{"db-1", "db-2", "db-10", "cz-a91fq", "cz-x7k2p"}; !slices.Equal(got, want) {
			t.Fatalf("sorted %v, want %v", got, want)
		}
	}
}

// A status computed from a copy older than the stored object (a cache behind the last write)
// is not written over it: a merge patch replaces the whole conditions list, and the newer
// object's conditions would be lost.
func TestStatusFromAStaleCopyDoesNotOverwriteANewerOne(t *testing.T) {
	h := runningHarness(t)
	stale := h.clusterObj()
	newer := stale.DeepCopy()
	newer.Status.Conditions = append(newer.Status.Conditions, metav1.Condition{
		Type: "WrittenSince", Status: metav1.ConditionTrue, Reason: "Test", LastTransitionTime: metav1.Now(),
	})
	if err := h.api.Status().Update(context.Background(), newer); err != nil {
		t.Fatal(err)
	}
	stale.Status.Conditions = nil // the stale copy's status differs from what updateStatus computes
	v := &clusterView{healthy: map[uint64]bool{}, versions: map[uint64]string{}, pods: map[string]*corev1.Pod{}}
	if err := h.r.updateStatus(context.Background(), stale, v, stepResult{}); err != nil {
		t.Fatalf("a conflict is looked at again, not an error: %v", err)
	}
	if meta.FindStatusCondition(h.clusterObj().Status.Conditions, "WrittenSince") == nil {
		t.Fatalf("the stale copy's status overwrote the newer one: %+v", h.clusterObj().Status.Conditions)
	}
}

// QuorumLost only when etcd's member list does not answer: a list that answers is a quorum,
// whatever the operator's health checks said (kubectl etcd recover acts on QuorumLost alone).
func TestAvailableSaysQuorumLostOnlyWhenTheListDoesNotAnswer(t *testing.T) {
	c := &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns"}}
	c.Status.ClusterID = "c1"
	voters := []etcd.Member{{ID: 1, Name: "db-1"}, {ID: 2, Name: "db-2"}, {ID: 3, Name: "db-3"}}
	for _, tc := range []struct {
		name      string
		reachable bool
		healthy   map[uint64]bool
		want      string
		status    metav1.ConditionStatus
	}{
		{"all healthy", true, map[uint64]bool{1: true, 2: true, 3: true}, etcdv1.ReasonQuorumHealthy, metav1.ConditionTrue},
		{"a quorum healthy", true, map[uint64]bool{1: true, 2: true}, etcdv1.ReasonQuorumHealthy, metav1.ConditionTrue},
		{"the list answers, health checks fail", true, map[uint64]bool{1: true}, etcdv1.ReasonMembersUnhealthy, metav1.ConditionFalse},
		{"the list does not answer", false, map[uint64]bool{}, etcdv1.ReasonQuorumLost, metav1.ConditionFalse},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := &clusterView{reachable: tc.reachable, healthy: tc.healthy}
			if tc.reachable {
				v.etcdMembers = voters
			}
			got := availableCondition(c, v, 3)
			if got.Reason != tc.want || got.Status != tc.status {
				t.Fatalf("Available %s %s (%s), want %s %s", got.Status, got.Reason, got.Message, tc.status, tc.want)
			}
		})
	}
}
