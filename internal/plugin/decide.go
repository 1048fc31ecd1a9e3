package plugin

import (
	"fmt"
	"sort"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

// quorum is the number of voters that must agree in a cluster of n voters.
func quorum(n int) int { return n/2 + 1 }

// checkScale says whether changing the member count from current to target keeps the
// cluster's quorum, given how many members are ready now. A removal may take a ready member
// away, and a new member counts toward the quorum only once it has caught up, so both
// directions need a quorum of the new size among the members that are ready and stay.
func checkScale(current, target, ready int) error {
	switch {
	case target < 1:
		return fmt.Errorf("%d members would leave none: use `kubectl etcd pause` to stop a cluster and keep its data", target)
	case target < current && ready-(current-target) < quorum(target):
		return fmt.Errorf("removing a member from %d (%d ready) leaves %d ready of %d, below the quorum of %d: the cluster would stop accepting writes",
			current, ready, ready-(current-target), target, quorum(target))
	case target > current && ready < quorum(target):
		return fmt.Errorf("adding a member to %d with only %d ready: %d members need %d ready for a quorum; heal the cluster first",
			current, ready, target, quorum(target))
	}
	return nil
}

// checkReplace says whether taking one member down to replace it keeps the quorum: the other
// ready voters must still be a quorum of all voters.
func checkReplace(voters, readyVoters int, memberReady bool) error {
	others := readyVoters
	if memberReady {
		others--
	}
	if others < quorum(voters) {
		return fmt.Errorf("replacing it leaves %d ready voters of %d, below the quorum of %d: the cluster would stop accepting writes until the new member has caught up",
			others, voters, quorum(voters))
	}
	return nil
}

// defragOrder is the order members are defragmented in: by name, the leader last, so that
// leadership (which a defragmenting leader cannot serve well) moves at most once.
func defragOrder(names []string, leader string) []string {
	out := append([]string(nil), names...)
	sort.Slice(out, func(i, j int) bool {
		if (out[i] == leader) != (out[j] == leader) {
			return out[j] == leader
		}
		return out[i] < out[j]
	})
	return out
}

// resumeReplicas is the count `kubectl etcd resume` restores: the one pause recorded, else
// the given default.
func resumeReplicas(recorded string, fallback int32) (int32, error) {
	if recorded == "" {
		return fallback, nil
	}
	var n int32
	if _, err := fmt.Sscanf(recorded, "%d", &n); err != nil || n < 1 {
		return 0, fmt.Errorf("annotation %s is %q, not a member count; resume with --replicas N", etcdv1.AnnotationPausedReplicas, recorded)
	}
	return n, nil
}
