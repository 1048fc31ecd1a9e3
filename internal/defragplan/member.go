package defragplan

import (
	"context"
	"fmt"
	"time"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
)

// DefragmentTimeout bounds one member's defragmentation, which blocks that member.
const DefragmentTimeout = 5 * time.Minute

// Member defragments one member now, as a pass with rule.all would (`kubectl etcd defrag`
// calls it member by member): it looks at etcd, refuses when the member does not answer its
// health check or pausing it would leave fewer healthy voters than a quorum, and hands
// leadership to another healthy voter first when the member leads. names are the members
// cli can reach, endpointOf their client URLs; a voter not among them counts as unhealthy.
// It returns whether leadership was moved away from the member.
func Member(ctx context.Context, cli etcd.Client, names []string, endpointOf func(string) string, name string) (movedLeader bool, err error) {
	all := &etcdv1.DefragRule{All: true}
	view, err := Look(ctx, cli, names, endpointOf)
	if err != nil {
		return false, err
	}
	v := Decide(all, view, name)
	if v.MoveLeader {
		if err := LeadAway(ctx, cli, view, name); err != nil {
			return false, err
		}
		movedLeader = true
		// Look again, as a pass does after moving leadership: the quorum is judged anew, once
		// the members say who leads now (one may answer before it heard of the election).
		for tries := 1; ; tries++ {
			if view, err = Look(ctx, cli, names, endpointOf); err != nil {
				return movedLeader, err
			}
			if v = Decide(all, view, name); !v.MoveLeader {
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
	if !v.Defragment {
		return movedLeader, fmt.Errorf("not defragmenting %s (%s): %s", name, v.Reason, v.Message)
	}
	defragCtx, cancel := context.WithTimeout(ctx, DefragmentTimeout)
	defer cancel()
	return movedLeader, cli.Defragment(defragCtx, view.Members[name].Endpoint)
}

// LeadAway hands leadership from the member name to another healthy voter.
func LeadAway(ctx context.Context, cli etcd.Client, view PassView, name string) error {
	from := view.Members[name].ID
	for _, to := range view.HealthyVoterIDs {
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
