package defrag

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

const mi = 1 << 20

func qty(s string) *resource.Quantity {
	q := resource.MustParse(s)
	return &q
}

func TestSelectedFollowsTheRule(t *testing.T) {
	tests := []struct {
		name  string
		rule  *etcdv1.DefragRule
		sizes sizes
		want  bool
	}{
		{"all, nothing to reclaim", &etcdv1.DefragRule{All: true}, sizes{dbSize: 10 * mi, inUse: 10 * mi}, true},
		{"absent rule: default 200Mi, below", nil, sizes{dbSize: 300 * mi, inUse: 101 * mi}, false},
		{"absent rule: default 200Mi, above", nil, sizes{dbSize: 300 * mi, inUse: 99 * mi}, true},
		{"freeSpaceAbove", &etcdv1.DefragRule{FreeSpaceAbove: qty("1Mi")}, sizes{dbSize: 3 * mi, inUse: 1 * mi}, true},
		{"freeSpaceAbove, exactly at it", &etcdv1.DefragRule{FreeSpaceAbove: qty("2Mi")}, sizes{dbSize: 3 * mi, inUse: 1 * mi}, false},
		{"quota pressure takes a small win", &etcdv1.DefragRule{QuotaUsageAbove: "80%", MinReclaim: qty("1Mi")}, sizes{dbSize: 90 * mi, inUse: 85 * mi, quota: 100 * mi}, true},
		{"quota pressure, less than minReclaim", &etcdv1.DefragRule{QuotaUsageAbove: "80%", MinReclaim: qty("10Mi")}, sizes{dbSize: 90 * mi, inUse: 85 * mi, quota: 100 * mi}, false},
		{"no quota pressure", &etcdv1.DefragRule{QuotaUsageAbove: "80%", MinReclaim: qty("1Mi")}, sizes{dbSize: 70 * mi, inUse: 60 * mi, quota: 100 * mi}, false},
		{"unknown quota is etcd's 2Gi", &etcdv1.DefragRule{QuotaUsageAbove: "1%", MinReclaim: qty("1Mi")}, sizes{dbSize: 30 * mi, inUse: 28 * mi}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, why := selected(tt.rule, tt.sizes); got != tt.want {
				t.Fatalf("selected = %v (%s), want %v", got, why, tt.want)
			}
		})
	}
}

func view3(healthy ...bool) passView {
	v := passView{members: map[string]memberView{}, leader: 1, voters: 3}
	for i, name := range []string{"a", "b", "c"} {
		m := memberView{name: name, id: uint64(i + 1), inEtcd: true, answered: true, healthy: healthy[i], sizes: sizes{dbSize: 10 * mi, inUse: mi}}
		v.members[name] = m
		if healthy[i] {
			v.healthyVoters++
			v.healthyVoterIDs = append(v.healthyVoterIDs, m.id)
		}
	}
	return v
}

func TestDecide(t *testing.T) {
	all := &etcdv1.DefragRule{All: true}
	tests := []struct {
		name   string
		rule   *etcdv1.DefragRule
		view   passView
		member string
		want   verdict
	}{
		{"a healthy follower", all, view3(true, true, true), "b", verdict{defragment: true, reason: etcdv1.ReasonRuleMatched}},
		{"the leader: leadership moves first", all, view3(true, true, true), "a", verdict{moveLeader: true, reason: etcdv1.ReasonRuleMatched}},
		{"an unhealthy member", all, view3(true, false, true), "b", skip(etcdv1.ReasonMemberUnhealthy, "")},
		{"a healthy member with another one down", all, view3(true, false, true), "c", skip(etcdv1.ReasonWouldLoseQuorum, "")},
		{"below the rule", nil, view3(true, true, true), "b", skip(etcdv1.ReasonBelowThreshold, "")},
		{"not in etcd", all, view3(true, true, true), "d", skip(etcdv1.ReasonMemberUnhealthy, "")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := decide(tt.rule, tt.view, tt.member)
			got.message, tt.want.message = "", ""
			if got != tt.want {
				t.Fatalf("decide = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestSingleMemberIsNeverDefragmented(t *testing.T) {
	v := passView{members: map[string]memberView{"a": {name: "a", id: 1, inEtcd: true, answered: true, healthy: true}}, leader: 1, voters: 1, healthyVoters: 1}
	if got := decide(&etcdv1.DefragRule{All: true}, v, "a"); got.reason != etcdv1.ReasonWouldLoseQuorum {
		t.Fatalf("the only member: %+v, want skipped for %s", got, etcdv1.ReasonWouldLoseQuorum)
	}
}

func TestNextMemberTakesTheLeaderLast(t *testing.T) {
	v := view3(true, true, true) // a leads
	rows := []etcdv1.MemberDefragStatus{{Name: "a", Outcome: etcdv1.DefragOutcomePending}, {Name: "b", Outcome: etcdv1.DefragOutcomePending}, {Name: "c", Outcome: etcdv1.DefragOutcomeSkipped}}
	if got, ok := nextMember(rows, v); !ok || got != "b" {
		t.Fatalf("next = %q, %v; want b", got, ok)
	}
	rows[1].Outcome = etcdv1.DefragOutcomeDefragmented
	if got, ok := nextMember(rows, v); !ok || got != "a" {
		t.Fatalf("next = %q, %v; want the leader a", got, ok)
	}
	rows[0].Outcome = etcdv1.DefragOutcomeDefragmented
	if got, ok := nextMember(rows, v); ok {
		t.Fatalf("next = %q, want none", got)
	}
}
