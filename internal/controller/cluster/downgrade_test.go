package cluster

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller/kit"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
	"github.com/quorumkeeper/etcd-operator/internal/etcdversion"
)

func TestPlanVersion(t *testing.T) {
	settled := func(name, ver string, leader bool) upgradeMember {
		return upgradeMember{name: name, spec: ver, running: ver, healthy: true, leader: leader}
	}
	on36 := func(name, ver, storage string, leader bool) upgradeMember {
		m := settled(name, ver, leader)
		m.storage = storage
		return m
	}
	enabled := func(minor string) downgradeFacts {
		return downgradeFacts{known: true, enabled: true, target: etcdversion.MustParse(minor)}
	}
	off := downgradeFacts{known: true}
	tests := []struct {
		name    string
		target  string
		members []upgradeMember
		dg      downgradeFacts
		want    versionStep
		reason  string // or the reason to wait
		message string // part of the wait message
	}{
		{"an upgrade goes as before", "3.6.16", []upgradeMember{settled("a", "3.6.15", true), settled("b", "3.6.15", false)}, off,
			versionStep{act: versionMove, member: "b"}, "", ""},
		{"a patch downgrade stays refused", "3.6.15", []upgradeMember{settled("a", "3.6.16", true), settled("b", "3.6.16", false)}, off,
			versionStep{}, "UpgradeBlocked", "not to an older patch"},
		{"a settled 3.6 cluster enables the downgrade first", "3.5.35", []upgradeMember{on36("a", "3.6.16", "3.6.0", true), on36("b", "3.6.16", "3.6.0", false)}, off,
			versionStep{act: versionEnable}, "", ""},
		{"not while a member is unhealthy", "3.5.35", []upgradeMember{on36("a", "3.6.16", "3.6.0", true), {name: "b", spec: "3.6.16", running: "3.6.16"}}, off,
			versionStep{}, "Downgrading", "member b is not healthy"},
		{"not while a member lags", "3.5.35", []upgradeMember{on36("a", "3.6.16", "3.6.0", true), {name: "b", spec: "3.6.16", running: "3.6.16", healthy: true, applyLag: maxApplyLag + 1}}, off,
			versionStep{}, "Downgrading", "member b to catch up"},
		{"enabled: not before every member migrated its data", "3.5.35", []upgradeMember{on36("a", "3.6.16", "3.5.0", true), on36("b", "3.6.16", "3.6.0", false)}, enabled("3.5.0"),
			versionStep{}, "Downgrading", "member b to migrate its data to 3.5 (storage version 3.6.0)"},
		{"enabled: a follower first", "3.5.35", []upgradeMember{on36("a", "3.6.16", "3.5.0", true), on36("b", "3.6.16", "3.5.0", false), on36("c", "3.6.16", "3.5.0", false)}, enabled("3.5.0"),
			versionStep{act: versionMove, member: "b", downgrade: true}, "", ""},
		{"enabled after a crash: not enabled again, the next member moves", "3.5.35", []upgradeMember{on36("a", "3.6.16", "3.5.0", true), settled("b", "3.5.35", false), on36("c", "3.6.16", "3.5.0", false)}, enabled("3.5.0"),
			versionStep{act: versionMove, member: "c", downgrade: true}, "", ""},
		{"the leader last", "3.5.35", []upgradeMember{on36("a", "3.6.16", "3.5.0", true), settled("b", "3.5.35", false), settled("c", "3.5.35", false)}, enabled("3.5.0"),
			versionStep{act: versionMove, member: "a", downgrade: true}, "", ""},
		{"a moved member must run the lower release", "3.5.35", []upgradeMember{on36("a", "3.6.16", "3.5.0", true), {name: "b", spec: "3.5.35", running: "3.6.16", healthy: true, storage: "3.5.0"}, on36("c", "3.6.16", "3.5.0", false)}, enabled("3.5.0"),
			versionStep{}, "Downgrading", "member b to run 3.5.35"},
		{"every member moved: etcd ends it", "3.5.35", []upgradeMember{settled("a", "3.5.35", true), settled("b", "3.5.35", false)}, enabled("3.5.0"),
			versionStep{}, "DowngradeFinishing", "waiting for etcd to end the downgrade to 3.5"},
		{"etcd ended it: nothing left", "3.5.35", []upgradeMember{settled("a", "3.5.35", true), settled("b", "3.5.35", false)}, off,
			versionStep{}, "", ""},
		{"spec set back up half-way: cancel", "3.6.16", []upgradeMember{on36("a", "3.6.16", "3.5.0", true), settled("b", "3.5.35", false)}, enabled("3.5.0"),
			versionStep{act: versionCancel}, "", ""},
		{"cancelled: the members go back up", "3.6.16", []upgradeMember{on36("a", "3.6.16", "3.5.0", true), settled("b", "3.5.35", false)}, off,
			versionStep{act: versionMove, member: "b"}, "", ""},
		{"a mixed cluster goes down without enabling", "3.5.35", []upgradeMember{settled("a", "3.6.16", true), settled("b", "3.5.35", false), settled("c", "3.6.16", false)}, off,
			versionStep{act: versionMove, member: "c", downgrade: true}, "", ""},
		{"a mixed cluster whose data is in the higher minor's format waits", "3.5.35", []upgradeMember{on36("a", "3.6.16", "3.6.0", true), settled("b", "3.5.35", false)}, off,
			versionStep{}, "Downgrading", "member a to migrate its data to 3.5"},
		{"3.7 to 3.6", "3.6.16", []upgradeMember{on36("a", "3.7.3", "3.7.0", true), on36("b", "3.7.3", "3.7.0", false)}, off,
			versionStep{act: versionEnable}, "", ""},
		{"two minors at once", "3.5.35", []upgradeMember{on36("a", "3.7.3", "3.7.0", true), on36("b", "3.7.3", "3.7.0", false)}, off,
			versionStep{}, "DowngradeBlocked", "one minor at a time"},
		{"to a patch the cluster could not come back up from", "3.5.21", []upgradeMember{on36("a", "3.6.16", "3.6.0", true)}, off,
			versionStep{}, "DowngradeBlocked", "3.5.26 or a newer 3.5 patch"},
		{"the refusal holds with the downgrade enabled", "3.6.10", []upgradeMember{on36("a", "3.7.3", "3.6.0", true)}, enabled("3.6.0"),
			versionStep{}, "DowngradeBlocked", "3.6.11 or a newer 3.6 patch"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := planVersion(tt.target, tt.members, tt.dg)
			if tt.reason == "" {
				if err != nil || got != tt.want {
					t.Fatalf("planVersion = %+v, %v; want %+v", got, err, tt.want)
				}
				return
			}
			var w kit.Waiting
			if got != (versionStep{}) || !errors.As(err, &w) || w.Reason != tt.reason || !strings.Contains(w.Message, tt.message) {
				t.Fatalf("planVersion = %+v, %v; want to wait with %s: ...%s...", got, err, tt.reason, tt.message)
			}
		})
	}
}

func (h *harness) progressing() *metav1.Condition {
	h.t.Helper()
	return meta.FindStatusCondition(h.clusterObj().Status.Conditions, etcdv1.ConditionProgressing)
}

// roll moves the member the last reconcile moved onto its new Pod and has it report version.
func (h *harness) rollMember(name string, id uint64, version string) {
	h.t.Helper()
	// Its Pod is restarted; a leader's after its leadership moved away, a reconcile before.
	for i := 0; i < 2 && h.podExists(name); i++ {
		h.reconcile()
	}
	if h.podExists(name) {
		h.t.Fatalf("%s's Pod was not restarted", name)
	}
	h.startPods()
	h.etcd.SetMemberVersion(id, version)
}

// wantVersions fails unless the EtcdMembers name the versions of want.
func (h *harness) wantVersions(when string, want map[string]string) {
	h.t.Helper()
	got := h.memberVersions()
	for name, v := range want {
		if got[name] != v {
			h.t.Fatalf("%s: members at %v; want %v", when, got, want)
		}
	}
}

// wantProgressing fails unless Progressing has reason and its message says says.
func (h *harness) wantProgressing(when, reason, says string) {
	h.t.Helper()
	if cond := h.progressing(); cond == nil || cond.Reason != reason || !strings.Contains(cond.Message, says) {
		h.t.Fatalf("%s: Progressing %+v; want %s saying %q", when, cond, reason, says)
	}
}

// A spec.version one minor lower validates and enables etcd's downgrade once, moves the
// followers then the leader one at a time, each after the one before runs the lower release,
// and waits for etcd to end the downgrade, asking it when no member reports it any more.
func TestDowngradeEnablesOnceMovesTheLeaderLastAndWaitsForEtcd(t *testing.T) {
	h := runningHarness(t)
	h.startPods()
	h.reconcile()
	h.editSpec(func(s *etcdv1.EtcdClusterSpec) { s.Version = "3.5.35" })
	h.reconcile()
	if got := h.etcd.Calls(); !containsCall(got, "DowngradeValidate(3.5.0)") || !containsCall(got, "DowngradeEnable(3.5.0)") {
		t.Fatalf("calls %q; want the downgrade to 3.5 validated and enabled", got)
	}
	if info, _ := h.etcd.Downgrade(); !info.Enabled {
		t.Fatal("the downgrade is not enabled")
	}
	h.wantVersions("the reconcile that enabled the downgrade", map[string]string{"db-1": "3.6.16", "db-2": "3.6.16", "db-3": "3.6.16"})
	h.etcd.HoldDowngrade(true)
	h.reconcile()
	h.wantVersions("after the enabling, db-2 (a follower; db-1 leads) alone", map[string]string{"db-1": "3.6.16", "db-2": "3.5.35", "db-3": "3.6.16"})
	h.rollMember("db-2", 2, "3.5.35")
	h.reconcile()
	h.wantVersions("once db-2 runs 3.5.35, db-3 next", map[string]string{"db-1": "3.6.16", "db-3": "3.5.35"})
	h.rollMember("db-3", 3, "3.5.35")
	h.reconcile()
	h.wantVersions("the leader last", map[string]string{"db-1": "3.5.35"})
	h.rollMember("db-1", 1, "3.6.16") // restarted, not yet on its new release
	h.reconcile()
	h.wantProgressing("db-1 restarted", etcdv1.ReasonDowngrading, "db-1 to run 3.5.35")
	h.etcd.SetMemberVersion(1, "3.5.35")
	h.reconcile()
	h.wantProgressing("every member on 3.5, etcd still downgrading", etcdv1.ReasonDowngradeFinishing, "waiting for etcd")
	if got := h.etcd.CallsTo("DowngradeValidate"); got[len(got)-1] != "DowngradeValidate(3.4.0)" {
		t.Fatalf("validations %q; want etcd asked whether the downgrade is still on (a validation of 3.4)", got)
	}
	// The last member just restarted: etcd may have no cluster version yet, and then says
	// nothing of its downgrade; the operator waits for its answer.
	h.etcd.FailNext("DowngradeValidate", fmt.Errorf("etcdserver: cluster version not found during downgrade: %w", etcd.ErrClusterVersionUnknown))
	h.reconcile()
	h.wantProgressing("etcd without a cluster version", etcdv1.ReasonDowngrading, "no cluster version yet")
	h.etcd.HoldDowngrade(false)
	h.reconcile()
	h.wantProgressing("etcd ended the downgrade", etcdv1.ReasonIdle, "")
	if got := h.etcd.CallsTo("DowngradeEnable"); len(got) != 1 {
		t.Fatalf("the downgrade was enabled %d times: %q", len(got), got)
	}
	if v := h.clusterObj().Status.Version; v != "3.5.35" {
		t.Fatalf("status.version %q, want 3.5.35", v)
	}
}

// The last member up on 3.5 before any status said Downgrading (its restart was the last act
// recorded): the status's last record of it on 3.6 is enough for the operator to ask etcd
// whether the downgrade is over.
func TestDowngradeAsksEtcdWhenTheLastMemberCameUpAtOnce(t *testing.T) {
	h := runningHarness(t)
	h.startPods()
	h.reconcile()
	h.editSpec(func(s *etcdv1.EtcdClusterSpec) { s.Version = "3.5.35" })
	h.reconcile() // enabled
	h.etcd.HoldDowngrade(true)
	h.reconcile() // db-2 moved
	h.rollMember("db-2", 2, "3.5.35")
	h.reconcile() // db-3 moved
	h.rollMember("db-3", 3, "3.5.35")
	h.reconcile() // db-1 moved
	h.wantVersions("the leader last", map[string]string{"db-1": "3.5.35"})
	h.rollMember("db-1", 1, "3.5.35")
	if cond := h.progressing(); cond != nil && (cond.Reason == etcdv1.ReasonDowngrading || cond.Reason == etcdv1.ReasonDowngradeFinishing) {
		t.Fatalf("the setup: Progressing %+v; want the restart's reason, not the downgrade's", cond)
	}
	h.reconcile()
	h.wantProgressing("every member came up on 3.5, etcd still downgrading", etcdv1.ReasonDowngradeFinishing, "waiting for etcd")
}

// spec.version set back up half-way: the enabled downgrade is cancelled, and the member that
// went down goes back up.
func TestDowngradeSetBackUpIsCancelledAndRollsForward(t *testing.T) {
	h := runningHarness(t)
	h.startPods()
	h.reconcile()
	h.editSpec(func(s *etcdv1.EtcdClusterSpec) { s.Version = "3.5.35" })
	h.reconcile() // enabled
	h.reconcile() // db-2 moved
	h.rollMember("db-2", 2, "3.5.35")
	h.editSpec(func(s *etcdv1.EtcdClusterSpec) { s.Version = "3.6.16" })
	h.reconcile()
	if info, _ := h.etcd.Downgrade(); info.Enabled || len(h.etcd.CallsTo("DowngradeCancel")) != 1 {
		t.Fatalf("downgrade %+v, cancels %q; want it cancelled once", info, h.etcd.CallsTo("DowngradeCancel"))
	}
	h.reconcile()
	if got := h.memberVersions(); got["db-2"] != "3.6.16" {
		t.Fatalf("after the cancel: %v; want db-2 moved back up", got)
	}
	h.rollMember("db-2", 2, "3.6.16")
	h.reconcile()
	if _, cv := h.etcd.Downgrade(); cv != "3.6.0" || len(h.etcd.CallsTo("DowngradeCancel")) != 1 {
		t.Fatalf("cluster version %s, cancels %q; want 3.6 again, cancelled once", cv, h.etcd.CallsTo("DowngradeCancel"))
	}
}

// etcd's refusal of the validation is the condition's message, and nothing is enabled.
func TestDowngradeRefusedByEtcdIsShown(t *testing.T) {
	h := runningHarness(t)
	h.startPods()
	h.reconcile()
	h.etcd.FailNext("DowngradeValidate", fmt.Errorf("etcdserver: invalid downgrade target version: %w", etcd.ErrInvalidDowngradeTarget))
	h.editSpec(func(s *etcdv1.EtcdClusterSpec) { s.Version = "3.5.35" })
	h.reconcile()
	cond := h.progressing()
	if cond == nil || cond.Reason != etcdv1.ReasonDowngradeBlocked || !strings.Contains(cond.Message, "etcd refused the downgrade to 3.5: etcdserver: invalid downgrade target version") {
		t.Fatalf("Progressing %+v; want DowngradeBlocked quoting etcd", cond)
	}
	if info, _ := h.etcd.Downgrade(); info.Enabled || len(h.etcd.CallsTo("DowngradeEnable")) != 0 {
		t.Fatal("a refused downgrade was enabled")
	}
}

func containsCall(calls []string, call string) bool { return slices.Contains(calls, call) }

// Right after its members start etcd may have no cluster version yet, and answers the
// downgrade API "cluster version not found". The operator waits and asks again a second
// later, under Downgrading: it sends no enable meanwhile (one sent in that window once made a
// 3.6.16 member exit), and shows no refusal.
func TestDowngradeWaitsWhileEtcdHasNoClusterVersion(t *testing.T) {
	unknown := fmt.Errorf("etcdserver: cluster version not found during downgrade: %w", etcd.ErrClusterVersionUnknown)
	for _, call := range []string{"DowngradeValidate", "DowngradeEnable"} {
		t.Run(call, func(t *testing.T) {
			h := runningHarness(t)
			h.startPods()
			h.reconcile()
			h.editSpec(func(s *etcdv1.EtcdClusterSpec) { s.Version = "3.5.35" })
			h.etcd.FailNext(call, unknown)
			if d := h.reconcileAfter(); d != clusterVersionPoll {
				t.Fatalf("looked at again after %v, want %v", d, clusterVersionPoll)
			}
			if info, _ := h.etcd.Downgrade(); info.Enabled || (call == "DowngradeValidate" && len(h.etcd.CallsTo("DowngradeEnable")) != 0) {
				t.Fatalf("the downgrade was enabled while etcd had no cluster version; calls %q", h.etcd.Calls())
			}
			h.wantProgressing("etcd without a cluster version", etcdv1.ReasonDowngrading, "no cluster version yet")
			h.reconcile()
			if info, _ := h.etcd.Downgrade(); !info.Enabled {
				t.Fatalf("the downgrade is not enabled once etcd has a cluster version; calls %q", h.etcd.Calls())
			}
		})
	}
}
