package defrag

import (
	"context"
	"fmt"
	"time"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
)

// Member defragments one member now, as a pass with rule.all would (`kubectl etcd defrag`
// calls it member by member): it looks at etcd, refuses when the member does not answer its
// health check or pausing it would leave fewer healthy voters than a quorum, and hands
// leadership to another healthy voter first when the member leads. names are the members
// cli can reach, endpointOf their client URLs; a voter not among them counts as unhealthy.
// It returns whether leadership was moved away from the member.
func Member(ctx context.Context, cli etcd.Client, names []string, endpointOf func(string) string, name string) (movedLeader bool, err error) {
	all := &etcdv1.DefragRule{All: true}
	view, err := look(ctx, cli, names, endpointOf)
	if err != nil {
		return false, err
	}
	v := decide(all, view, name)
	if v.moveLeader {
		if err := leadAway(ctx, cli, view, name); err != nil {
			return false, err
		}
		movedLeader = true
		// Look again, as a pass does after moving leadership: the quorum is judged anew, once
		// the members say who leads now (one may answer before it heard of the election).
		for tries := 1; ; tries++ {
			if view, err = look(ctx, cli, names, endpointOf); err != nil {
				return movedLeader, err
			}
			if v = decide(all, view, name); !v.moveLeader {
				break
			}
			if tries == 10 {
				return movedLeader, fmt.Errorf("%s still leads after leadership was handed away; try again", name)
			}
			select {
			case <-ctx.Done():
				return movedLeader, ctx.Err()
			case <-time.After(300 * time.Millisecond):
			}
		}
	}
	if !v.defragment {
		return movedLeader, fmt.Errorf("not defragmenting %s (%s): %s", name, v.reason, v.message)
	}
	defragCtx, cancel := context.WithTimeout(ctx, defragmentTimeout)
	defer cancel()
	return movedLeader, cli.Defragment(defragCtx, view.members[name].endpoint)
}

// leadAway hands leadership from the member name to another healthy voter.
func leadAway(ctx context.Context, cli etcd.Client, view passView, name string) error {
	from := view.members[name].id
	for _, to := range view.healthyVoterIDs {
		if to == from {
			continue
		}
		if err := cli.MoveLeader(ctx, to); err != nil {
			return fmt.Errorf("moving leadership away from %s before defragmenting it: %w", name, err)
		}
		return nil
	}
	return fmt.Errorf("no other healthy voter to take leadership from %s", name)
}
