package etcd

import (
	"context"
	"testing"
	"time"
)

// A client made while its members were not running yet (the operator's, right after a resume
// or at bootstrap, while the Pods are still being created) reaches a member soon after it
// comes up, however long it failed before. gRPC's own wait between attempts grows to two
// minutes: the operator once took a quorum that was back for a quorum lost because its client
// had stopped trying.
func TestAClientReachesAMemberThatCameUpLate(t *testing.T) {
	t.Parallel()
	m := newMemberSpec(t, "late", "http")
	c := newTestClient(t, Config{Endpoints: []string{m.clientURL}})
	// 30 s of failures: gRPC's default backoff would try next 40 to 50 s after the first.
	for until := time.Now().Add(30 * time.Second); time.Now().Before(until); {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, _, err := c.MemberList(ctx)
		cancel()
		if err == nil {
			t.Fatal("the member list was read with no member running")
		}
	}
	m.start(t, initialCluster([]*etcdMember{m}), "new", "token-"+t.Name())
	waitForLeader(t, newTestClient(t, Config{Endpoints: []string{m.clientURL}}), m.clientURL)
	ctx, cancel := context.WithTimeout(context.Background(), 3*reconnectBackoffMax)
	defer cancel()
	if _, _, err := c.MemberList(ctx); err != nil {
		t.Fatalf("the client made before the member came up does not reach it: %v", err)
	}
}
