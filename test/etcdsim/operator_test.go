package etcdsim

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"testing"

	"google.golang.org/grpc"

	"github.com/quorumkeeper/etcd-operator/internal/etcd"
)

// serveLoopback serves s on 127.0.0.1 to 127.0.0.n, one port: the operator's client takes
// no dial options, so its members must be told apart by address, and Linux routes all of
// 127/8 to the loopback. It returns the members' client URLs; opts are the server's.
func serveLoopback(t *testing.T, s *Sim, n int, opts ...grpc.ServerOption) []string {
	t.Helper()
	first, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := first.Addr().(*net.TCPAddr).Port
	g := s.Server(opts...)
	t.Cleanup(g.Stop)
	urls := []string{fmt.Sprintf("http://127.0.0.1:%d", port)}
	go func() { _ = g.Serve(first) }()
	for i := 2; i <= n; i++ {
		lis, err := net.Listen("tcp", fmt.Sprintf("127.0.0.%d:%d", i, port))
		if err != nil {
			t.Fatalf("listening on 127.0.0.%d (Linux routes all of 127/8 to the loopback): %v", i, err)
		}
		go func() { _ = g.Serve(lis) }()
		urls = append(urls, fmt.Sprintf("http://127.0.0.%d:%d", i, port))
	}
	return urls
}

func loopbackMember(i int, clientURL string) Member {
	return Member{Name: fmt.Sprintf("m%d", i), PeerURLs: []string{fmt.Sprintf("http://127.0.0.%d:2380", i+1)}, ClientURLs: []string{clientURL}}
}

// The operator's own client (internal/etcd) works against the simulator: the calls a
// scale-out, a scale-in and the cluster's observation make, with the sentinels it branches on.
func TestOperatorClient(t *testing.T) {
	s := New(Options{ManualStart: true})
	urls := serveLoopback(t, s, 4)
	founders := []Member{loopbackMember(0, urls[0]), loopbackMember(1, urls[1]), loopbackMember(2, urls[2])}
	clusterID, err := s.Bootstrap("tok", founders)
	if err != nil {
		t.Fatal(err)
	}
	cli, err := etcd.New(etcd.Config{Endpoints: urls[:3]})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })

	gotID, members, err := cli.MemberList(ctx(t))
	if err != nil || gotID != clusterID || len(members) != 3 {
		t.Fatalf("MemberList: %x, %+v, %v; want cluster %x with 3 members", gotID, members, err, clusterID)
	}
	checkObservation(t, cli, urls[:3], clusterID)
	learner := scaleOut(t, s, cli, loopbackMember(3, urls[3]))
	if err := cli.MoveLeader(ctx(t), learner); err != nil {
		t.Fatal(err)
	}
	if st, err := cli.Status(ctx(t), urls[0]); err != nil || st.Leader != learner {
		t.Fatalf("leader %x after MoveLeader to %x (%v)", st.Leader, learner, err)
	}
	// The leader goes: another is elected.
	if err := cli.Remove(ctx(t), learner); err != nil {
		t.Fatal(err)
	}
	expectErr(t, "second remove", cli.Remove(ctx(t), learner), etcd.ErrMemberNotFound)
	if _, members, err := cli.MemberList(ctx(t)); err != nil || len(members) != 3 {
		t.Fatalf("after remove: %+v, %v", members, err)
	}
	checkObservation(t, cli, urls[:3], clusterID)
}

// scaleOut adds joiner as a learner, starts it and promotes it, as the operator's scale-out
// does; it returns its ID.
func scaleOut(t *testing.T, s *Sim, cli etcd.Client, joiner Member) uint64 {
	t.Helper()
	added, _, err := cli.AddLearner(ctx(t), joiner.PeerURLs)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = cli.AddLearner(ctx(t), []string{"http://127.0.0.9:2380"})
	expectErr(t, "second learner", err, etcd.ErrTooManyLearners)
	expectErr(t, "promote unstarted", cli.Promote(ctx(t), added.ID, ""), etcd.ErrLearnerNotReady)
	if _, _, err := s.StartProcess(Boot{Member: joiner}); err != nil {
		t.Fatal(err)
	}
	if st, err := cli.Status(ctx(t), joiner.ClientURLs[0]); err != nil || !st.IsLearner {
		t.Fatalf("learner's status %+v, %v", st, err)
	}
	if err := cli.Promote(ctx(t), added.ID, ""); err != nil {
		t.Fatal(err)
	}
	return added.ID
}

// checkObservation makes the calls the operator makes of every member of a settled cluster.
func checkObservation(t *testing.T, cli etcd.Client, endpoints []string, clusterID uint64) {
	t.Helper()
	_, members, err := cli.MemberList(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	isMember := func(id uint64) bool {
		return slices.ContainsFunc(members, func(m etcd.Member) bool { return m.ID == id })
	}
	for _, ep := range endpoints {
		st, err := cli.Status(ctx(t), ep)
		if err != nil || st.ClusterID != clusterID || !isMember(st.MemberID) || !isMember(st.Leader) || st.Version != Version {
			t.Fatalf("Status(%s) = %+v, %v", ep, st, err)
		}
		if err := cli.Healthy(ctx(t), ep); err != nil {
			t.Fatalf("Healthy(%s): %v", ep, err)
		}
	}
	alarms, err := cli.Alarms(ctx(t))
	enabled, authErr := cli.AuthStatus(ctx(t))
	_, compactErr := cli.CompactToCurrent(ctx(t))
	if err := errors.Join(err, authErr, compactErr, cli.Defragment(ctx(t), endpoints[0])); err != nil || len(alarms) != 0 || enabled {
		t.Fatalf("alarms %v, auth enabled %t: %v", alarms, enabled, err)
	}
}
