package cluster

import (
	"errors"
	"strings"
	"testing"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller/kit"
)

func TestMembershipBlocked(t *testing.T) {
	tests := []struct {
		name    string
		target  string
		running map[string]string
		message string // part of the MembershipUnsafe wait; "" when allowed
	}{
		{"a fixed patch", "3.5.35", map[string]string{"a": "3.5.35", "b": "3.5.35"}, ""},
		{"3.6", "3.6.16", map[string]string{"a": "3.6.16"}, ""},
		{"3.7", "3.7.3", map[string]string{"a": "3.7.3"}, ""},
		{"the first fixed patch", "3.5.20", map[string]string{"a": "3.5.20"}, ""},
		{"a leading v", "v3.5.21", map[string]string{"a": "3.5.21"}, ""},
		{"spec names a broken patch", "3.5.19", nil, "spec.version is 3.5.19"},
		{"a member runs a broken patch", "3.5.35", map[string]string{"a": "3.5.35", "b": "3.5.12"}, "member b runs 3.5.12"},
		{"promotion of a non-started learner", "3.5.0", map[string]string{"a": "3.5.0"}, "set spec.version to 3.5.20 or a newer 3.5 patch"},
		{"a member that does not answer", "3.5.35", map[string]string{"a": ""}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := membershipBlocked(tt.target, tt.running)
			if tt.message == "" {
				if err != nil {
					t.Fatalf("membershipBlocked = %v, want nil", err)
				}
				return
			}
			var w kit.Waiting
			if !errors.As(err, &w) || w.Reason != etcdv1.ReasonMembershipUnsafe || !strings.Contains(w.Message, tt.message) {
				t.Fatalf("membershipBlocked = %v; want MembershipUnsafe with ...%s...", err, tt.message)
			}
		})
	}
}

// On a patch whose learner promotion is broken a scale-out adds nothing and says why, while
// the upgrade to a fixed patch, the way out, still goes on.
func TestScaleOutOnABrokenPatchIsRefusedButTheUpgradeGoesOn(t *testing.T) {
	h := newHarness(t)
	h.editSpec(func(s *etcdv1.EtcdClusterSpec) { s.Version = "v3.5.12" })
	h.etcd.SetVersion("3.5.12")
	h.reconcile()
	h.running()
	h.startPods()
	h.reconcile()
	if got := h.memberVersions(); got["db-1"] != "3.5.12" {
		t.Fatalf("members %v, want spec.version without its v", got)
	}
	h.setReplicas(4)
	h.reconcile()
	h.reconcile()
	if n := len(h.members()); n != 3 || len(h.etcd.CallsTo("AddLearner")) != 0 {
		t.Fatalf("%d members, AddLearner calls %v: a member was added on 3.5.12", n, h.etcd.CallsTo("AddLearner"))
	}
	cond := h.condition(etcdv1.ConditionProgressing)
	if cond.Reason != etcdv1.ReasonMembershipUnsafe || !strings.Contains(cond.Message, "3.5.20") {
		t.Fatalf("Progressing %+v, want MembershipUnsafe naming 3.5.20", cond)
	}
	h.editSpec(func(s *etcdv1.EtcdClusterSpec) { s.Version = "3.5.35" })
	h.reconcile()
	moved := 0
	for _, v := range h.memberVersions() {
		if v == "3.5.35" {
			moved++
		}
	}
	if moved != 1 {
		t.Fatalf("members %v: the upgrade to 3.5.35 did not move one member while the scale-out was refused", h.memberVersions())
	}
}

// A new cluster whose spec.version has a leading v makes members whose spec.version has none:
// the form images, comparisons and the member CRD use.
func TestVersionWithLeadingVMakesMembersWithout(t *testing.T) {
	h := newHarness(t)
	h.editSpec(func(s *etcdv1.EtcdClusterSpec) { s.Version = "v3.6.16" })
	h.reconcile()
	for name, v := range h.memberVersions() {
		if v != "3.6.16" {
			t.Fatalf("%s spec.version %q, want 3.6.16", name, v)
		}
	}
	h.running()
	h.startPods()
	h.reconcile()
	h.reconcile()
	if got := h.memberVersions(); got["db-1"] != "3.6.16" || got["db-2"] != "3.6.16" {
		t.Fatalf("v3.6.16 started an upgrade: %v", got)
	}
}
