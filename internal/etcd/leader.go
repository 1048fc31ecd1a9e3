package etcd

import (
	"context"
	"errors"
	"fmt"
	"slices"

	clientv3 "go.etcd.io/etcd/client/v3"
)

func (c *client) MoveLeader(ctx context.Context, to uint64) error {
	leaderEndpoint, leaderID, err := c.findLeaderEndpoint(ctx, "")
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

// findLeaderEndpoint returns an endpoint served by the leader and the leader's ID. known, when
// not empty, is the endpoint the caller saw the leader serve (its last look): it is asked alone
// first (findLeader). Otherwise the configured endpoints are asked, which are known to be
// reachable from the operator, with the client URLs the leader advertises as the last resort
// (needed when the configured endpoint is a load-balanced Service).
func (c *client) findLeaderEndpoint(ctx context.Context, known string) (string, uint64, error) {
	endpoint, leaderID, err := findLeader(ctx, c.statusWithTimeout, c.cli.Endpoints(), known)
	if err != nil || endpoint != "" {
		return endpoint, leaderID, err
	}
	return c.advertisedClientURL(ctx, leaderID)
}

// statusAsk asks one endpoint about itself (client.statusWithTimeout); safe for concurrent use.
type statusAsk func(ctx context.Context, endpoint string) (Status, error)

// findLeader returns the endpoint the leader serves and its ID, or "" and the leader's ID when
// the endpoints name a leader that serves none of them. When known is not empty it is asked
// first and alone: a promotion is asked for every catch-up poll (100 ms), and the caller's look
// has just seen the leader there, so a poll costs the leader one question instead of every
// member one. Only when known does not answer or no longer leads (the leader changed) are the
// other endpoints asked, all at once: one that does not answer (a member whose Pod is gone)
// would otherwise cost each caller its whole timeout before the leader is reached.
func findLeader(ctx context.Context, ask statusAsk, endpoints []string, known string) (string, uint64, error) {
	var search leaderSearch
	if known != "" {
		st, err := ask(ctx, known)
		if search.heard(statusAnswer{endpoint: known, status: st, err: err}) {
			return known, search.leaderID, nil
		}
		endpoints = slices.DeleteFunc(slices.Clone(endpoints), func(e string) bool { return e == known })
	}
	askCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	answers := make(chan statusAnswer, len(endpoints))
	for _, endpoint := range endpoints {
		go func() {
			st, err := ask(askCtx, endpoint)
			answers <- statusAnswer{endpoint: endpoint, status: st, err: err}
		}()
	}
	for range endpoints {
		if a := <-answers; search.heard(a) {
			return a.endpoint, search.leaderID, nil
		}
	}
	if search.leaderID == 0 {
		return "", 0, fmt.Errorf("no endpoint knows a leader: %w", errors.Join(search.errs...))
	}
	return "", search.leaderID, nil
}

// leaderSearch is what the answers of a search for the leader said so far: the leader's ID
// any of them named, and the errors of those that did not answer.
type leaderSearch struct {
	leaderID uint64
	errs     []error
}

// heard takes one answer in; true when it came from the leader itself.
func (s *leaderSearch) heard(a statusAnswer) bool {
	switch {
	case a.err != nil:
		s.errs = append(s.errs, a.err)
	case a.status.Leader != 0:
		s.leaderID = a.status.Leader
		return a.status.MemberID == a.status.Leader
	}
	return false
}

// statusAnswer is one endpoint's answer to a status request.
type statusAnswer struct {
	endpoint string
	status   Status
	err      error
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
