package etcdfake

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/quorumkeeper/etcd-operator/internal/etcd"
)

// threeVoters returns a cluster of members 1, 2, 3 (leader 1) with an empty call log.
func threeVoters(t *testing.T) *Cluster {
	t.Helper()
	f := New()
	for _, name := range []string{"m0", "m1", "m2"} {
		f.SeedMember(name, "http://"+name+":2380", "http://"+name+":2379")
	}
	if f.Leader() != 1 || len(f.Calls()) != 0 {
		t.Fatalf("seeded cluster: leader %x, calls %v", f.Leader(), f.Calls())
	}
	return f
}

func TestJoinFlowRecordsEachCallOnce(t *testing.T) {
	f := threeVoters(t)
	ctx := t.Context()

	added, members, err := f.AddLearner(ctx, []string{"http://m3:2380"})
	if err != nil {
		t.Fatal(err)
	}
	if added.ID != 4 || !added.IsLearner || added.IsStarted() || len(members) != 4 {
		t.Fatalf("AddLearner = %+v, %d members", added, len(members))
	}
	if err := f.Promote(ctx, added.ID, ""); !errors.Is(err, etcd.ErrLearnerNotReady) {
		t.Fatalf("Promote before caught up: %v", err)
	}
	f.StartMember(added.ID, "m3", "http://m3:2379")
	f.SetCaughtUp(added.ID, true)
	if err := f.Promote(ctx, added.ID, "http://m1:2379"); err != nil {
		t.Fatal(err)
	}
	if err := f.Promote(ctx, added.ID, ""); !errors.Is(err, etcd.ErrMemberNotLearner) {
		t.Fatalf("second Promote: %v", err)
	}

	checkJoined(t, f)
	want := []string{"AddLearner(http://m3:2380)", "Promote(4)", "Promote(4 via http://m1:2379)", "Promote(4)", "MemberList()"}
	if got := f.Calls(); !slices.Equal(got, want) {
		t.Fatalf("Calls() = %q; want %q", got, want)
	}
	if got := f.CallsTo("Promote"); len(got) != 3 {
		t.Fatalf("CallsTo(Promote) = %q", got)
	}
}

// checkJoined expects the 3 seeded voters and m3, promoted and started.
func checkJoined(t *testing.T, f *Cluster) {
	t.Helper()
	id, members, err := f.MemberList(t.Context())
	if err != nil || id != DefaultClusterID {
		t.Fatalf("MemberList: %x, %v", id, err)
	}
	if len(members) != 4 || slices.ContainsFunc(members, func(m etcd.Member) bool { return m.IsLearner }) {
		t.Fatalf("members after promotion: %+v", members)
	}
	if got := members[3]; got.Name != "m3" || !slices.Equal(got.ClientURLs, []string{"http://m3:2379"}) {
		t.Fatalf("joined member = %+v", got)
	}
}

func TestAddLearnerRefusals(t *testing.T) {
	f := threeVoters(t)
	ctx := t.Context()
	if _, _, err := f.AddLearner(ctx, []string{"http://m1:2380"}); !errors.Is(err, etcd.ErrMemberExists) {
		t.Fatalf("AddLearner with a voter's peer URL: %v", err)
	}
	if _, _, err := f.AddLearner(ctx, []string{"http://m3:2380"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.AddLearner(ctx, []string{"http://m4:2380"}); !errors.Is(err, etcd.ErrTooManyLearners) {
		t.Fatalf("second learner with the default limit of 1: %v", err)
	}
	if _, _, err := f.AddLearner(ctx, nil); err == nil {
		t.Fatal("AddLearner without peer URLs succeeded")
	}
	f.SetMaxLearners(2)
	if _, _, err := f.AddLearner(ctx, []string{"http://m4:2380"}); err != nil {
		t.Fatalf("second learner with a limit of 2: %v", err)
	}
	if n := len(f.Members()); n != 5 {
		t.Fatalf("%d members; refused adds must not change membership", n)
	}
}

func TestRemoveIsIdempotentAndMovesLeadership(t *testing.T) {
	f := threeVoters(t)
	ctx := t.Context()
	if err := f.Remove(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if f.Leader() != 2 {
		t.Fatalf("leader after removing leader 1 = %x; want 2", f.Leader())
	}
	if err := f.Remove(ctx, 1); !errors.Is(err, etcd.ErrMemberNotFound) {
		t.Fatalf("second Remove: %v", err)
	}
	if err := f.Promote(ctx, 1, ""); !errors.Is(err, etcd.ErrMemberNotFound) {
		t.Fatalf("Promote of a removed member: %v", err)
	}
	if ids := memberIDs(f.Members()); !slices.Equal(ids, []uint64{2, 3}) {
		t.Fatalf("members = %v", ids)
	}
}

func memberIDs(members []etcd.Member) []uint64 {
	ids := make([]uint64, 0, len(members))
	for _, m := range members {
		ids = append(ids, m.ID)
	}
	return ids
}

func TestFailNextRefusesWithoutEffect(t *testing.T) {
	f := threeVoters(t)
	ctx := t.Context()
	first, second := errors.New("first"), errors.New("second")
	f.FailNext("Remove", first)
	f.FailNext("Remove", second)

	if err := f.Remove(ctx, 3); !errors.Is(err, first) {
		t.Fatalf("first Remove: %v", err)
	}
	if _, _, err := f.MemberList(ctx); err != nil {
		t.Fatalf("an injected Remove error leaked into MemberList: %v", err)
	}
	if err := f.Remove(ctx, 3); !errors.Is(err, second) {
		t.Fatalf("second Remove: %v", err)
	}
	if len(f.Members()) != 3 {
		t.Fatal("a failed Remove removed the member")
	}
	if err := f.Remove(ctx, 3); err != nil {
		t.Fatalf("third Remove, queue used up: %v", err)
	}
	want := []string{"Remove(3)", "MemberList()", "Remove(3)", "Remove(3)"}
	if got := f.Calls(); !slices.Equal(got, want) {
		t.Fatalf("Calls() = %q; want %q", got, want)
	}
}

func TestLoseNextResponseAppliesTheChange(t *testing.T) {
	f := threeVoters(t)
	ctx := t.Context()
	f.LoseNextResponse("AddLearner", context.DeadlineExceeded)
	if _, _, err := f.AddLearner(ctx, []string{"http://m3:2380"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("AddLearner with lost response: %v", err)
	}
	if _, _, err := f.AddLearner(ctx, []string{"http://m3:2380"}); !errors.Is(err, etcd.ErrMemberExists) {
		t.Fatalf("retried AddLearner: %v; want ErrMemberExists since the first one landed", err)
	}
	if n := len(f.Members()); n != 4 {
		t.Fatalf("%d members; want the learner added exactly once", n)
	}
}

func TestFailNextRejectsUnknownMethod(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("FailNext of a misspelt method did not panic")
		}
	}()
	New().FailNext("RemoveMember", errors.New("x"))
}

func TestDownMembersAndQuorum(t *testing.T) {
	f := threeVoters(t)
	ctx := t.Context()
	f.SetDown(1, true)
	if f.Leader() != 2 {
		t.Fatalf("leader after leader went down = %x; want 2", f.Leader())
	}
	if err := f.Healthy(ctx, "http://m0:2379"); !errors.Is(err, ErrUnreachable) {
		t.Fatalf("Healthy of a down member: %v", err)
	}
	if err := f.Healthy(ctx, "http://m1:2379"); err != nil {
		t.Fatalf("Healthy with 2 of 3 up: %v", err)
	}
	if _, err := f.Status(ctx, "http://nowhere:2379"); !errors.Is(err, ErrUnreachable) {
		t.Fatalf("Status of an unknown endpoint: %v", err)
	}

	f.SetDown(2, true)
	if f.Leader() != 0 {
		t.Fatalf("leader with 1 of 3 up = %x; want none", f.Leader())
	}
	if err := f.Healthy(ctx, "http://m2:2379"); !errors.Is(err, ErrNoQuorum) {
		t.Fatalf("Healthy without quorum: %v", err)
	}
	if _, _, err := f.MemberList(ctx); !errors.Is(err, ErrNoQuorum) {
		t.Fatalf("MemberList without quorum: %v", err)
	}

	f.SetDown(1, false)
	st, err := f.Status(ctx, "http://m0:2379")
	if err != nil || st.Leader != 1 || st.MemberID != 1 {
		t.Fatalf("Status after quorum is back = %+v, %v; want leader 1", st, err)
	}
}

func TestStatusMoveLeaderAndDefragment(t *testing.T) {
	f := threeVoters(t)
	ctx := t.Context()
	f.SetDBSize(2, 100<<20, 10<<20)
	st, err := f.Status(ctx, "http://m1:2379")
	if err != nil {
		t.Fatal(err)
	}
	want := etcd.Status{MemberID: 2, ClusterID: DefaultClusterID, Leader: 1, Version: DefaultVersion, DBSize: 100 << 20, DBSizeInUse: 10 << 20}
	if !statusEqual(st, want) {
		t.Fatalf("Status = %+v; want %+v", st, want)
	}
	if err := f.Defragment(ctx, "http://m1:2379"); err != nil {
		t.Fatal(err)
	}
	if st, _ := f.Status(ctx, "http://m1:2379"); st.DBSize != 10<<20 {
		t.Fatalf("DBSize after Defragment = %d", st.DBSize)
	}

	if err := f.MoveLeader(ctx, 3); err != nil || f.Leader() != 3 {
		t.Fatalf("MoveLeader(3): %v, leader %x", err, f.Leader())
	}
	if _, _, err := f.AddLearner(ctx, []string{"http://m3:2380"}); err != nil {
		t.Fatal(err)
	}
	if err := f.MoveLeader(ctx, 4); !errors.Is(err, etcd.ErrBadLeaderTransferee) {
		t.Fatalf("MoveLeader to a learner: %v", err)
	}
	if err := f.MoveLeader(ctx, 99); !errors.Is(err, etcd.ErrBadLeaderTransferee) {
		t.Fatalf("MoveLeader to an unknown member: %v", err)
	}
}

func statusEqual(a, b etcd.Status) bool {
	return a.MemberID == b.MemberID && a.ClusterID == b.ClusterID && a.Leader == b.Leader &&
		a.Version == b.Version && a.DBSize == b.DBSize && a.DBSizeInUse == b.DBSizeInUse &&
		a.IsLearner == b.IsLearner && len(a.Errors) == len(b.Errors)
}

func TestAlarms(t *testing.T) {
	f := threeVoters(t)
	ctx := t.Context()
	noSpace := etcd.Alarm{MemberID: 2, Type: etcd.AlarmNoSpace}
	f.RaiseAlarm(noSpace)
	f.RaiseAlarm(noSpace)
	alarms, err := f.Alarms(ctx)
	if err != nil || !slices.Equal(alarms, []etcd.Alarm{noSpace}) {
		t.Fatalf("Alarms = %+v, %v", alarms, err)
	}
	if err := f.DisarmAlarm(ctx, etcd.Alarm{Type: etcd.AlarmNoSpace}); err == nil {
		t.Fatal("DisarmAlarm without member ID succeeded")
	}
	if err := f.DisarmAlarm(ctx, noSpace); err != nil {
		t.Fatal(err)
	}
	if alarms, _ := f.Alarms(ctx); len(alarms) != 0 {
		t.Fatalf("Alarms after disarm = %+v", alarms)
	}
	if got := f.CallsTo("DisarmAlarm"); !slices.Equal(got, []string{"DisarmAlarm(NOSPACE,0)", "DisarmAlarm(NOSPACE,2)"}) {
		t.Fatalf("DisarmAlarm calls = %q", got)
	}
}

func TestClosedClientAndCanceledContext(t *testing.T) {
	f := threeVoters(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := f.Remove(ctx, 3); !errors.Is(err, context.Canceled) {
		t.Fatalf("Remove with canceled context: %v", err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.MemberList(t.Context()); !errors.Is(err, ErrClosed) {
		t.Fatalf("MemberList after Close: %v", err)
	}
	if len(f.Members()) != 3 {
		t.Fatal("a canceled Remove took effect")
	}
}

func TestConcurrentCallsAreAllRecorded(t *testing.T) {
	f := threeVoters(t)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 25 {
				_, _, _ = f.MemberList(t.Context())
			}
		})
	}
	wg.Wait()
	if n := len(f.CallsTo("MemberList")); n != 200 {
		t.Fatalf("recorded %d MemberList calls; want 200", n)
	}
	f.ResetCalls()
	if len(f.Calls()) != 0 {
		t.Fatal("ResetCalls left calls behind")
	}
}
