package cluster

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller/kit"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
)

func TestPlanUpgrade(t *testing.T) {
	settled := func(name, ver string, leader bool) upgradeMember {
		return upgradeMember{name: name, spec: ver, running: ver, healthy: true, leader: leader}
	}
	tests := []struct {
		name    string
		target  string
		members []upgradeMember
		want    string // member to move next
		reason  string // or the reason to wait
		message string // part of the wait message
	}{
		{"nothing to do", "3.6.16", []upgradeMember{settled("a", "3.6.16", true), settled("b", "3.6.16", false)}, "", "", ""},
		{"a follower first", "3.6.16", []upgradeMember{settled("a", "3.6.15", true), settled("b", "3.6.15", false), settled("c", "3.6.15", false)}, "b", "", ""},
		{"the leader last", "3.6.16", []upgradeMember{settled("a", "3.6.15", true), settled("b", "3.6.16", false), settled("c", "3.6.16", false)}, "a", "", ""},
		{"an unhealthy member stops it", "3.6.16", []upgradeMember{settled("a", "3.6.15", true), {name: "b", spec: "3.6.16", running: "3.6.16"}, settled("c", "3.6.15", false)}, "", "Upgrading", "member b is not healthy"},
		{"a restarted member must run its new version", "3.6.16", []upgradeMember{settled("a", "3.6.15", true), {name: "b", spec: "3.6.16", running: "3.6.15", healthy: true}, settled("c", "3.6.15", false)}, "", "Upgrading", "member b to run 3.6.16"},
		{"a restarted member must catch up", "3.6.16", []upgradeMember{settled("a", "3.6.15", true), {name: "b", spec: "3.6.16", running: "3.6.16", healthy: true, applyLag: maxApplyLag + 1}, settled("c", "3.6.15", false)}, "", "Upgrading", "member b to catch up"},
		{"a small lag is caught up", "3.6.16", []upgradeMember{settled("a", "3.6.15", true), {name: "b", spec: "3.6.16", running: "3.6.16", healthy: true, applyLag: maxApplyLag}, settled("c", "3.6.15", false)}, "c", "", ""},
		{"3.5.35 to 3.6", "3.6.16", []upgradeMember{settled("a", "3.5.35", true), settled("b", "3.5.35", false)}, "b", "", ""},
		{"3.6 from a 3.5 patch older than 3.5.26", "3.6.16", []upgradeMember{settled("a", "3.5.35", true), settled("b", "3.5.21", false)}, "", "UpgradeBlocked", "3.5.26 or later"},
		{"3.6.16 to 3.7", "3.7.3", []upgradeMember{settled("a", "3.6.16", true), settled("b", "3.6.16", false)}, "b", "", ""},
		{"3.6.11 to 3.7", "3.7.3", []upgradeMember{settled("a", "3.6.11", true), settled("b", "3.6.11", false)}, "b", "", ""},
		{"3.7 from a 3.6 patch older than 3.6.11", "3.7.3", []upgradeMember{settled("a", "3.6.16", true), settled("b", "3.6.10", false)}, "", "UpgradeBlocked", "3.6.11 or later on every member before 3.7"},
		{"3.5.0 to the newest 3.5 patch", "3.5.35", []upgradeMember{settled("a", "3.5.0", true), settled("b", "3.5.0", false)}, "b", "", ""},
		{"3.5.25 to 3.6", "3.6.16", []upgradeMember{settled("a", "3.5.25", true)}, "", "UpgradeBlocked", "set spec.version to 3.5.26 or a newer 3.5 patch"},
		{"two minors at once", "3.7.1", []upgradeMember{settled("a", "3.5.35", true), settled("b", "3.6.16", false)}, "", "UpgradeBlocked", "one minor at a time"},
		{"set back before the member ran it", "3.6.16", []upgradeMember{settled("a", "3.6.16", true), {name: "b", spec: "3.6.99"}, settled("c", "3.6.16", false)}, "b", "", ""},
		{"set back while the member crash-loops on it", "3.6.16", []upgradeMember{settled("a", "3.6.16", true), {name: "b", spec: "3.6.17", running: ""}, {name: "c", spec: "3.6.16"}}, "b", "", ""},
		{"a minor set back before the member ran it", "3.5.35", []upgradeMember{settled("a", "3.5.35", true), {name: "b", spec: "3.6.16", running: "3.5.35", healthy: true}, settled("c", "3.5.35", false)}, "b", "", ""},
		{"a down member below the target still waits", "3.6.16", []upgradeMember{settled("a", "3.6.15", true), {name: "b", spec: "3.6.15"}, settled("c", "3.6.15", false)}, "", "Upgrading", "member b is not healthy"},
		{"a downgrade", "3.6.15", []upgradeMember{settled("a", "3.6.16", true), settled("b", "3.6.15", false)}, "", "UpgradeBlocked", "not to an older patch"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := planUpgrade(tt.target, tt.members)
			if tt.reason == "" {
				if err != nil || got != tt.want {
					t.Fatalf("planUpgrade = %q, %v; want %q", got, err, tt.want)
				}
				return
			}
			var w kit.Waiting
			if got != "" || !errors.As(err, &w) || w.Reason != tt.reason || !strings.Contains(w.Message, tt.message) {
				t.Fatalf("planUpgrade = %q, %v; want to wait with %s: ...%s...", got, err, tt.reason, tt.message)
			}
		})
	}
}

func TestClusterVersionIsTheLowest(t *testing.T) {
	members := []etcdv1.MemberSummary{{Version: "3.6.16"}, {Version: "3.5.35"}, {Version: "3.6.9"}, {Version: ""}}
	if got := clusterVersion(members, "x"); got != "3.5.35" {
		t.Fatalf("clusterVersion = %s, want 3.5.35", got)
	}
	if got := clusterVersion([]etcdv1.MemberSummary{{Name: "a"}}, "3.6.15"); got != "3.6.15" {
		t.Fatalf("with no version known, clusterVersion = %s, want the previous 3.6.15", got)
	}
	if got := clusterVersion([]etcdv1.MemberSummary{{Version: "3.6.10"}, {Version: "3.6.9"}}, ""); got != "3.6.9" {
		t.Fatalf("versions compare as numbers: got %s, want 3.6.9", got)
	}
}

func (h *harness) memberVersions() map[string]string {
	h.t.Helper()
	out := map[string]string{}
	for _, m := range h.members() {
		out[m.Name] = m.Spec.Version
	}
	return out
}

// A new spec.version moves one follower's EtcdMember, restarts its Pod, and moves the next
// member only once etcd reports the new version from the restarted one.
func TestUpgradeMovesOneMemberAtATimeAfterItRunsTheNewVersion(t *testing.T) {
	h := runningHarness(t)
	h.startPods()
	h.reconcile()
	h.editSpec(func(s *etcdv1.EtcdClusterSpec) { s.Version = "3.6.17" })
	h.reconcile()
	if got := h.memberVersions(); got["db-2"] != "3.6.17" || got["db-1"] != "3.6.16" || got["db-3"] != "3.6.16" {
		t.Fatalf("after the first step: %v; want db-2 (a follower; db-1 leads) moved alone", got)
	}
	h.reconcile()
	if got := h.podNames(); !slices.Equal(got, []string{"db-1", "db-3"}) {
		t.Fatalf("db-2's Pod is not the one restarted: %v", got)
	}
	h.startPods()
	h.reconcile()
	h.reconcile()
	if got := h.memberVersions(); got["db-3"] != "3.6.16" {
		t.Fatalf("db-3 moved while db-2 still reports 3.6.16: %v", got)
	}
	cond := meta.FindStatusCondition(h.clusterObj().Status.Conditions, etcdv1.ConditionProgressing)
	if cond == nil || cond.Reason != "Upgrading" || !strings.Contains(cond.Message, "db-2 to run 3.6.17") {
		t.Fatalf("Progressing %+v, want Upgrading waiting for db-2", cond)
	}
	h.etcd.SetVersion("3.6.17")
	h.reconcile()
	if got := h.memberVersions(); got["db-3"] != "3.6.17" || got["db-1"] != "3.6.16" {
		t.Fatalf("once db-2 runs 3.6.17: %v; want db-3 next, the leader db-1 last", got)
	}
	if v := h.clusterObj().Status.Version; v != "3.6.17" {
		t.Fatalf("status.version %q, want the lowest reported, 3.6.17", v)
	}
}

// An upgrade in progress decides from the reconcile's one look at etcd: each member is asked
// for its status once per reconcile, not again for its catch-up.
func TestUpgradeAsksEachMemberOncePerReconcile(t *testing.T) {
	h := runningHarness(t)
	h.startPods()
	h.reconcile()
	h.editSpec(func(s *etcdv1.EtcdClusterSpec) { s.Version = "3.6.17" })
	h.reconcile() // db-2 moved
	h.reconcile() // and restarted
	h.startPods()
	h.etcd.SetVersion("3.6.17")
	h.etcd.ResetCalls()
	h.reconcile() // db-3 moved
	if got := h.memberVersions(); got["db-3"] != "3.6.17" {
		t.Fatalf("db-3 not moved: %v", got)
	}
	if got := h.etcd.CallsTo("Status"); len(got) != 3 {
		t.Fatalf("Status asked %d times in one reconcile of 3 members: %q", len(got), got)
	}
}

// The catch-up check compares each member's applied index with the leader's, both from the
// reconcile's look; a member that did not answer counts as infinitely behind.
func TestUpgradeMembersApplyLagFromTheLook(t *testing.T) {
	c := &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns"}}
	member := func(name string) *etcdv1.EtcdMember {
		return &etcdv1.EtcdMember{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: etcdv1.EtcdMemberSpec{Version: "3.6.16"}}
	}
	v := &clusterView{
		etcdMembers: []etcd.Member{{ID: 1, Name: "db-1", ClientURLs: []string{"u1"}}, {ID: 2, Name: "db-2", ClientURLs: []string{"u2"}}, {ID: 3, Name: "db-3", ClientURLs: []string{"u3"}}},
		leader:      1,
		healthy:     map[uint64]bool{1: true, 2: true, 3: false},
		versions:    map[uint64]string{1: "3.6.16", 2: "3.6.16"},
		statuses:    map[uint64]etcd.Status{1: {RaftAppliedIndex: 1000}, 2: {RaftAppliedIndex: 400}},
	}
	got := upgradeMembers(c, v, []*etcdv1.EtcdMember{member("db-1"), member("db-2"), member("db-3")})
	if got[0].applyLag != 0 || !got[0].leader || got[1].applyLag != 600 || got[2].applyLag != ^uint64(0) || got[2].healthy {
		t.Fatalf("upgradeMembers = %+v", got)
	}
}
