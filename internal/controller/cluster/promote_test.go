package cluster

import (
	"slices"
	"testing"

	"github.com/quorumkeeper/etcd-operator/internal/etcd"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// Each catch-up poll names the leader its look saw answer, so that the client asks that
// member alone whether it leads; a new leader is named from the next look on.
func TestACatchUpPollNamesTheLeaderItsLookSaw(t *testing.T) {
	h := runningHarness(t)
	h.etcd.SetLeader(2)
	h.setReplicas(4)
	h.reconcile() // creates db-4
	h.reconcile() // adds it as a learner
	m4 := h.members()[3]
	id, err := etcd.ParseID(m4.Status.MemberID)
	if err != nil {
		t.Fatal(err)
	}
	c := h.clusterObj()
	h.etcd.StartMember(id, "db-4", specs.ClientURL(c, "db-4"))
	h.etcd.SetCaughtUp(id, false)
	h.etcd.ResetCalls()
	h.reconcile()
	h.etcd.SetLeader(3)
	h.reconcile()
	want := []string{
		"Promote(" + etcd.FormatID(id) + " via " + specs.ClientURL(c, "db-2") + ")",
		"Promote(" + etcd.FormatID(id) + " via " + specs.ClientURL(c, "db-3") + ")",
	}
	if got := h.etcd.CallsTo("Promote"); !slices.Equal(got, want) {
		t.Fatalf("Promote calls %q, want %q", got, want)
	}
}

func TestLeaderEndpointIsWhereTheLeaderAnsweredInThisLook(t *testing.T) {
	members := []etcd.Member{
		{ID: 1, ClientURLs: []string{"https://db-1:2379", "https://10.0.0.1:2379"}},
		{ID: 2, ClientURLs: []string{"https://db-2:2379"}},
		{ID: 3}, // added, not started: no client URL
	}
	tests := []struct {
		name     string
		leader   uint64
		answered []uint64
		want     string
	}{
		{name: "the leader answered", leader: 1, answered: []uint64{1, 2}, want: "https://db-1:2379"},
		{name: "a follower names a leader that did not answer", leader: 1, answered: []uint64{2}, want: ""},
		{name: "no member names a leader", leader: 0, answered: []uint64{1, 2}, want: ""},
		{name: "the leader lists no client URL", leader: 3, answered: []uint64{3}, want: ""},
		{name: "the leader is not in the member list", leader: 9, answered: []uint64{9}, want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := &clusterView{etcdMembers: members, leader: tt.leader, statuses: map[uint64]etcd.Status{}}
			for _, id := range tt.answered {
				v.statuses[id] = etcd.Status{MemberID: id, Leader: tt.leader}
			}
			if got := v.leaderEndpoint(); got != tt.want {
				t.Errorf("leaderEndpoint() = %q, want %q", got, tt.want)
			}
		})
	}
}
