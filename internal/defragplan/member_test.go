package defragplan

import (
	"context"
	"slices"
	"strings"
	"testing"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
	"github.com/quorumkeeper/etcd-operator/internal/etcdfake"
)

// memberFake is a three-member cluster whose client URLs are the members' names.
func memberFake() (*etcdfake.Cluster, map[string]uint64, []string) {
	f := etcdfake.New()
	ids := map[string]uint64{}
	names := []string{"db-1", "db-2", "db-3"}
	for _, name := range names {
		ids[name] = f.SeedMember(name, "peer-"+name, name).ID
	}
	return f, ids, names
}

func self(name string) string { return name }

func TestMemberDefragmentsAFollowerWithoutTouchingLeadership(t *testing.T) {
	f, ids, names := memberFake()
	moved, err := Member(context.Background(), f, names, self, "db-2")
	if err != nil || moved {
		t.Fatalf("Member(db-2) = moved %t, %v", moved, err)
	}
	if got := f.CallsTo("Defragment"); !slices.Equal(got, []string{"Defragment(db-2)"}) || len(f.CallsTo("MoveLeader")) != 0 || f.Leader() != ids["db-1"] {
		t.Fatalf("calls %v, leader %x", f.Calls(), f.Leader())
	}
}

func TestMemberMovesLeadershipAwayBeforeDefragmentingTheLeader(t *testing.T) {
	f, ids, names := memberFake()
	moved, err := Member(context.Background(), f, names, self, "db-1")
	if err != nil || !moved {
		t.Fatalf("Member(db-1) = moved %t, %v", moved, err)
	}
	calls := f.Calls()
	moveAt := slices.Index(calls, "MoveLeader("+etcd.FormatID(ids["db-2"])+")")
	defragAt := slices.Index(calls, "Defragment(db-1)")
	if moveAt < 0 || defragAt < moveAt || f.Leader() == ids["db-1"] {
		t.Fatalf("leadership was not handed away before db-1 was defragmented: %v, leader %x", calls, f.Leader())
	}
}

func TestMemberRefusesWhatWouldCostTheQuorum(t *testing.T) {
	f, ids, names := memberFake()
	f.SetDown(ids["db-3"], true)
	for member, reason := range map[string]string{"db-2": etcdv1.ReasonWouldLoseQuorum, "db-3": etcdv1.ReasonMemberUnhealthy} {
		if _, err := Member(context.Background(), f, names, self, member); err == nil || !strings.Contains(err.Error(), reason) {
			t.Errorf("Member(%s) with db-3 down = %v; want a refusal %s", member, err, reason)
		}
	}
	// A voter the caller cannot reach counts as unhealthy too.
	f.SetDown(ids["db-3"], false)
	if _, err := Member(context.Background(), f, names[:2], self, "db-2"); err == nil || !strings.Contains(err.Error(), etcdv1.ReasonWouldLoseQuorum) {
		t.Errorf("Member(db-2) with db-3 out of reach = %v; want %s", err, etcdv1.ReasonWouldLoseQuorum)
	}
	if n := len(f.CallsTo("Defragment")); n != 0 {
		t.Fatalf("%d members defragmented below the quorum: %v", n, f.Calls())
	}
}

// staleLeader is a cluster whose members go on naming the old leader in their status for a
// few answers after leadership moved, as a member that has not heard of the election yet.
type staleLeader struct {
	*etcdfake.Cluster
	old   uint64
	stale int
}

func (s *staleLeader) MoveLeader(ctx context.Context, to uint64) error {
	s.old = s.Leader()
	return s.Cluster.MoveLeader(ctx, to)
}

func (s *staleLeader) Status(ctx context.Context, endpoint string) (etcd.Status, error) {
	st, err := s.Cluster.Status(ctx, endpoint)
	if s.old != 0 && s.stale > 0 {
		s.stale--
		st.Leader = s.old
	}
	return st, err
}

func TestMemberWaitsUntilTheMembersNameTheNewLeader(t *testing.T) {
	f, ids, names := memberFake()
	cli := &staleLeader{Cluster: f, stale: 4}
	moved, err := Member(context.Background(), cli, names, self, "db-1")
	if err != nil || !moved {
		t.Fatalf("Member(db-1) = moved %t, %v", moved, err)
	}
	if got := f.CallsTo("MoveLeader"); len(got) != 1 || f.Leader() == ids["db-1"] {
		t.Fatalf("MoveLeader calls %v, leader %x: leadership should move once", got, f.Leader())
	}
	if got := f.CallsTo("Defragment"); !slices.Equal(got, []string{"Defragment(db-1)"}) {
		t.Fatalf("Defragment calls %v", got)
	}
}
