package e2e

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/test/robustness"
)

// leaderPollEvery is how often the leader tracker asks etcd who leads: well below the time
// an operator takes between two members (a Pod restart, a defragmentation), so the leader
// when the operator chose the next member is known.
const leaderPollEvery = 200 * time.Millisecond

// leaderTracker asks a cluster's members every leaderPollEvery who leads, and keeps every
// change (robustness.Leaders).
type leaderTracker struct {
	stop context.CancelFunc
	done chan struct{}

	mu      sync.Mutex
	leaders robustness.Leaders
}

// trackLeader starts following the cluster's leader and returns once it is known.
func trackLeader(t *testing.T, ns, cluster string) *leaderTracker {
	t.Helper()
	return trackLeaderWith(t, ns, cluster, access{})
}

// trackLeaderWith is trackLeader of a cluster reached with a (TLS, auth).
func trackLeaderWith(t *testing.T, ns, cluster string, a access) *leaderTracker {
	t.Helper()
	cli := dialClusterWith(t, ns, cluster, a)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	lt := &leaderTracker{stop: cancel, done: make(chan struct{})}
	go lt.follow(ctx, cli, ns, cluster, a)
	eventually(t, time.Minute, "etcd naming the leader of "+cluster, func() error {
		lt.mu.Lock()
		defer lt.mu.Unlock()
		if len(lt.leaders) == 0 {
			return fmt.Errorf("no member has named a leader yet")
		}
		return nil
	})
	return lt
}

func (lt *leaderTracker) follow(ctx context.Context, cli *clientv3.Client, ns, cluster string, a access) {
	defer close(lt.done)
	tick := time.NewTicker(leaderPollEvery)
	defer tick.Stop()
	for {
		if leader, term, ok := askLeader(ctx, cli, ns, cluster, a); ok {
			lt.mu.Lock()
			if n := len(lt.leaders); n == 0 || lt.leaders[n-1].Leader != leader || lt.leaders[n-1].Term != term {
				lt.leaders = append(lt.leaders, robustness.LeaderSample{At: time.Now(), Leader: leader, Term: term})
			}
			lt.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// askLeader asks every member the client Service lists for its status and believes the one
// in the newest raft term that names a leader: a member that has not heard of an election
// yet still names the old leader.
func askLeader(ctx context.Context, cli *clientv3.Client, ns, cluster string, a access) (leader, term uint64, ok bool) {
	lookup, cancel := context.WithTimeout(ctx, time.Second)
	endpoints, err := clientServiceEndpoints(lookup, ns, cluster, a)
	cancel()
	if err != nil {
		return 0, 0, false
	}
	for _, ep := range endpoints {
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		st, err := cli.Status(sctx, ep)
		cancel()
		if err == nil && st.Leader != 0 && st.RaftTerm >= term {
			leader, term, ok = st.Leader, st.RaftTerm, true
		}
	}
	return leader, term, ok
}

// finish stops following and returns the leadership seen.
func (lt *leaderTracker) finish() robustness.Leaders {
	lt.stop()
	<-lt.done
	lt.mu.Lock()
	defer lt.mu.Unlock()
	return append(robustness.Leaders(nil), lt.leaders...)
}

// etcdIDs maps the cluster's member names to their etcd member IDs, as its status lists them.
func etcdIDs(t *testing.T, c *etcdv1.EtcdCluster) map[string]uint64 {
	t.Helper()
	ids := map[string]uint64{}
	for name, hex := range memberIDs(c) {
		id, err := strconv.ParseUint(hex, 16, 64)
		if err != nil {
			t.Fatalf("member %s has ID %q: %v", name, hex, err)
		}
		ids[name] = id
	}
	return ids
}

// rollWatch follows a roll through the members of a settled cluster, from the moment it is
// made: their Pods through a watch (podTracker) and etcd's leader (leaderTracker).
type rollWatch struct {
	pods    *podTracker
	leaders *leaderTracker
	ids     map[string]uint64
	start   time.Time
}

// watchRoll starts following the members of before, which must all be up; the roll is to be
// asked for right after.
func watchRoll(t *testing.T, ns, cluster string, before *etcdv1.EtcdCluster) *rollWatch {
	t.Helper()
	return watchRollWith(t, ns, cluster, before, access{})
}

// watchRollWith is watchRoll of a cluster reached with a (TLS, auth).
func watchRollWith(t *testing.T, ns, cluster string, before *etcdv1.EtcdCluster, a access) *rollWatch {
	t.Helper()
	var names []string
	for _, m := range before.Status.Members {
		names = append(names, m.Name)
	}
	rw := &rollWatch{leaders: trackLeaderWith(t, ns, cluster, a), ids: etcdIDs(t, before)}
	rw.pods = trackMemberPods(t, ns, cluster, names)
	rw.start = time.Now()
	return rw
}

// check stops following and fails the test unless the roll restarted one member at a time,
// each member's Pod replaced exactly once, and the leader last (robustness.LeaderLast: no
// member restarted while it led, but the last). It returns how many puts the roll explains
// failing: one per restart, the put in flight on the member that stops (the writer has one in
// flight at a time, and the stopped member leaves the Service before the next), and one per
// election, the put in flight when leadership moves (taken before the leader restarts) or is
// taken. More failures mean the cluster stopped serving writes for longer than that.
func (rw *rollWatch) check(t *testing.T, what string) int {
	t.Helper()
	restarts := rw.pods.finish(t)
	leaders := rw.leaders.finish()
	if restarts.MostAtOnce != 1 {
		t.Errorf("%d members were restarting at once during the %s; want 1 (one member at a time)", restarts.MostAtOnce, what)
	}
	for m := range rw.ids {
		if restarts.Replaced[m] != 1 {
			t.Errorf("member Pods were replaced %v times during the %s; want once each", restarts.Replaced, what)
			break
		}
	}
	if err := robustness.LeaderLast(restarts.Order, rw.start, leaders, rw.ids); err != nil {
		t.Errorf("%s: %v (restarts %+v, leaders %+v)", what, err, restarts.Order, leaders)
	}
	t.Logf("%s: restarts in order %+v; leadership %+v", what, restarts.Order, leaders)
	return len(restarts.Order) + leaders.Elections()
}
