package controller

import (
	"errors"
	"strings"
	"testing"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
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
		{"two minors at once", "3.7.1", []upgradeMember{settled("a", "3.5.35", true), settled("b", "3.6.16", false)}, "", "UpgradeBlocked", "one minor at a time"},
		{"a downgrade", "3.6.15", []upgradeMember{settled("a", "3.6.16", true), settled("b", "3.6.15", false)}, "", "UpgradeBlocked", "does not downgrade"},
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
			var w errWaiting
			if got != "" || !errors.As(err, &w) || w.reason != tt.reason || !strings.Contains(w.message, tt.message) {
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
