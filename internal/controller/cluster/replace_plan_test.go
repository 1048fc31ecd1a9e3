package cluster

import (
	"testing"

	"github.com/quorumkeeper/etcd-operator/internal/etcd"
)

func voter(id uint64) etcd.Member {
	return etcd.Member{ID: id, Name: "m" + etcd.FormatID(id), ClientURLs: []string{"http://m" + etcd.FormatID(id)}}
}

func TestPlanReplacementPicksADamagedMemberTheQuorumCanLose(t *testing.T) {
	three := []etcd.Member{voter(1), voter(2), voter(3)}
	all := map[uint64]bool{1: true, 2: true, 3: true}
	ok := func(name string, id uint64, healthy bool) memberFacts {
		return memberFacts{name: name, id: id, inEtcd: true, started: true, healthy: healthy, pvcPresent: true, podPresent: true}
	}
	with := func(f memberFacts, edit func(*memberFacts)) memberFacts { edit(&f); return f }
	cases := []struct {
		name    string
		facts   []memberFacts
		healthy map[uint64]bool
		member  string // "" for no plan
		refused bool
	}{
		{"all well", []memberFacts{ok("a", 1, true), ok("b", 2, true), ok("c", 3, true)}, all, "", false},
		{"PVC gone", []memberFacts{ok("a", 1, true), with(ok("b", 2, true), func(f *memberFacts) { f.pvcPresent = false }), ok("c", 3, true)}, all, "b", false},
		{"PVC gone, another voter down: refused",
			[]memberFacts{ok("a", 1, true), with(ok("b", 2, true), func(f *memberFacts) { f.pvcPresent = false }), ok("c", 3, false)},
			map[uint64]bool{1: true, 2: true}, "b", true},
		{"the unhealthy damaged one first",
			[]memberFacts{with(ok("a", 1, true), func(f *memberFacts) { f.asked = true }), with(ok("b", 2, false), func(f *memberFacts) { f.corrupt = true }), ok("c", 3, true)},
			map[uint64]bool{1: true, 3: true}, "b", false},
		{"tmpfs Pod lost", []memberFacts{ok("a", 1, true), with(ok("b", 2, false), func(f *memberFacts) { f.memory, f.podPresent = true, false }), ok("c", 3, true)},
			map[uint64]bool{1: true, 3: true}, "b", false},
		{"data error in the last exit", []memberFacts{with(ok("a", 1, false), func(f *memberFacts) { f.dataError = "wal: crc mismatch" }), ok("b", 2, true), ok("c", 3, true)},
			map[uint64]bool{2: true, 3: true}, "a", false},
		{"data error long ago, serving now", []memberFacts{with(ok("a", 1, true), func(f *memberFacts) { f.dataError = "wal: crc mismatch" }), ok("b", 2, true), ok("c", 3, true)}, all, "", false},
		{"never started: a first start is no loss", []memberFacts{ok("a", 1, true), ok("b", 2, true), ok("c", 3, true), {name: "d", id: 4, inEtcd: true}}, all, "", false},
		{"removed from etcd by hand", []memberFacts{ok("a", 1, true), {name: "d", id: 4, recorded: true, pvcPresent: true, podPresent: true}}, map[uint64]bool{1: true}, "d", false},
		{"asked for, not in etcd", []memberFacts{ok("a", 1, true), {name: "d", asked: true}}, map[uint64]bool{1: true}, "d", false},
		{"being deleted already", []memberFacts{ok("a", 1, true), with(ok("b", 2, true), func(f *memberFacts) { f.pvcPresent, f.deleting = false, true }), ok("c", 3, true)}, all, "", false},
	}
	for _, tc := range cases {
		plan := planReplacement(tc.facts, three, tc.healthy)
		switch {
		case tc.member == "" && plan != nil:
			t.Errorf("%s: planned %+v, want nothing", tc.name, *plan)
		case tc.member != "" && plan == nil:
			t.Errorf("%s: no plan, want %s", tc.name, tc.member)
		case plan != nil && (plan.member != tc.member || (plan.refusal != "") != tc.refused || plan.why == ""):
			t.Errorf("%s: planned %+v, want %s refused=%v", tc.name, *plan, tc.member, tc.refused)
		}
	}
}
