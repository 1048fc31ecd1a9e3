package etcd

import (
	"context"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

func (c *client) MoveLeader(ctx context.Context, to uint64) error {
	leaderEndpoint, leaderID, err := c.findLeaderEndpoint(ctx)
	if err != nil {
		return fmt.Errorf("etcd move leader to %x: %w", to, err)
	}
	if leaderID == to {
		return nil
	}
	// etcd only accepts MoveLeader on the leader itself; a follower answers
	// ErrNotLeader rather than forwarding it.
	err = c.withEndpoint(leaderEndpoint, func(_ clientv3.KV, m clientv3.Maintenance) error {
		_, err := m.MoveLeader(ctx, to)
		return err
	})
	if err != nil {
		return fmt.Errorf("etcd move leader %x -> %x via %s: %w", leaderID, to, leaderEndpoint, translateError(err))
	}
	return nil
}

// findLeaderEndpoint returns an endpoint served by the leader and the leader's
// ID. It prefers the configured endpoints, which are known to be reachable
// from the operator, and falls back to the client URLs the leader advertises
// (needed when the configured endpoint is a load-balanced Service).
func (c *client) findLeaderEndpoint(ctx context.Context) (string, uint64, error) {
	var leaderID uint64
	var errs []error
	for _, endpoint := range c.cli.Endpoints() {
		st, err := c.statusWithTimeout(ctx, endpoint)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if st.Leader != 0 && st.MemberID == st.Leader {
			return endpoint, st.Leader, nil
		}
		if st.Leader != 0 {
			leaderID = st.Leader
		}
	}
	if leaderID == 0 {
		return "", 0, fmt.Errorf("no endpoint knows a leader: %w", errors.Join(errs...))
	}
	return c.advertisedClientURL(ctx, leaderID)
}

func (c *client) advertisedClientURL(ctx context.Context, id uint64) (string, uint64, error) {
	_, members, err := c.MemberList(ctx)
	if err != nil {
		return "", 0, err
	}
	for _, m := range members {
		if m.ID == id && len(m.ClientURLs) > 0 {
			return m.ClientURLs[0], id, nil
		}
	}
	return "", 0, fmt.Errorf("leader %x advertises no client URL", id)
}

// statusWithTimeout keeps one dead endpoint from using up the caller's whole
// deadline while the others are still to be asked.
func (c *client) statusWithTimeout(ctx context.Context, endpoint string) (Status, error) {
	ctx, cancel := context.WithTimeout(ctx, c.healthTimeout)
	defer cancel()
	return c.Status(ctx, endpoint)
}
