package defragplan

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
		name       string
		rule       *etcdv1.DefragRule
		sizes      Sizes
		want       bool
		configured int64 // the quota the cluster gives its members
	}{
		{"all, nothing to reclaim", &etcdv1.DefragRule{All: true}, Sizes{DBSize: 10 * mi, InUse: 10 * mi}, true, 0},
		{"absent rule: default 200Mi, below", nil, Sizes{DBSize: 300 * mi, InUse: 101 * mi}, false, 0},
		{"absent rule: default 200Mi, above", nil, Sizes{DBSize: 300 * mi, InUse: 99 * mi}, true, 0},
		{"freeSpaceAbove", &etcdv1.DefragRule{FreeSpaceAbove: qty("1Mi")}, Sizes{DBSize: 3 * mi, InUse: 1 * mi}, true, 0},
		{"freeSpaceAbove, exactly at it", &etcdv1.DefragRule{FreeSpaceAbove: qty("2Mi")}, Sizes{DBSize: 3 * mi, InUse: 1 * mi}, false, 0},
		{"quota pressure takes a small win", &etcdv1.DefragRule{QuotaUsageAbove: "80%", MinReclaim: qty("1Mi")}, Sizes{DBSize: 90 * mi, InUse: 85 * mi, Quota: 100 * mi}, true, 0},
		{"quota pressure, less than minReclaim", &etcdv1.DefragRule{QuotaUsageAbove: "80%", MinReclaim: qty("10Mi")}, Sizes{DBSize: 90 * mi, InUse: 85 * mi, Quota: 100 * mi}, false, 0},
		{"no quota pressure", &etcdv1.DefragRule{QuotaUsageAbove: "80%", MinReclaim: qty("1Mi")}, Sizes{DBSize: 70 * mi, InUse: 60 * mi, Quota: 100 * mi}, false, 0},
		{"unknown quota is etcd's 2Gi", &etcdv1.DefragRule{QuotaUsageAbove: "1%", MinReclaim: qty("1Mi")}, Sizes{DBSize: 30 * mi, InUse: 28 * mi}, true, 0},
		{"unknown quota is etcd's 2Gi, not 0: no pressure", &etcdv1.DefragRule{QuotaUsageAbove: "80%", MinReclaim: qty("1Mi")}, Sizes{DBSize: 30 * mi, InUse: 28 * mi}, false, 0},
		// etcd 3.5 reports no quota, and 3.6.0 to 3.6.5 report 0 for etcd's default: the
		// member runs with the quota its cluster gives it.
		{"a member reporting 0 runs with the cluster's quota", &etcdv1.DefragRule{QuotaUsageAbove: "80%", MinReclaim: qty("1Mi")}, Sizes{DBSize: 90 * mi, InUse: 85 * mi}, true, 100 * mi},
		{"a reported quota wins over the cluster's", &etcdv1.DefragRule{QuotaUsageAbove: "80%", MinReclaim: qty("1Mi")}, Sizes{DBSize: 90 * mi, InUse: 85 * mi, Quota: 1 << 30}, false, 100 * mi},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, why := selected(tt.rule, tt.sizes, tt.configured); got != tt.want {
				t.Fatalf("selected = %v (%s), want %v", got, why, tt.want)
			}
		})
	}
}

func view3(healthy ...bool) PassView {
	v := PassView{Members: map[string]MemberView{}, Leader: 1, Voters: 3}
	for i, name := range []string{"a", "b", "c"} {
		m := MemberView{Name: name, ID: uint64(i + 1), InEtcd: true, Answered: true, Healthy: healthy[i], Sizes: Sizes{DBSize: 10 * mi, InUse: mi}}
		v.Members[name] = m
		if healthy[i] {
			v.HealthyVoters++
			v.HealthyVoterIDs = append(v.HealthyVoterIDs, m.ID)
		}
	}
	return v
}

func TestDecide(t *testing.T) {
	all := &etcdv1.DefragRule{All: true}
	tests := []struct {
		name   string
		rule   *etcdv1.DefragRule
		view   PassView
		member string
		want   Verdict
	}{
		{"a healthy follower", all, view3(true, true, true), "b", Verdict{Defragment: true, Reason: etcdv1.ReasonRuleMatched}},
		{"the leader: leadership moves first", all, view3(true, true, true), "a", Verdict{MoveLeader: true, Reason: etcdv1.ReasonRuleMatched}},
		{"an unhealthy member", all, view3(true, false, true), "b", skip(etcdv1.ReasonMemberUnhealthy, "")},
		{"a healthy member with another one down", all, view3(true, false, true), "c", skip(etcdv1.ReasonWouldLoseQuorum, "")},
		{"below the rule", nil, view3(true, true, true), "b", skip(etcdv1.ReasonBelowThreshold, "")},
		{"not in etcd", all, view3(true, true, true), "d", skip(etcdv1.ReasonMemberUnhealthy, "")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Decide(tt.rule, tt.view, tt.member)
			got.Message, tt.want.Message = "", ""
			if got != tt.want {
				t.Fatalf("Decide = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestSingleMemberIsNeverDefragmented(t *testing.T) {
	v := PassView{Members: map[string]MemberView{"a": {Name: "a", ID: 1, InEtcd: true, Answered: true, Healthy: true}}, Leader: 1, Voters: 1, HealthyVoters: 1}
	if got := Decide(&etcdv1.DefragRule{All: true}, v, "a"); got.Reason != etcdv1.ReasonWouldLoseQuorum {
		t.Fatalf("the only member: %+v, want skipped for %s", got, etcdv1.ReasonWouldLoseQuorum)
	}
}

func TestNextMemberTakesTheLeaderLast(t *testing.T) {
	v := view3(true, true, true) // a leads
	rows := []etcdv1.MemberDefragStatus{{Name: "a", Outcome: etcdv1.DefragOutcomePending}, {Name: "b", Outcome: etcdv1.DefragOutcomePending}, {Name: "c", Outcome: etcdv1.DefragOutcomeSkipped}}
	if got, ok := NextMember(rows, v); !ok || got != "b" {
		t.Fatalf("next = %q, %v; want b", got, ok)
	}
	rows[1].Outcome = etcdv1.DefragOutcomeDefragmented
	if got, ok := NextMember(rows, v); !ok || got != "a" {
		t.Fatalf("next = %q, %v; want the leader a", got, ok)
	}
	rows[0].Outcome = etcdv1.DefragOutcomeDefragmented
	if got, ok := NextMember(rows, v); ok {
		t.Fatalf("next = %q, want none", got)
	}
}
