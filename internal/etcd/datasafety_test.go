package etcd

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// The operator starts a member that has joined with only itself in --initial-cluster (see
// specs.RequireData). These tests prove, on real etcd, the two facts that rests on: with its
// data the member restarts and rejoins as before; with an empty data directory it refuses to
// start, with the line the operator reads as lost data, instead of rejoining under its old ID
// with an empty log.
func TestRestartWithOnlyItselfInTheInitialCluster(t *testing.T) {
	cluster := startStaticCluster(t, 3)
	c := newTestClient(t, Config{Endpoints: endpointsOf(cluster)})
	victim := cluster[2]
	self := victim.name + "=" + victim.peerURL
	before := waitForLeader(t, c, victim.clientURL)

	victim.stop(t)
	victim.start(t, self, "existing", "ignored-with-data")
	if after := waitForLeader(t, c, victim.clientURL); after.MemberID != before.MemberID {
		t.Fatalf("restarted with its data as member %x, was %x", after.MemberID, before.MemberID)
	}

	victim.stop(t)
	if err := os.RemoveAll(victim.dataDir); err != nil {
		t.Fatal(err)
	}
	victim.start(t, self, "existing", "ignored-without-data")
	select {
	case <-victim.exited:
	case <-time.After(startupTimeout):
		t.Fatal("etcd started on an empty data directory under its old member ID")
	}
	if log := tailFile(victim.logPath, 20); !strings.Contains(log, "cannot fetch cluster info from peer urls") {
		t.Fatalf("etcd exited without the line the operator recognizes:\n%s", log)
	}
}

// TestStatusAnswersWithoutQuorum: when the member list cannot be read, each member still
// says what it has, which the operator reports as QuorumLost.
func TestStatusAnswersWithoutQuorum(t *testing.T) {
	cluster := startStaticCluster(t, 3)
	c := newTestClient(t, Config{Endpoints: endpointsOf(cluster)})
	cluster[1].stop(t)
	cluster[2].stop(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if _, _, err := c.MemberList(ctx); err == nil {
		t.Fatal("the member list was read without a quorum")
	}
	st, err := c.Status(shortContext(t), cluster[0].clientURL)
	if err != nil {
		t.Fatalf("status of the survivor: %v", err)
	}
	if st.MemberID == 0 || st.Revision < 1 || st.RaftTerm < 1 || st.RaftIndex < 1 {
		t.Fatalf("status %+v: want the survivor's revision, term and index", st)
	}
}
