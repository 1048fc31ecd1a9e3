package etcdsim

import (
	"context"
	"maps"
	"slices"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/quorumkeeper/etcd-operator/internal/etcd"
)

// statusAsks counts the Status requests each member (by the host:port it was dialled at)
// receives.
type statusAsks struct {
	mu     sync.Mutex
	counts map[string]int
}

func (a *statusAsks) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if info.FullMethod == "/etcdserverpb.Maintenance/Status" {
		md, _ := metadata.FromIncomingContext(ctx)
		a.mu.Lock()
		a.counts["http://"+firstOr(md.Get(":authority"))]++
		a.mu.Unlock()
	}
	return handler(ctx, req)
}

func (a *statusAsks) take() map[string]int {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := a.counts
	a.counts = map[string]int{}
	return out
}

// A catch-up poll that names the leader asks the leader alone whether it leads, one status a
// poll, through the operator's own client; a poll that names a follower (the leader changed)
// still promotes, through the leader.
func TestPromoteAsksTheNamedLeaderAlone(t *testing.T) {
	asks := &statusAsks{counts: map[string]int{}}
	s := New(Options{ManualStart: true})
	urls := serveLoopback(t, s, 4, grpc.ChainUnaryInterceptor(asks.intercept))
	founders := []Member{loopbackMember(0, urls[0]), loopbackMember(1, urls[1]), loopbackMember(2, urls[2])}
	if _, err := s.Bootstrap("tok", founders); err != nil {
		t.Fatal(err)
	}
	cli, err := etcd.New(etcd.Config{Endpoints: urls[:3]})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	leader, follower := leaderAndFollower(t, cli, urls[:3])
	joiner := loopbackMember(3, urls[3])
	added, _, err := cli.AddLearner(ctx(t), joiner.PeerURLs)
	if err != nil {
		t.Fatal(err)
	}
	asks.take()
	const polls = 3
	for range polls {
		expectErr(t, "promote unstarted", cli.Promote(ctx(t), added.ID, leader), etcd.ErrLearnerNotReady)
	}
	if got, want := asks.take(), map[string]int{leader: polls}; !maps.Equal(got, want) {
		t.Fatalf("status asks of %d polls naming the leader: %v, want %v", polls, got, want)
	}
	if _, _, err := s.StartProcess(Boot{Member: joiner}); err != nil {
		t.Fatal(err)
	}
	if err := cli.Promote(ctx(t), added.ID, follower); err != nil {
		t.Fatalf("promote naming a follower as the leader: %v", err)
	}
	if got := asks.take(); got[follower] != 1 || got[leader] != 1 {
		t.Fatalf("status asks of a poll naming a follower: %v, want the follower's and the leader's", got)
	}
	_, members, err := cli.MemberList(ctx(t))
	if err != nil || slices.ContainsFunc(members, func(m etcd.Member) bool { return m.IsLearner }) {
		t.Fatalf("after the promotion: %+v, %v", members, err)
	}
}

// leaderAndFollower are the endpoint of the leader and of a follower among endpoints.
func leaderAndFollower(t *testing.T, cli etcd.Client, endpoints []string) (leader, follower string) {
	t.Helper()
	for _, u := range endpoints {
		st, err := cli.Status(ctx(t), u)
		switch {
		case err != nil:
			t.Fatal(err)
		case st.MemberID == st.Leader:
			leader = u
		default:
			follower = u
		}
	}
	if leader == "" || follower == "" {
		t.Fatalf("no leader and follower among %v", endpoints)
	}
	return leader, follower
}
