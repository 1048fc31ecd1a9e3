package etcdsim

import (
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// serveSim serves s on a loopback listener for the test's duration and returns its address.
func serveSim(t *testing.T, s *Sim) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := s.Server()
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)
	return lis.Addr().String()
}

// dial is a real clientv3 client for the given endpoints, every connection going to addr.
func dial(t *testing.T, addr string, endpoints ...string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: endpoints, DialTimeout: 2 * time.Second, DialOptions: DialOptions(addr), Logger: zap.NewNop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// etcdCluster names members as the operator does: db-N.db.<namespace>.svc.
func etcdCluster(namespace string) *etcdv1.EtcdCluster {
	return &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: namespace}}
}

func membersOf(c *etcdv1.EtcdCluster, names ...string) []Member {
	out := make([]Member, 0, len(names))
	for _, n := range names {
		out = append(out, Member{Name: n, PeerURLs: []string{specs.PeerURL(c, n)}, ClientURLs: []string{specs.ClientURL(c, n)}})
	}
	return out
}

func bootstrap(t *testing.T, s *Sim, namespace string) (uint64, []Member) {
	t.Helper()
	members := membersOf(etcdCluster(namespace), "db-0", "db-1", "db-2")
	id, err := s.Bootstrap("tok-"+namespace, members)
	if err != nil {
		t.Fatal(err)
	}
	return id, members
}

// expectUnavailable asks for Status with plain gRPC, which does not retry as clientv3 does,
// and wants the code of a member that is not there.
func expectUnavailable(t *testing.T, addr, authority string) {
	t.Helper()
	_, err := pb.NewMaintenanceClient(grpcConn(t, addr, authority)).Status(ctx(t), &pb.StatusRequest{})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("status at %s: %v; want code Unavailable", authority, err)
	}
}

// grpcConn reaches the member at authority through the simulator's listener addr, with no
// retries of its own.
func grpcConn(t *testing.T, addr, authority string) *grpc.ClientConn {
	t.Helper()
	conn, err := Conn(addr, authority)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	t.Cleanup(cancel)
	return c
}

func memberList(t *testing.T, cli *clientv3.Client) *clientv3.MemberListResponse {
	t.Helper()
	resp, err := cli.MemberList(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// addJoiner adds member db-3 of the namespace's cluster as a learner.
func addJoiner(t *testing.T, cli *clientv3.Client, namespace string) (Member, *clientv3.MemberAddResponse) {
	t.Helper()
	joiner := membersOf(etcdCluster(namespace), "db-3")[0]
	added, err := cli.MemberAddAsLearner(ctx(t), joiner.PeerURLs)
	if err != nil {
		t.Fatal(err)
	}
	return joiner, added
}

func expectErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: got %v, want %v", what, err, want)
	}
}

// etcd's single-node default (--name default, peer http://localhost:2380, token etcd-cluster)
// has these IDs: the simulator computes IDs as etcd does.
func TestIDsAreEtcds(t *testing.T) {
	s := New(Options{})
	id, err := s.Bootstrap("etcd-cluster", []Member{{Name: "default", PeerURLs: []string{"http://localhost:2380"}, ClientURLs: []string{"http://localhost:2379"}}})
	if err != nil {
		t.Fatal(err)
	}
	cid, mid, ok := s.Lookup("localhost:2379")
	if id != 0xcdf818194e3a8c32 || cid != id || mid != 0x8e9e05c52164694d || !ok {
		t.Fatalf("cluster %x, member %x (found %t); want cdf818194e3a8c32, 8e9e05c52164694d", cid, mid, ok)
	}
}

func TestMemberListOfBootstrappedCluster(t *testing.T) {
	s := New(Options{})
	id, members := bootstrap(t, s, "ns")
	cli := dial(t, serveSim(t, s), members[1].ClientURLs[0])
	resp := memberList(t, cli)
	_, db1, _ := s.Lookup("db-1.db.ns.svc:2379")
	if resp.Header.ClusterId != id || resp.Header.MemberId != db1 || len(resp.Members) != 3 {
		t.Fatalf("header %+v, %d members; want cluster %x, member %x (db-1), 3 members", resp.Header, len(resp.Members), id, db1)
	}
	if !slices.IsSortedFunc(resp.Members, func(a, b *pb.Member) int { return compare(a.ID, b.ID) }) {
		t.Errorf("members not sorted by ID, as etcd lists them: %v", resp.Members)
	}
	for _, want := range members {
		i := slices.IndexFunc(resp.Members, func(m *pb.Member) bool { return m.Name == want.Name })
		if i < 0 || resp.Members[i].IsLearner || !slices.Equal(resp.Members[i].PeerURLs, want.PeerURLs) || !slices.Equal(resp.Members[i].ClientURLs, want.ClientURLs) {
			t.Errorf("member %s: got %v; want a voter with %v", want.Name, resp.Members, want)
		}
	}
}

func compare(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// A learner is added unstarted, refuses promotion until its process runs, then is promoted
// and removed; errors are etcd's.
func TestLearnerAddPromoteRemove(t *testing.T) {
	s := New(Options{ManualStart: true})
	_, members := bootstrap(t, s, "ns")
	addr := serveSim(t, s)
	cli := dial(t, addr, members[0].ClientURLs[0])
	joiner, added := addJoiner(t, cli, "ns")
	if m := added.Member; !m.IsLearner || m.Name != "" || len(m.ClientURLs) != 0 || len(added.Members) != 4 {
		t.Fatalf("added %+v of %d members; want an unstarted learner of 4", m, len(added.Members))
	}
	_, err := cli.MemberAddAsLearner(ctx(t), []string{"http://db-4.db.ns.svc:2380"})
	expectErr(t, "second learner", err, rpctypes.ErrTooManyLearners)
	_, err = cli.MemberAddAsLearner(ctx(t), members[2].PeerURLs)
	expectErr(t, "a member's peer URL", err, rpctypes.ErrPeerURLExist)
	_, err = cli.MemberPromote(ctx(t), added.Member.ID)
	expectErr(t, "promote unstarted learner", err, rpctypes.ErrMemberLearnerNotReady)

	if _, _, err := s.StartProcess(Boot{Member: joiner, Token: "tok-ns"}); err != nil {
		t.Fatal(err)
	}
	learner := dial(t, addr, joiner.ClientURLs[0])
	if st, err := learner.Status(ctx(t), joiner.ClientURLs[0]); err != nil || !st.IsLearner || st.Header.MemberId != added.Member.ID {
		t.Fatalf("learner status %+v, %v; want learner %x", st, err, added.Member.ID)
	}
	_, err = learner.MemberList(ctx(t))
	expectErr(t, "member list on a learner", err, rpctypes.Error(rpctypes.ErrGRPCNotSupportedForLearner))
	_, err = learner.Defragment(ctx(t), joiner.ClientURLs[0])
	expectErr(t, "defragment on a learner", err, rpctypes.Error(rpctypes.ErrGRPCNotSupportedForLearner))

	if _, err := cli.MemberPromote(ctx(t), added.Member.ID); err != nil {
		t.Fatal(err)
	}
	_, err = cli.MemberPromote(ctx(t), added.Member.ID)
	expectErr(t, "promote a voter", err, rpctypes.ErrMemberNotLearner)
	if _, err := cli.MemberRemove(ctx(t), added.Member.ID); err != nil {
		t.Fatal(err)
	}
	_, err = cli.MemberRemove(ctx(t), added.Member.ID)
	expectErr(t, "second remove", err, rpctypes.ErrMemberNotFound)
	_, err = cli.MemberRemove(ctx(t), 0xdeadbeef)
	expectErr(t, "remove unknown ID", err, rpctypes.ErrMemberNotFound)
	if resp := memberList(t, cli); len(resp.Members) != 3 {
		t.Fatalf("after remove: %v; want the 3 founding members", resp.Members)
	}
	expectUnavailable(t, addr, "db-3.db.ns.svc:2379")
}

// By default a learner starts at once, with the name and client URL its Pod would have.
func TestAddedLearnerStartsByDefault(t *testing.T) {
	s := New(Options{})
	_, members := bootstrap(t, s, "ns")
	cli := dial(t, serveSim(t, s), members[0].ClientURLs[0])
	joiner, added := addJoiner(t, cli, "ns")
	if added.Member.Name != "" {
		t.Errorf("MemberAdd answered %+v; etcd answers before the learner starts", added.Member)
	}
	resp := memberList(t, cli)
	i := slices.IndexFunc(resp.Members, func(m *pb.Member) bool { return m.ID == added.Member.ID })
	if i < 0 || resp.Members[i].Name != joiner.Name || !slices.Equal(resp.Members[i].ClientURLs, joiner.ClientURLs) {
		t.Fatalf("members %v; want %s started as %v", resp.Members, joiner.Name, joiner.ClientURLs)
	}
	if _, err := cli.MemberPromote(ctx(t), added.Member.ID); err != nil {
		t.Fatal(err)
	}
}

func TestClustersApartByAuthority(t *testing.T) {
	s := New(Options{})
	idA, a := bootstrap(t, s, "a")
	idB, b := bootstrap(t, s, "b")
	addr := serveSim(t, s)
	cliA, cliB := dial(t, addr, a[0].ClientURLs[0]), dial(t, addr, b[2].ClientURLs[0])
	addJoiner(t, cliA, "a")
	if ra := memberList(t, cliA); ra.Header.ClusterId != idA || len(ra.Members) != 4 {
		t.Errorf("cluster a: %v; want cluster %x with 4 members", ra, idA)
	}
	if rb := memberList(t, cliB); rb.Header.ClusterId != idB || len(rb.Members) != 3 || idA == idB {
		t.Errorf("cluster b: %v; want cluster %x (not %x) with 3 members", rb, idB, idA)
	}
	expectUnavailable(t, addr, "db-0.db.c.svc:2379")
}

func TestStatusOfEachMember(t *testing.T) {
	s := New(Options{})
	id, members := bootstrap(t, s, "ns")
	cli := dial(t, serveSim(t, s), members[0].ClientURLs[0])
	var leaders []uint64
	for _, m := range members {
		st, err := cli.Status(ctx(t), m.ClientURLs[0])
		if err != nil {
			t.Fatal(err)
		}
		_, mid, _ := s.Lookup(m.PeerURLs[0][len("http://"):])
		if st.Header.ClusterId != id || st.Header.MemberId != mid || st.Version != Version || st.DbSize == 0 || st.RaftTerm == 0 || st.Header.Revision == 0 || st.IsLearner {
			t.Errorf("status of %s = %+v; want cluster %x, member %x, version %s, a db size, term, revision", m.Name, st, id, mid, Version)
		}
		leaders = append(leaders, st.Leader)
	}
	if distinct := slices.Compact(slices.Clone(leaders)); leaders[0] == 0 || len(distinct) != 1 {
		t.Errorf("leaders %x; want one leader all members agree on", leaders)
	}
}

// The leader is a running voter, a quorum is needed for one, and MoveLeader is the leader's.
func TestLeaderFollowsProcesses(t *testing.T) {
	s := New(Options{})
	_, members := bootstrap(t, s, "ns")
	addr := serveSim(t, s)
	cli := dial(t, addr, members[0].ClientURLs[0], members[1].ClientURLs[0], members[2].ClientURLs[0])
	leaderOf := func(endpoint string) (uint64, uint64) {
		st, err := cli.Status(ctx(t), endpoint)
		if err != nil {
			t.Fatal(err)
		}
		return st.Leader, st.Header.MemberId
	}
	leader, _ := leaderOf(members[0].ClientURLs[0])
	var follower, followerEndpoint, leaderEndpoint string
	var followerID uint64
	for _, m := range members {
		if l, self := leaderOf(m.ClientURLs[0]); l == self {
			leaderEndpoint = m.ClientURLs[0]
		} else {
			follower, followerEndpoint, followerID = m.PeerURLs[0], m.ClientURLs[0], self
		}
	}
	one := dial(t, addr, followerEndpoint)
	_, err := one.MoveLeader(ctx(t), followerID)
	expectErr(t, "move leader on a follower", err, rpctypes.ErrNotLeader)
	lead := dial(t, addr, leaderEndpoint)
	if _, err := lead.MoveLeader(ctx(t), followerID); err != nil {
		t.Fatal(err)
	}
	if now, _ := leaderOf(followerEndpoint); now != followerID || now == leader {
		t.Fatalf("leader %x after moving it to %x", now, followerID)
	}

	s.StopProcess(follower) // the new leader stops: another voter leads
	others := slices.DeleteFunc(slices.Clone(members), func(m Member) bool { return m.PeerURLs[0] == follower })
	if now, _ := leaderOf(others[0].ClientURLs[0]); now == 0 || now == followerID {
		t.Fatalf("leader %x after the leader %x stopped; want another", now, followerID)
	}
	s.StopProcess(others[1].PeerURLs[0]) // one of three runs: no quorum, no leader
	if now, _ := leaderOf(others[0].ClientURLs[0]); now != 0 {
		t.Fatalf("leader %x with one voter of three running", now)
	}
	// Asked over plain gRPC: clientv3 retries "no leader" until its deadline, and which of
	// the two errors it then returns is a matter of timing.
	conn := grpcConn(t, addr, strings.TrimPrefix(others[0].ClientURLs[0], "http://"))
	_, err = pb.NewClusterClient(conn).MemberList(ctx(t), &pb.MemberListRequest{})
	expectErr(t, "member list without a leader", rpctypes.Error(err), rpctypes.ErrNoLeader)
}

// Remove keeps a quorum of started voters (etcd's strict reconfiguration check).
func TestRemoveLastVoter(t *testing.T) {
	s := New(Options{})
	members := membersOf(etcdCluster("ns"), "db-0")
	if _, err := s.Bootstrap("tok", members); err != nil {
		t.Fatal(err)
	}
	cli := dial(t, serveSim(t, s), members[0].ClientURLs[0])
	_, self, _ := s.Lookup("db-0.db.ns.svc:2379")
	_, err := cli.MemberRemove(ctx(t), self)
	expectErr(t, "remove the only voter", err, rpctypes.ErrMemberNotEnoughStarted)
}

// A founding member of a new cluster creates it or finds it; a joining member must have been
// added; flags are read as specs.EtcdArgs writes them.
func TestStartProcessFromPodFlags(t *testing.T) {
	c := etcdCluster("ns")
	names := []string{"db-0", "db-1", "db-2"}
	s := New(Options{})
	var ids []uint64
	for _, name := range names {
		m := &etcdv1.EtcdMember{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: etcdv1.EtcdMemberSpec{Bootstrap: etcdv1.MemberBootstrap{
			InitialClusterState: etcdv1.InitialClusterStateNew, ClusterToken: "tok",
		}}}
		boot, err := ParseArgs(specs.EtcdArgs(c, m), specs.InitialCluster(c, names))
		if err != nil {
			t.Fatal(err)
		}
		id, _, err := s.StartProcess(boot)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	want, err := New(Options{}).Bootstrap("tok", membersOf(c, names...))
	if err != nil || s.Clusters() != 1 || len(slices.Compact(ids)) != 1 || ids[0] != want {
		t.Fatalf("clusters %d, IDs %x; want one cluster, %x as Bootstrap makes it (%v)", s.Clusters(), ids, want, err)
	}
	joiner := membersOf(c, "db-3")[0]
	if _, _, err := s.StartProcess(Boot{Member: joiner, Token: "tok"}); err == nil {
		t.Fatal("a member never added started in an existing cluster")
	}
	s.DeleteCluster(want)
	if _, _, ok := s.Lookup("db-0.db.ns.svc:2379"); ok || s.Clusters() != 0 {
		t.Fatal("a deleted cluster's member is still found")
	}
}

func TestParseArgsReadsInitialClusterWithSeveralURLs(t *testing.T) {
	b, err := ParseArgs([]string{"--name=a", "--initial-advertise-peer-urls=http://a:2380", "--initial-cluster-state=existing"},
		"a=http://a:2380,a=http://a2:2380,b=http://b:2380")
	if err != nil {
		t.Fatal(err)
	}
	if b.New || b.Name != "a" || len(b.InitialCluster) != 2 || len(b.InitialCluster[0].PeerURLs) != 2 {
		t.Fatalf("boot %+v", b)
	}
}
