package replace

import (
	"fmt"

	"github.com/quorumkeeper/etcd-operator/internal/etcd"
)

// checkReplace says whether taking one member down to replace it keeps the quorum: the other
// ready voters must still be a quorum of all voters.
func checkReplace(voters, readyVoters int, memberReady bool) error {
	others := readyVoters
	if memberReady {
		others--
	}
	if others < etcd.Quorum(voters) {
		return fmt.Errorf("replacing it leaves %d ready voters of %d, below the quorum of %d: the cluster would stop accepting writes until the new member has caught up",
			others, voters, etcd.Quorum(voters))
	}
	return nil
}
