package replicas

import (
	"fmt"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
)

// checkScale says whether changing the member count from current to target keeps the
// cluster's quorum, given how many members are ready now. A removal may take a ready member
// away, and a new member counts toward the quorum only once it has caught up, so both
// directions need a quorum of the new size among the members that are ready and stay.
func checkScale(current, target, ready int) error {
	switch {
	case target < 1:
		return fmt.Errorf("%d members would leave none: use `kubectl etcd pause` to stop a cluster and keep its data", target)
	case target < current && ready-(current-target) < etcd.Quorum(target):
		return fmt.Errorf("removing a member from %d (%d ready) leaves %d ready of %d, below the quorum of %d: the cluster would stop accepting writes",
			current, ready, ready-(current-target), target, etcd.Quorum(target))
	case target > current && ready < etcd.Quorum(target):
		return fmt.Errorf("adding a member to %d with only %d ready: %d members need %d ready for a quorum; heal the cluster first",
			current, ready, target, etcd.Quorum(target))
	}
	return nil
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
