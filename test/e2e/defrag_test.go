package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/test/robustness"
)

// createClusterWithQuota is a cluster whose members have a backend quota of quota.
func createClusterWithQuota(t *testing.T, ns, name string, replicas int32, quota string) {
	t.Helper()
	q := resource.MustParse(quota)
	c := &etcdv1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: etcdv1.EtcdClusterSpec{Replicas: &replicas, Version: etcdVersion,
			Options: &etcdv1.EtcdOptions{QuotaBackendBytes: &q}},
	}
	if err := k8s.Create(context.Background(), c); err != nil {
		t.Fatal(err)
	}
}

// rewrite puts a 256 KiB value under key n times or until etcd refuses; it returns the
// refusal.
func rewrite(t *testing.T, cli *clientv3.Client, key string, n int) error {
	t.Helper()
	value := strings.Repeat("v", 256<<10)
	for range n {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := cli.Put(ctx, key, value)
		cancel()
		if err != nil {
			return err
		}
	}
	return nil
}

// runDefrag creates an EtcdDefrag and waits until it finished.
func runDefrag(t *testing.T, ns, name string, spec etcdv1.EtcdDefragSpec) *etcdv1.EtcdDefrag {
	t.Helper()
	d := &etcdv1.EtcdDefrag{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: spec}
	if err := k8s.Create(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	eventually(t, 4*time.Minute, "EtcdDefrag "+name+" finished", func() error {
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(d), d); err != nil {
			return err
		}
		if d.Status.Phase != etcdv1.EtcdDefragPhaseComplete {
			return fmt.Errorf("phase %q, members %+v", d.Status.Phase, d.Status.Members)
		}
		return nil
	})
	return d
}

// outcomes checks that every member of the pass has the outcome and reason, and that the
// pass counts them.
func outcomes(t *testing.T, d *etcdv1.EtcdDefrag, outcome etcdv1.DefragOutcome, reason string) {
	t.Helper()
	if len(d.Status.Members) != 3 || d.Status.StartedAt == nil || d.Status.CompletedAt == nil {
		t.Fatalf("%s: status %+v, want 3 members, startedAt and completedAt", d.Name, d.Status)
	}
	leaders := 0
	for _, m := range d.Status.Members {
		if m.Outcome != outcome || m.Reason != reason || m.FinishedAt == nil {
			t.Errorf("%s: member %s is %s/%s, want %s/%s", d.Name, m.Name, m.Outcome, m.Reason, outcome, reason)
		}
		if m.Role == etcdv1.DefragRoleLeader {
			leaders++
		}
	}
	if leaders != 1 {
		t.Errorf("%s: %d members recorded as leader, want 1: %+v", d.Name, leaders, d.Status.Members)
	}
	want := int32(0)
	if outcome == etcdv1.DefragOutcomeDefragmented {
		want = 3
	}
	if d.Status.Defragmented != want {
		t.Errorf("%s: defragmented %d, want %d", d.Name, d.Status.Defragmented, want)
	}
}

// Cozystack's documented rule shapes against one cluster with about 10 MiB of compacted
// history per member: the default gate skips every member, the guarded rule takes them under
// quota pressure and reclaims space, rule.all takes them all, and ttlSecondsAfterFinished
// deletes the finished pass.
func TestDefragRuleShapes(t *testing.T) {
	t.Parallel()
	ns, w, cli := quotaClusterUnderLoad(t, "frag", "64Mi")
	if err := rewrite(t, cli, "blob", 40); err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Get(context.Background(), "blob", clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Compact(context.Background(), resp.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	waitReclaimableOnEveryMember(t, ns, "frag", 2<<20)
	ref := corev1Ref("frag")

	outcomes(t, runDefrag(t, ns, "default", etcdv1.EtcdDefragSpec{ClusterRef: ref}), etcdv1.DefragOutcomeSkipped, "BelowThreshold")

	guarded := runDefrag(t, ns, "guarded", etcdv1.EtcdDefragSpec{ClusterRef: ref, Rule: &etcdv1.DefragRule{
		FreeSpaceAbove: ptr(resource.MustParse("200Mi")), QuotaUsageAbove: "10%", MinReclaim: ptr(resource.MustParse("1Mi"))}})
	outcomes(t, guarded, etcdv1.DefragOutcomeDefragmented, "RuleMatched")
	for _, m := range guarded.Status.Members {
		if m.ReclaimedBytes < 1<<20 || m.DBSizeAfter >= m.DBSizeBefore {
			t.Errorf("guarded: member %s reclaimed %d bytes (%d -> %d), want at least 1 MiB", m.Name, m.ReclaimedBytes, m.DBSizeBefore, m.DBSizeAfter)
		}
	}

	all := runDefrag(t, ns, "all", etcdv1.EtcdDefragSpec{ClusterRef: ref, Rule: &etcdv1.DefragRule{All: true}, TTLSecondsAfterFinished: ptr(int32(5))})
	outcomes(t, all, etcdv1.DefragOutcomeDefragmented, "RuleMatched")
	eventually(t, time.Minute, "the finished pass deleted after its TTL", func() error {
		err := k8s.Get(context.Background(), client.ObjectKeyFromObject(all), &etcdv1.EtcdDefrag{})
		if client.IgnoreNotFound(err) != nil {
			return err
		}
		if err == nil {
			return fmt.Errorf("EtcdDefrag %s still exists", all.Name)
		}
		return nil
	})
	w.stopAndVerify(t, 20)
}

// A cluster with a 16 MiB quota filled until etcd refuses writes with NOSPACE: the Alarm
// condition and an event say so, the operator compacts, defragments and disarms, and the
// cluster takes writes again with every earlier acknowledged write still there. The events
// are checked rather than the condition while raised: the remediation may clear it between
// two looks.
func TestNoSpaceIsRemediated(t *testing.T) {
	t.Parallel()
	ns, w, cli := quotaClusterUnderLoad(t, "full", "16Mi")
	full := rewrite(t, cli, "filler", 400)
	if full == nil || !strings.Contains(full.Error(), "database space exceeded") {
		t.Fatalf("400 rewrites of 256 KiB did not fill a 16 MiB quota: %v", full)
	}
	eventually(t, 5*time.Minute, "the cluster writable again", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := cli.Put(ctx, "after", "remediation")
		return err
	})
	eventually(t, 3*time.Minute, "the Alarm condition cleared", func() error {
		c := getCluster(t, ns, "full")
		if cond := meta.FindStatusCondition(c.Status.Conditions, etcdv1.ConditionAlarm); cond == nil || cond.Status != metav1.ConditionFalse {
			return fmt.Errorf("Alarm condition %+v", cond)
		}
		return nil
	})
	for _, e := range []struct{ reason, note string }{
		{"AlarmRaised", "NOSPACE raised by"}, {"NoSpaceRemediation", "compacted to revision"},
		{"NoSpaceDisarmed", "disarmed NOSPACE"}, {"AlarmCleared", "no alarm"},
	} {
		if !eventAbout(t, ns, e.reason, e.note) {
			t.Errorf("no %s event saying %q: %v", e.reason, e.note, eventReasons(t, ns))
		}
	}
	w.stopAndVerify(t, 5)
}

// spec.defrag set on a running cluster of 3 with a schedule of every minute: within about
// two minutes the schedule has created an EtcdDefrag, owned by the cluster, that
// defragmented every member (followers first, the leader last: the order its status took
// the outcomes in, against the leader etcd named meanwhile) and recorded each outcome.
func TestScheduledDefrag(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	createCluster(t, ns, "cron", 3)
	before := waitSettled(t, ns, "cron", 3, 4*time.Minute)
	leaders := trackLeader(t, ns, "cron")
	passes := trackDefragPasses(t, ns)
	c := getCluster(t, ns, "cron")
	patch := client.MergeFrom(c.DeepCopy())
	c.Spec.Defrag = &etcdv1.DefragSchedule{Schedule: "* * * * *", Rule: &etcdv1.DefragRule{All: true}}
	if err := k8s.Patch(context.Background(), c, patch); err != nil {
		t.Fatal(err)
	}
	var pass *etcdv1.EtcdDefrag
	eventually(t, 150*time.Second, "a scheduled EtcdDefrag complete", func() error {
		list := &etcdv1.EtcdDefragList{}
		if err := k8s.List(context.Background(), list, client.InNamespace(ns),
			client.MatchingLabels{"etcd-operator.cozystack.io/defrag-schedule": "cron"}); err != nil {
			return err
		}
		for i, d := range list.Items {
			if d.Status.Phase == etcdv1.EtcdDefragPhaseComplete {
				pass = &list.Items[i]
				return nil
			}
		}
		return fmt.Errorf("scheduled passes %d, none complete", len(list.Items))
	})
	outcomes(t, pass, etcdv1.DefragOutcomeDefragmented, "RuleMatched")
	passes.watch.finish(t)
	leaderLastInPass(t, pass, passes, leaders.finish(), etcdIDs(t, before))
	if owner := metav1.GetControllerOf(pass); owner == nil || owner.UID != c.UID {
		t.Errorf("EtcdDefrag %s is owned by %+v, want the cluster", pass.Name, owner)
	}
	if !eventAbout(t, ns, "DefragScheduled", pass.Name) {
		t.Errorf("no DefragScheduled event naming %s: %v", pass.Name, eventReasons(t, ns))
	}
}

// leaderLastInPass fails the test unless the pass took its members' outcomes in an order
// with the leader last (robustness.LeaderLast, from when the pass began running), and the
// member it recorded as leader is the one it took last.
func leaderLastInPass(t *testing.T, pass *etcdv1.EtcdDefrag, passes *defragPasses, leaders robustness.Leaders, ids map[string]uint64) {
	t.Helper()
	turns, began := passes.turns[pass.Name], passes.running[pass.Name]
	if len(turns) != len(pass.Status.Members) || began.IsZero() {
		t.Fatalf("%s: the watch saw it running at %s and the outcomes %+v, want %d", pass.Name, began, turns, len(pass.Status.Members))
	}
	if err := robustness.LeaderLast(turns, began, leaders, ids); err != nil {
		t.Errorf("%s: %v (outcomes in order %+v, leaders %+v)", pass.Name, err, turns, leaders)
	}
	for _, m := range pass.Status.Members {
		if m.Role == etcdv1.DefragRoleLeader && m.Name != turns[len(turns)-1].Member {
			t.Errorf("%s: member %s recorded as leader, but the last outcome was %s's: %+v", pass.Name, m.Name, turns[len(turns)-1].Member, turns)
		}
	}
	t.Logf("%s: outcomes in order %+v; leadership %+v", pass.Name, turns, leaders)
}

// defragPasses follows a namespace's EtcdDefrags through a watch: when each went Running, and
// its members' outcomes in the order its status took them.
type defragPasses struct {
	watch   *changeWatch
	running map[string]time.Time
	turns   map[string][]robustness.Turn
}

func trackDefragPasses(t *testing.T, ns string) *defragPasses {
	t.Helper()
	dp := &defragPasses{running: map[string]time.Time{}, turns: map[string][]robustness.Turn{}}
	none := func(client.ObjectList) error { return nil }
	dp.watch = watchChanges(t, &etcdv1.EtcdDefragList{}, []client.ListOption{client.InNamespace(ns)}, none,
		func(obj client.Object, _ bool, at time.Time) {
			if d, ok := obj.(*etcdv1.EtcdDefrag); ok {
				dp.observe(d, at)
			}
		})
	return dp
}

func (dp *defragPasses) observe(d *etcdv1.EtcdDefrag, at time.Time) {
	if d.Status.Phase == etcdv1.EtcdDefragPhaseRunning && dp.running[d.Name].IsZero() {
		dp.running[d.Name] = at
	}
	for _, m := range d.Status.Members {
		if m.Outcome == etcdv1.DefragOutcomePending || m.Outcome == "" || dp.has(d.Name, m.Name) {
			continue
		}
		dp.turns[d.Name] = append(dp.turns[d.Name], robustness.Turn{Member: m.Name, Done: at})
	}
}

func (dp *defragPasses) has(pass, member string) bool {
	for _, turn := range dp.turns[pass] {
		if turn.Member == member {
			return true
		}
	}
	return false
}

// quotaClusterUnderLoad is a settled cluster of 3 with that backend quota in a new namespace,
// a writer on it, and a client of its own.
func quotaClusterUnderLoad(t *testing.T, name, quota string) (string, *writer, *clientv3.Client) {
	t.Helper()
	ns := namespace(t)
	createClusterWithQuota(t, ns, name, 3, quota)
	waitSettled(t, ns, name, 3, 4*time.Minute)
	return ns, startWriter(t, ns, name, name), dialClusterWith(t, ns, name, access{})
}

// waitReclaimableOnEveryMember waits until each member, asked directly through the headless
// Service, has at least min bytes to reclaim. A write is acknowledged once a majority has it,
// and a follower may apply the history and its compaction seconds later on a loaded machine:
// a pass that looks at it before then rightly finds nothing to reclaim.
func waitReclaimableOnEveryMember(t *testing.T, ns, cluster string, min int64) {
	t.Helper()
	members := dialService(t, ns, cluster, access{})
	eventually(t, 2*time.Minute, fmt.Sprintf("%d bytes reclaimable on every member", min), func() error {
		if n := len(members.Endpoints()); n != 3 {
			return fmt.Errorf("%d member addresses, want 3", n)
		}
		for _, ep := range members.Endpoints() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			st, err := members.Status(ctx, ep)
			cancel()
			if err != nil {
				return err
			}
			if free := st.DbSize - st.DbSizeInUse; free < min {
				return fmt.Errorf("member at %s: %d of %d bytes reclaimable", ep, free, st.DbSize)
			}
		}
		return nil
	})
}

func corev1Ref(name string) corev1.LocalObjectReference {
	return corev1.LocalObjectReference{Name: name}
}
