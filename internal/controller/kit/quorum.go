package kit

import (
	"fmt"

	"github.com/quorumkeeper/etcd-operator/internal/etcd"
)

// RemovalVerdict projects the quorum after removing member id: the voters left must keep a
// healthy majority. Removing a learner, or a member etcd does not know, never touches the
// quorum. ok is false with the reason when the removal must not happen.
func RemovalVerdict(members []etcd.Member, healthy map[uint64]bool, id uint64) (ok bool, why string) {
	var victim *etcd.Member
	total, alive := 0, 0
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
