package kit

import (
	"slices"
	"testing"

	"github.com/quorumkeeper/etcd-operator/internal/etcd"
)

func voter(id uint64) etcd.Member {
	return etcd.Member{ID: id, Name: "m" + etcd.FormatID(id), ClientURLs: []string{"http://m" + etcd.FormatID(id)}}
}

// removalCase is a removal of member remove from members with the healthy ones, and what a
// decision about it should say.
type removalCase struct {
	name    string
	members []etcd.Member
	healthy map[uint64]bool
	remove  uint64
	want    bool
}

func TestRemovalVerdictProjectsTheQuorumWithoutTheMember(t *testing.T) {
	three := []etcd.Member{voter(1), voter(2), voter(3)}
	learner := voter(4)
	learner.IsLearner = true
	cases := []removalCase{
		{"healthy follower of 3 healthy", three, map[uint64]bool{1: true, 2: true, 3: true}, 3, true},
		{"dead voter, the other two healthy", three, map[uint64]bool{1: true, 2: true}, 3, true},
		{"healthy voter while another is dead", three, map[uint64]bool{1: true, 2: true}, 1, false},
		{"dead voter while another is dead too", three, map[uint64]bool{1: true}, 3, false},
		{"the only voter", []etcd.Member{voter(1)}, map[uint64]bool{1: true}, 1, false},
		{"a learner, whatever the health", append(slices.Clone(three), learner), map[uint64]bool{}, 4, true},
		{"a member etcd does not know", three, map[uint64]bool{}, 9, true},
		{"one of 5 with 2 dead", []etcd.Member{voter(1), voter(2), voter(3), voter(4), voter(5)}, map[uint64]bool{1: true, 2: true, 3: true}, 5, true},
		{"a healthy one of 5 with 2 dead", []etcd.Member{voter(1), voter(2), voter(3), voter(4), voter(5)}, map[uint64]bool{1: true, 2: true, 3: true}, 1, false},
	}
	for _, tc := range cases {
		ok, why := RemovalVerdict(tc.members, tc.healthy, tc.remove)
		if ok != tc.want || (!ok && why == "") {
			t.Errorf("%s: ok %v (%q), want %v", tc.name, ok, why, tc.want)
		}
	}
}

func TestStopBeforeRemovalOnlyWhileTheOthersHoldTheQuorumAsItIs(t *testing.T) {
	three := []etcd.Member{voter(1), voter(2), voter(3)}
	four := []etcd.Member{voter(1), voter(2), voter(3), voter(4)}
	learner := voter(5)
	learner.IsLearner = true
	cases := []removalCase{
		{"one of 3, the other two healthy", three, map[uint64]bool{1: true, 2: true, 3: true}, 3, true},
		{"one of 3 while another is dead", three, map[uint64]bool{1: true, 3: true}, 3, false},
		{"one of 2: the removal could not commit", []etcd.Member{voter(1), voter(2)}, map[uint64]bool{1: true, 2: true}, 2, false},
		{"one of 4, the other three healthy", four, map[uint64]bool{1: true, 2: true, 3: true}, 4, true},
		{"one of 4 while another is dead: two of four is no quorum", four, map[uint64]bool{1: true, 2: true, 4: true}, 4, false},
		{"a learner serves no client", append(slices.Clone(three), learner), map[uint64]bool{1: true, 2: true, 3: true}, 5, false},
		{"a member etcd does not know", three, map[uint64]bool{1: true, 2: true, 3: true}, 9, false},
	}
	for _, tc := range cases {
		if got := StopBeforeRemoval(tc.members, tc.healthy, tc.remove); got != tc.want {
			t.Errorf("%s: stop first %v, want %v", tc.name, got, tc.want)
		}
	}
}
