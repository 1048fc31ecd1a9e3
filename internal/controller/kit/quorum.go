package kit

import (
	"fmt"

	"github.com/quorumkeeper/etcd-operator/internal/etcd"
)

// RemovalVerdict projects the quorum after removing member id: the voters left must keep a
// healthy majority. Removing a learner, or a member etcd does not know, never touches the
// quorum. ok is false with the reason when the removal must not happen.
func RemovalVerdict(members []etcd.Member, healthy map[uint64]bool, id uint64) (ok bool, why string) {
	victim, total, alive := votersBeside(members, healthy, id)
	if victim == nil || victim.IsLearner {
		return true, ""
	}
	if total == 0 {
		return false, fmt.Sprintf("member %s is the only voter", victim.IDHex())
	}
	if alive < etcd.Quorum(total) {
		return false, fmt.Sprintf("removing member %s would leave %d healthy of %d voters, below the quorum of %d",
			victim.IDHex(), alive, total, etcd.Quorum(total))
	}
	return true, ""
}

// StopBeforeRemoval says whether voter id may be stopped before its removal is proposed. etcd
// ends a removed member at once, and the requests its clients had in flight fail; a member
// stopped first shuts down gracefully, and its clients' requests go to the others. Only while
// the other healthy voters alone hold a quorum of the voters as they are, the stopped one
// counted, so that the removal can still commit: never in a cluster of two.
func StopBeforeRemoval(members []etcd.Member, healthy map[uint64]bool, id uint64) bool {
	victim, total, alive := votersBeside(members, healthy, id)
	return victim != nil && !victim.IsLearner && alive >= etcd.Quorum(total+1)
}

// votersBeside finds member id in members and counts the voters beside it, and the healthy
// ones among them.
func votersBeside(members []etcd.Member, healthy map[uint64]bool, id uint64) (victim *etcd.Member, total, alive int) {
	for i, m := range members {
		if m.ID == id {
			victim = &members[i]
			continue
		}
		if m.IsLearner {
			continue
		}
		total++
		if healthy[m.ID] {
			alive++
		}
	}
	return victim, total, alive
}
