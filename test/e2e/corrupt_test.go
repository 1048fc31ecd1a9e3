package e2e

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

// TestCorruptMemberIsReplaced raises a CORRUPT alarm on one member of three through etcd's
// maintenance API (etcd takes an alarm activation from any client, as from its own
// corruption check), with a writer running. While CORRUPT is raised etcd refuses every write
// of the cluster. The Alarm condition and an event name the member; the alarm is never
// disarmed while etcd lists the member; the member is replaced (new ID, same cluster ID);
// once it is out of etcd its alarm is gone and writes are acknowledged again; no acknowledged
// write is lost.
func TestCorruptMemberIsReplaced(t *testing.T) {
	t.Parallel()
	ns, before, w := loadedCluster(t, "corrupt", 3)
	victim := before.Status.Members[1]
	id, err := strconv.ParseUint(victim.ID, 16, 64)
	if err != nil {
		t.Fatal(err)
	}
	cli := dialClusterWith(t, ns, "corrupt", access{})
	conds := watchCondition(t, ns, "corrupt", etcdv1.ConditionAlarm)
	guard := guardAlarm(cli, id)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	_, err = pb.NewMaintenanceClient(cli.ActiveConnection()).Alarm(ctx,
		&pb.AlarmRequest{Action: pb.AlarmRequest_ACTIVATE, MemberID: id, Alarm: pb.AlarmType_CORRUPT})
	cancel()
	if err != nil {
		t.Fatalf("raising CORRUPT on %s: %v", victim.Name, err)
	}
	acked := w.acknowledged()
	waitReplaced(t, ns, "corrupt", before, victim)
	eventually(t, time.Minute, "no alarm left, and the Alarm condition cleared", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := cli.AlarmList(ctx)
		if err != nil {
			return err
		}
		if len(resp.Alarms) > 0 {
			return fmt.Errorf("alarms %v", resp.Alarms)
		}
		cond := meta.FindStatusCondition(getCluster(t, ns, "corrupt").Status.Conditions, etcdv1.ConditionAlarm)
		if cond == nil || cond.Status != metav1.ConditionFalse {
			return fmt.Errorf("Alarm condition %+v", cond)
		}
		return nil
	})
	guard.finish(t)
	raised := "CORRUPT raised by " + victim.Name
	if !slices.ContainsFunc(conds(t), func(c metav1.Condition) bool {
		return c.Status == metav1.ConditionTrue && c.Reason == "Corrupt" && strings.HasPrefix(c.Message, raised)
	}) {
		t.Errorf("the Alarm condition never said %q: %+v", raised, conds(t))
	}
	for _, e := range []struct{ reason, note string }{
		{"AlarmRaised", raised}, {"MemberReplacing", victim.Name}, {"RemovedMemberAlarmDisarmed", "disarmed CORRUPT of member " + victim.ID},
		{"AlarmCleared", "no alarm"},
	} {
		if !eventAbout(t, ns, e.reason, e.note) {
			t.Errorf("no %s event saying %q: %v", e.reason, e.note, eventReasons(t, ns))
		}
	}
	// The writer's puts failed while CORRUPT was raised: they must be acknowledged again.
	eventually(t, time.Minute, "writes acknowledged again", func() error {
		if n := w.acknowledged(); n <= acked+5 {
			return fmt.Errorf("%d writes acknowledged, %d when CORRUPT was raised", n, acked)
		}
		return nil
	})
	w.stopAndVerify(t, 10)
}

// alarmGuard checks, until finished, that etcd lists the victim's CORRUPT alarm whenever it
// lists the victim. The alarms are read before the members: an alarm read missing while the
// member list read after it still has the member was disarmed while the member remained.
type alarmGuard struct {
	stop context.CancelFunc
	done chan struct{}

	mu        sync.Mutex
	seen      bool // the alarm was listed once
	violation string
}

func guardAlarm(cli *clientv3.Client, id uint64) *alarmGuard {
	ctx, cancel := context.WithCancel(context.Background())
	g := &alarmGuard{stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(g.done)
		for ctx.Err() == nil {
			g.look(ctx, cli, id)
			time.Sleep(200 * time.Millisecond)
		}
	}()
	return g
}

func (g *alarmGuard) look(ctx context.Context, cli *clientv3.Client, id uint64) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	alarms, err := cli.AlarmList(ctx)
	if err != nil {
		return
	}
	members, err := cli.MemberList(ctx)
	if err != nil {
		return
	}
	raised := slices.ContainsFunc(alarms.Alarms, func(a *pb.AlarmMember) bool {
		return a.MemberID == id && a.Alarm == pb.AlarmType_CORRUPT
	})
	listed := slices.ContainsFunc(members.Members, func(m *pb.Member) bool { return m.ID == id })
	g.mu.Lock()
	defer g.mu.Unlock()
	g.seen = g.seen || raised
	if g.seen && listed && !raised && g.violation == "" {
		g.violation = fmt.Sprintf("CORRUPT of member %x disarmed while etcd still listed it: alarms %v", id, alarms.Alarms)
	}
}

func (g *alarmGuard) finish(t *testing.T) {
	t.Helper()
	g.stop()
	<-g.done
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.seen {
		t.Fatal("the CORRUPT alarm was never seen listed")
	}
	if g.violation != "" {
		t.Fatal(g.violation)
	}
}

// watchCondition follows the cluster through a watch and keeps every version of one of its
// conditions, so that a condition that holds for less than a poll's interval is seen too. The
// returned function gives what was seen so far.
func watchCondition(t *testing.T, ns, name, condType string) func(*testing.T) []metav1.Condition {
	t.Helper()
	wc, err := client.NewWithWatch(restConfig, client.Options{Scheme: k8s.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := wc.Watch(ctx, &etcdv1.EtcdClusterList{}, client.InNamespace(ns), client.MatchingFields{"metadata.name": name})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu     sync.Mutex
		seen   []metav1.Condition
		broken error
	)
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			c, ok := ev.Object.(*etcdv1.EtcdCluster)
			mu.Lock()
			if !ok {
				if ctx.Err() == nil {
					broken = fmt.Errorf("watch ended with %s %v", ev.Type, ev.Object)
				}
				mu.Unlock()
				return
			}
			if cond := meta.FindStatusCondition(c.Status.Conditions, condType); cond != nil &&
				(len(seen) == 0 || seen[len(seen)-1].Message != cond.Message || seen[len(seen)-1].Status != cond.Status) {
				seen = append(seen, *cond)
			}
			mu.Unlock()
		}
	}()
	return func(t *testing.T) []metav1.Condition {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		if broken != nil {
			t.Fatalf("following %s/%s: %v", ns, name, broken)
		}
		return slices.Clone(seen)
	}
}
