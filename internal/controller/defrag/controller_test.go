package defrag

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/robfig/cron/v3"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/cronplan"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
	"github.com/quorumkeeper/etcd-operator/internal/etcdfake"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

type passHarness struct {
	t    *testing.T
	api  client.Client
	etcd *etcdfake.Cluster
	r    *Reconciler
	ids  map[string]uint64
}

// newPassHarness is a 3-member cluster "db" whose members have 10Mi to reclaim each, and
// an EtcdDefrag "pass" of it with rule.
func newPassHarness(t *testing.T, rule *etcdv1.DefragRule) *passHarness {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = etcdv1.AddToScheme(scheme)
	c := &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns"}, Spec: etcdv1.EtcdClusterSpec{Version: "3.6.16"}}
	objs := []client.Object{c, &etcdv1.EtcdDefrag{ObjectMeta: metav1.ObjectMeta{Name: "pass", Namespace: "ns"},
		Spec: etcdv1.EtcdDefragSpec{ClusterRef: corev1.LocalObjectReference{Name: "db"}, Rule: rule}}}
	h := &passHarness{t: t, etcd: etcdfake.New(), ids: map[string]uint64{}}
	for _, name := range []string{"db-1", "db-2", "db-3"} {
		objs = append(objs, &etcdv1.EtcdMember{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: specs.MemberLabels("db", name)},
			Spec: etcdv1.EtcdMemberSpec{ClusterName: "db", Version: "3.6.16"}})
		m := h.etcd.SeedMember(name, specs.PeerURL(c, name), specs.ClientURL(c, name))
		h.etcd.SetDBSize(m.ID, 30<<20, 20<<20)
		h.ids[name] = m.ID
	}
	h.api = fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithStatusSubresource(&etcdv1.EtcdDefrag{}, &etcdv1.EtcdDefragPolicy{}).Build()
	h.r = &Reconciler{Client: h.api, NewClient: func(context.Context, *etcdv1.EtcdCluster, []string) (etcd.Client, error) {
		return etcdfake.KeepOpen(h.etcd), nil
	}}
	return h
}

// run reconciles until the pass is finished, at most 20 times.
func (h *passHarness) run() *etcdv1.EtcdDefrag {
	h.t.Helper()
	d := &etcdv1.EtcdDefrag{}
	for range 20 {
		if _, err := h.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "pass"}}); err != nil {
			h.t.Fatal(err)
		}
		if err := h.api.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "pass"}, d); err != nil {
			h.t.Fatal(err)
		}
		if finished(d) {
			return d
		}
	}
	h.t.Fatalf("the pass did not finish: %+v", d.Status)
	return nil
}

func TestPassDefragmentsFollowersThenTheLeaderAfterMovingLeadership(t *testing.T) {
	h := newPassHarness(t, &etcdv1.DefragRule{All: true})
	d := h.run()
	if d.Status.Phase != etcdv1.EtcdDefragPhaseComplete || d.Status.Defragmented != 3 || d.Status.StartedAt == nil || d.Status.CompletedAt == nil {
		t.Fatalf("status %+v, want Complete with 3 defragmented, started and completed", d.Status)
	}
	for _, row := range d.Status.Members {
		checkDefragmentedRow(t, row)
	}
	calls := h.etcd.Calls()
	moved := slices.IndexFunc(calls, func(c string) bool { return c == "MoveLeader("+etcd.FormatID(h.ids["db-2"])+")" })
	leaderDefrag := slices.Index(calls, "Defragment("+specs.ClientURL(&etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns"}}, "db-1")+")")
	if moved < 0 || leaderDefrag < moved {
		t.Fatalf("leadership was not moved away before db-1 was defragmented: %v", calls)
	}
	if got := len(h.etcd.CallsTo("Defragment")); got != 3 {
		t.Fatalf("%d Defragment calls, want 3: %v", got, calls)
	}
}

// checkDefragmentedRow: the member was defragmented, reclaimed 10Mi, and db-1 led.
func checkDefragmentedRow(t *testing.T, row etcdv1.MemberDefragStatus) {
	t.Helper()
	if row.Outcome != etcdv1.DefragOutcomeDefragmented || row.ReclaimedBytes != 10<<20 || row.FinishedAt == nil {
		t.Errorf("member %+v, want Defragmented with 10Mi reclaimed", row)
	}
	if wantRole := etcdv1.DefragRoleFollower; row.Name == "db-1" && row.Role != etcdv1.DefragRoleLeader || row.Name != "db-1" && row.Role != wantRole {
		t.Errorf("member %s has role %s; db-1 led", row.Name, row.Role)
	}
}

func TestPassSkipsWhatWouldCostTheQuorum(t *testing.T) {
	h := newPassHarness(t, &etcdv1.DefragRule{All: true})
	h.etcd.SetDown(h.ids["db-3"], true)
	d := h.run()
	for _, row := range d.Status.Members {
		want := etcdv1.ReasonWouldLoseQuorum
		if row.Name == "db-3" {
			want = etcdv1.ReasonMemberUnhealthy
		}
		if row.Outcome != etcdv1.DefragOutcomeSkipped || row.Reason != want {
			t.Errorf("member %s: %s/%s, want Skipped/%s", row.Name, row.Outcome, row.Reason, want)
		}
	}
	if n := len(h.etcd.CallsTo("Defragment")); n != 0 {
		t.Fatalf("%d members defragmented with one of three down", n)
	}
}

func TestPassWithTheDefaultRuleSkipsSmallDatabases(t *testing.T) {
	h := newPassHarness(t, nil)
	d := h.run()
	if d.Status.Phase != etcdv1.EtcdDefragPhaseComplete || d.Status.Defragmented != 0 {
		t.Fatalf("status %+v, want Complete with none defragmented", d.Status)
	}
	for _, row := range d.Status.Members {
		if row.Outcome != etcdv1.DefragOutcomeSkipped || row.Reason != etcdv1.ReasonBelowThreshold {
			t.Errorf("member %+v, want Skipped/%s", row, etcdv1.ReasonBelowThreshold)
		}
		if wantLeader := row.Name == "db-1"; (row.Role == etcdv1.DefragRoleLeader) != wantLeader {
			t.Errorf("member %s has role %s; only db-1 leads", row.Name, row.Role)
		}
	}
}

func TestDueTimeTakesTheLatestMissedTimeOnce(t *testing.T) {
	sched, err := cron.ParseStandard("0 3 * * *")
	if err != nil {
		t.Fatal(err)
	}
	day := func(d, h int) time.Time { return time.Date(2026, 12, d, h, 0, 0, 0, time.UTC) }
	tests := []struct {
		name            string
		last, now       time.Time
		wantDue, wantNx time.Time
	}{
		{"not yet", day(1, 3), day(1, 20), time.Time{}, day(2, 3)},
		{"due", day(1, 3), day(2, 4), day(2, 3), day(3, 3)},
		{"three missed: one pass", day(1, 3), day(4, 12), day(4, 3), day(5, 3)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			due, isDue, next := cronplan.Due(sched, time.UTC, tt.last, tt.now)
			if !due.Equal(tt.wantDue) || isDue == tt.wantDue.IsZero() || !next.Equal(tt.wantNx) {
				t.Fatalf("Due = %v (%v), %v; want %v, %v", due, isDue, next, tt.wantDue, tt.wantNx)
			}
		})
	}
}

func TestScheduleCreatesOnePassPerDueTimeAndPrunes(t *testing.T) {
	h := newPassHarness(t, nil)
	c := &etcdv1.EtcdCluster{}
	if err := h.api.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "db"}, c); err != nil {
		t.Fatal(err)
	}
	c.Spec.Defrag = &etcdv1.DefragSchedule{Schedule: "@every 1h", Rule: &etcdv1.DefragRule{All: true}, KeepFinished: ptr(int32(1))}
	if err := h.api.Update(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	now := c.CreationTimestamp.Add(90 * time.Minute)
	s := &ScheduleReconciler{Client: h.api, Now: func() time.Time { return now }}
	reconcile := func() []etcdv1.EtcdDefrag {
		t.Helper()
		if _, err := s.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "db"}}); err != nil {
			t.Fatal(err)
		}
		list := &etcdv1.EtcdDefragList{}
		if err := h.api.List(context.Background(), list, client.MatchingLabels{etcdv1.LabelDefragSchedule: "db"}); err != nil {
			t.Fatal(err)
		}
		return list.Items
	}
	if got := reconcile(); len(got) != 1 || !got[0].Spec.Rule.All || got[0].Spec.ClusterRef.Name != "db" {
		t.Fatalf("after the first due time: %+v, want one pass with the schedule's rule", got)
	}
	if got := reconcile(); len(got) != 1 {
		t.Fatalf("a second look at the same time made %d passes", len(got))
	}
	first := reconcile()[0]
	first.Status.Phase = etcdv1.EtcdDefragPhaseComplete
	if err := h.api.Status().Update(context.Background(), &first); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Hour)
	got := reconcile()
	if len(got) != 2 {
		t.Fatalf("an hour later: %d passes, want 2", len(got))
	}
	second := got[0]
	if second.Name == first.Name {
		second = got[1]
	}
	second.Status.Phase = etcdv1.EtcdDefragPhaseComplete
	if err := h.api.Status().Update(context.Background(), &second); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Minute)
	if got := reconcile(); len(got) != 1 || got[0].Name != second.Name {
		t.Fatalf("keepFinished 1 kept %d passes, want only the newest %s", len(got), second.Name)
	}
}

func ptr[T any](v T) *T { return &v }

// Members that report no quota (etcd 3.5; 3.6.0 to 3.6.5 with etcd's default) run with the
// one their cluster gives them: a rule on the quota's use is held to it, not to etcd's 2 GiB.
func TestAQuotaRuleUsesTheClustersQuotaWhenMembersReportNone(t *testing.T) {
	h := newPassHarness(t, &etcdv1.DefragRule{QuotaUsageAbove: "80%", MinReclaim: resource.NewQuantity(1<<20, resource.BinarySI)})
	c := &etcdv1.EtcdCluster{}
	if err := h.api.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "db"}, c); err != nil {
		t.Fatal(err)
	}
	quota := resource.MustParse("32Mi") // each member's 30Mi database is above 80% of it
	c.Spec.Options = &etcdv1.EtcdOptions{QuotaBackendBytes: &quota}
	if err := h.api.Update(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	d := h.run()
	if d.Status.Defragmented != 3 {
		t.Fatalf("status %+v; want every member defragmented: 30Mi is above 80%% of the cluster's 32Mi quota", d.Status)
	}
}
