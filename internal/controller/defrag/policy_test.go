package defrag

import (
	"context"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/robfig/cron/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller/kit"
	"github.com/quorumkeeper/etcd-operator/internal/controller/kit/kittest"
)

func TestDecideTick(t *testing.T) {
	sched, err := cron.ParseStandard("0 * * * *")
	if err != nil {
		t.Fatal(err)
	}
	at := func(h, m int) time.Time { return time.Date(2026, 12, 5, h, m, 0, 0, time.UTC) }
	spec := func(edit func(*etcdv1.EtcdDefragPolicySpec)) *etcdv1.EtcdDefragPolicySpec {
		s := &etcdv1.EtcdDefragPolicySpec{Schedule: "0 * * * *"}
		if edit != nil {
			edit(s)
		}
		return s
	}
	tests := []struct {
		name       string
		last, now  time.Time
		spec       *etcdv1.EtcdDefragPolicySpec
		unfinished int
		want       tickAction
		wantDue    time.Time
	}{
		{"not due", at(10, 0), at(10, 59), spec(nil), 0, tickNone, time.Time{}},
		{"due", at(10, 0), at(11, 0), spec(nil), 0, tickCreate, at(11, 0)},
		{"missed times make one pass, the latest", at(7, 0), at(11, 30), spec(nil), 0, tickCreate, at(11, 0)},
		{"suspended: the time is consumed", at(10, 0), at(11, 1), spec(func(s *etcdv1.EtcdDefragPolicySpec) { s.Suspend = ptr(true) }), 0, tickSuspended, at(11, 0)},
		{"suspend false", at(10, 0), at(11, 1), spec(func(s *etcdv1.EtcdDefragPolicySpec) { s.Suspend = ptr(false) }), 0, tickCreate, at(11, 0)},
		{"within the deadline", at(10, 0), at(11, 1), spec(func(s *etcdv1.EtcdDefragPolicySpec) { s.StartingDeadlineSeconds = ptr(int64(60)) }), 0, tickCreate, at(11, 0)},
		{"past the deadline: missed", at(10, 0), at(11, 2), spec(func(s *etcdv1.EtcdDefragPolicySpec) { s.StartingDeadlineSeconds = ptr(int64(60)) }), 0, tickMissed, at(11, 0)},
		{"deadline 0 and found late", at(10, 0), at(11, 0).Add(time.Second), spec(func(s *etcdv1.EtcdDefragPolicySpec) { s.StartingDeadlineSeconds = ptr(int64(0)) }), 0, tickMissed, at(11, 0)},
		{"the deadline counts from the latest missed time", at(7, 0), at(11, 0).Add(30 * time.Second), spec(func(s *etcdv1.EtcdDefragPolicySpec) { s.StartingDeadlineSeconds = ptr(int64(60)) }), 0, tickCreate, at(11, 0)},
		{"the longest deadline", at(7, 0), at(11, 5), spec(func(s *etcdv1.EtcdDefragPolicySpec) { s.StartingDeadlineSeconds = ptr(int64(math.MaxInt64)) }), 0, tickCreate, at(11, 0)},
		{"missed goes before forbidden", at(10, 0), at(11, 5), spec(func(s *etcdv1.EtcdDefragPolicySpec) { s.StartingDeadlineSeconds = ptr(int64(60)) }), 1, tickMissed, at(11, 0)},
		{"Forbid with an unfinished pass", at(10, 0), at(11, 0), spec(func(s *etcdv1.EtcdDefragPolicySpec) { s.ConcurrencyPolicy = etcdv1.DefragConcurrencyForbid }), 1, tickForbidden, at(11, 0)},
		{"no policy is Forbid", at(10, 0), at(11, 0), spec(nil), 2, tickForbidden, at(11, 0)},
		{"Allow with an unfinished pass", at(10, 0), at(11, 0), spec(func(s *etcdv1.EtcdDefragPolicySpec) { s.ConcurrencyPolicy = etcdv1.DefragConcurrencyAllow }), 1, tickCreate, at(11, 0)},
		{"suspended goes before all", at(10, 0), at(11, 5), spec(func(s *etcdv1.EtcdDefragPolicySpec) {
			s.Suspend, s.StartingDeadlineSeconds = ptr(true), ptr(int64(60))
		}), 1, tickSuspended, at(11, 0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := decideTick(sched, tt.last, tt.now, tt.spec, tt.unfinished)
			if got.action != tt.want || !got.due.Equal(tt.wantDue) {
				t.Fatalf("decideTick = %q due %v, want %q due %v", got.action, got.due, tt.want, tt.wantDue)
			}
			if !got.next.After(tt.now) {
				t.Fatalf("next %v is not after now %v", got.next, tt.now)
			}
		})
	}
}

func TestBeyondHistory(t *testing.T) {
	pass := func(name string, hour int, phase etcdv1.EtcdDefragPhase) etcdv1.EtcdDefrag {
		return etcdv1.EtcdDefrag{
			ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{
				etcdv1.AnnotationScheduledTime: time.Date(2026, 12, 5, hour, 0, 0, 0, time.UTC).Format(time.RFC3339)}},
			Status: etcdv1.EtcdDefragStatus{Phase: phase},
		}
	}
	passes := []etcdv1.EtcdDefrag{
		pass("p11", 11, etcdv1.EtcdDefragPhaseComplete),
		pass("p09", 9, etcdv1.EtcdDefragPhaseFailed),
		pass("p12", 12, etcdv1.EtcdDefragPhaseRunning),
		pass("p10", 10, etcdv1.EtcdDefragPhaseComplete),
		pass("p08", 8, etcdv1.EtcdDefragPhasePending),
	}
	tests := []struct {
		keep int
		want []string
	}{
		{0, []string{"p11", "p10", "p09"}},
		{1, []string{"p10", "p09"}},
		{2, []string{"p09"}},
		{3, nil},
		{10, nil},
	}
	for _, tt := range tests {
		var got []string
		for _, p := range beyondHistory(passes, tt.keep) {
			got = append(got, p.Name)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("keep %d: %v, want %v (finished ones only, oldest beyond the newest kept)", tt.keep, got, tt.want)
		}
	}
}

// policyFixture is the pass harness's cluster "db" with an EtcdDefragPolicy "nightly" of it,
// created at created.
type policyFixture struct {
	t       *testing.T
	h       *passHarness
	r       *PolicyReconciler
	now     time.Time
	created time.Time
	events  *events.FakeRecorder
}

func newPolicyFixture(t *testing.T, spec etcdv1.EtcdDefragPolicySpec) *policyFixture {
	h := newPassHarness(t, nil)
	spec.ClusterRef = corev1.LocalObjectReference{Name: "db"}
	p := &etcdv1.EtcdDefragPolicy{ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "ns",
		CreationTimestamp: metav1.NewTime(time.Date(2026, 12, 5, 21, 3, 0, 0, time.UTC))}, Spec: spec}
	if err := h.api.Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	f := &policyFixture{t: t, h: h, created: readBack(t, h, p).CreationTimestamp.Time, events: events.NewFakeRecorder(50)}
	f.now = f.created
	f.r = &PolicyReconciler{Client: h.api, Recorder: f.events, Now: func() time.Time { return f.now }}
	return f
}

func (f *policyFixture) reconcile() reconcile.Result {
	f.t.Helper()
	res, err := f.r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "nightly"}})
	if err != nil {
		f.t.Fatal(err)
	}
	return res
}

func (f *policyFixture) policy() *etcdv1.EtcdDefragPolicy {
	f.t.Helper()
	p := &etcdv1.EtcdDefragPolicy{}
	if err := f.h.api.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "nightly"}, p); err != nil {
		f.t.Fatal(err)
	}
	return p
}

// passes are the policy's EtcdDefrags, oldest first.
func (f *policyFixture) passes() []etcdv1.EtcdDefrag {
	f.t.Helper()
	list := &etcdv1.EtcdDefragList{}
	if err := f.h.api.List(context.Background(), list, client.MatchingLabels{etcdv1.LabelDefragPolicy: "nightly"}); err != nil {
		f.t.Fatal(err)
	}
	slices.SortFunc(list.Items, func(a, b etcdv1.EtcdDefrag) int {
		return strings.Compare(a.Annotations[etcdv1.AnnotationScheduledTime], b.Annotations[etcdv1.AnnotationScheduledTime])
	})
	return list.Items
}

func (f *policyFixture) finish(d etcdv1.EtcdDefrag, phase etcdv1.EtcdDefragPhase) {
	f.t.Helper()
	d.Status.Phase, d.Status.CompletedAt = phase, &metav1.Time{Time: f.now.Truncate(time.Second)}
	if err := f.h.api.Status().Update(context.Background(), &d); err != nil {
		f.t.Fatal(err)
	}
}

// emitted drains the recorded events.
func (f *policyFixture) emitted() []string {
	var out []string
	for {
		select {
		case e := <-f.events.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func hasEvent(events []string, prefix string) bool {
	return slices.ContainsFunc(events, func(e string) bool { return strings.HasPrefix(e, prefix) })
}

// at reconciles the policy at now.
func (f *policyFixture) at(now time.Time) reconcile.Result {
	f.t.Helper()
	f.now = now
	return f.reconcile()
}

// wantPasses fails the test unless the policy has n passes, and returns them.
func (f *policyFixture) wantPasses(n int, when string) []etcdv1.EtcdDefrag {
	f.t.Helper()
	passes := f.passes()
	if len(passes) != n {
		f.t.Fatalf("%s: passes %v, want %d", when, names(passes), n)
	}
	return passes
}

// wantEvent fails the test unless an event since the last look begins with prefix.
func (f *policyFixture) wantEvent(prefix string) {
	f.t.Helper()
	if ev := f.emitted(); !hasEvent(ev, prefix) {
		f.t.Fatalf("events %v, want %s", ev, prefix)
	}
}

// wantLastSchedule fails the test unless status.lastScheduleTime is due.
func (f *policyFixture) wantLastSchedule(due time.Time) *etcdv1.EtcdDefragPolicy {
	f.t.Helper()
	p := f.policy()
	if p.Status.LastScheduleTime == nil || !p.Status.LastScheduleTime.Time.Equal(due) {
		f.t.Fatalf("lastScheduleTime %v, want %v: the time is consumed", p.Status.LastScheduleTime, due)
	}
	return p
}

// checkPolicyPass fails the test unless d is the pass of p due at due: named after the time,
// of the policy's cluster (spec and label), with its rule and TTL, controlled by it.
func checkPolicyPass(t *testing.T, d *etcdv1.EtcdDefrag, p *etcdv1.EtcdDefragPolicy, due time.Time) {
	t.Helper()
	same := d.Name == p.Name+"-"+itoa(due.Unix()) && d.Spec.ClusterRef == p.Spec.ClusterRef &&
		d.Labels[etcdv1.LabelCluster] == p.Spec.ClusterRef.Name && d.Labels[etcdv1.LabelDefragPolicy] == p.Name &&
		reflect.DeepEqual(d.Spec.Rule, p.Spec.Rule) && reflect.DeepEqual(d.Spec.TTLSecondsAfterFinished, p.Spec.TTLSecondsAfterFinished)
	if !same || !metav1.IsControlledBy(d, p) {
		t.Fatalf("the pass %s %+v %v: want %s-<due>, the policy's cluster (and its label), rule and TTL, controlled by the policy", d.Name, d.Spec, d.Labels, p.Name)
	}
}

// A policy every 10 minutes with Forbid, a 60 s starting deadline and a history of one: a
// pass per due time with the policy's rule and TTL, a time skipped while that pass runs, a
// time found late skipped with MissedSchedule, and the finished passes beyond one pruned.
func TestPolicyCreatesPassesSkipsForbiddenAndMissedTimesAndPrunes(t *testing.T) {
	f := newPolicyFixture(t, etcdv1.EtcdDefragPolicySpec{
		Schedule: "*/10 * * * *", ConcurrencyPolicy: etcdv1.DefragConcurrencyForbid, StartingDeadlineSeconds: ptr(int64(60)),
		HistoryLimit: ptr(int32(1)), TTLSecondsAfterFinished: ptr(int32(600)), Rule: &etcdv1.DefragRule{All: true},
	})
	tick := f.created.Truncate(10 * time.Minute).Add(10 * time.Minute)

	res := f.at(tick.Add(5 * time.Second))
	first := f.wantPasses(1, "at the first time")[0]
	checkPolicyPass(t, &first, f.policy(), tick)
	p := f.wantLastSchedule(tick)
	if len(p.Status.Active) != 1 || p.Status.Active[0].Name != first.Name {
		t.Fatalf("status.active %v, want the pass", p.Status.Active)
	}
	if c := meta.FindStatusCondition(p.Status.Conditions, etcdv1.DefragPolicyConditionActive); c == nil || c.Status != metav1.ConditionTrue || c.Reason != etcdv1.ReasonScheduled {
		t.Fatalf("condition Active %+v, want True Scheduled", c)
	}
	f.wantEvent("Normal DefragScheduled")
	if res.RequeueAfter <= 0 || res.RequeueAfter > 10*time.Minute {
		t.Fatalf("requeue after %v, want the next time, within 10m", res.RequeueAfter)
	}
	f.reconcile()
	f.wantPasses(1, "a second look at the same time")

	// The next time, the first pass still runs: Forbid skips it.
	f.at(tick.Add(10*time.Minute + 5*time.Second))
	f.wantPasses(1, "Forbid with a running pass")
	f.wantEvent("Normal ConcurrencyForbidden")
	f.wantLastSchedule(tick.Add(10 * time.Minute))

	// It completes; the next time makes the second pass.
	f.finish(first, etcdv1.EtcdDefragPhaseComplete)
	completed := f.now.Truncate(time.Second)
	f.at(tick.Add(20*time.Minute + 5*time.Second))
	passes := f.wantPasses(2, "after the first pass completed")
	if p := f.policy(); p.Status.LastSuccessfulTime == nil || !p.Status.LastSuccessfulTime.Time.Equal(completed) {
		t.Fatalf("lastSuccessfulTime %v, want %v", p.Status.LastSuccessfulTime, completed)
	}
	f.emitted()

	// The second fails; the operator is down past the next time: it is missed, and the
	// history keeps only the newest finished pass.
	f.finish(passes[1], etcdv1.EtcdDefragPhaseFailed)
	f.at(tick.Add(30*time.Minute + 2*time.Minute))
	if kept := f.wantPasses(1, "after a missed time with historyLimit 1"); kept[0].Name != passes[1].Name {
		t.Fatalf("kept %s, want the newest finished pass %s", kept[0].Name, passes[1].Name)
	}
	f.wantEvent("Warning MissedSchedule")
	if p := f.wantLastSchedule(tick.Add(30 * time.Minute)); len(p.Status.Active) != 0 {
		t.Fatalf("status.active %v, want none", p.Status.Active)
	}
	f.reconcile()
	if ev := f.emitted(); hasEvent(ev, "Warning MissedSchedule") {
		t.Fatalf("a second look at the missed time: events %v", ev)
	}
	f.wantPasses(1, "a second look at the missed time")
}

// A pass the policy made goes ttlSecondsAfterFinished after it finished: the policy gives it
// its TTL, the pass's own reconciler deletes it.
func TestPolicyPassesExpireAfterTheirTTL(t *testing.T) {
	f := newPolicyFixture(t, etcdv1.EtcdDefragPolicySpec{Schedule: "@every 1h", TTLSecondsAfterFinished: ptr(int32(60))})
	f.now = f.created.Add(time.Hour + time.Second)
	f.reconcile()
	passes := f.passes()
	if len(passes) != 1 {
		t.Fatalf("%d passes, want 1", len(passes))
	}
	f.finish(passes[0], etcdv1.EtcdDefragPhaseComplete)
	f.h.r.Now = func() time.Time { return f.now.Add(30 * time.Second) }
	key := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&passes[0])}
	if _, err := f.h.r.Reconcile(context.Background(), key); err != nil {
		t.Fatal(err)
	}
	if len(f.passes()) != 1 {
		t.Fatal("the pass went before its TTL")
	}
	f.h.r.Now = func() time.Time { return f.now.Add(61 * time.Second) }
	if _, err := f.h.r.Reconcile(context.Background(), key); err != nil {
		t.Fatal(err)
	}
	if n := len(f.passes()); n != 0 {
		t.Fatalf("%d passes after the TTL, want 0", n)
	}
}

// While suspended the policy creates nothing and its times pass unused: after resuming it
// waits for the next time rather than make up for one it skipped.
func TestSuspendedPolicySkipsItsTimesAndResumesAtTheNext(t *testing.T) {
	f := newPolicyFixture(t, etcdv1.EtcdDefragPolicySpec{Schedule: "@every 1h", Suspend: ptr(true)})
	f.now = f.created.Add(90 * time.Minute)
	res := f.reconcile()
	p := f.policy()
	if len(f.passes()) != 0 || res.RequeueAfter <= 0 {
		t.Fatalf("suspended: %d passes, requeue %v; want none and a look at the next time", len(f.passes()), res.RequeueAfter)
	}
	if c := meta.FindStatusCondition(p.Status.Conditions, etcdv1.DefragPolicyConditionActive); c == nil || c.Status != metav1.ConditionFalse || c.Reason != etcdv1.ReasonSuspended {
		t.Fatalf("condition Active %+v, want False Suspended", c)
	}
	p.Spec.Suspend = ptr(false)
	if err := f.h.api.Update(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	f.now = f.created.Add(100 * time.Minute)
	f.reconcile()
	if n := len(f.passes()); n != 0 {
		t.Fatalf("resumed: %d passes for a time skipped while suspended, want 0", n)
	}
	f.now = f.created.Add(2*time.Hour + time.Second)
	f.reconcile()
	if n := len(f.passes()); n != 1 {
		t.Fatalf("at the next time: %d passes, want 1", n)
	}
	if c := meta.FindStatusCondition(f.policy().Status.Conditions, etcdv1.DefragPolicyConditionActive); c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("condition Active %+v, want True", c)
	}
}

// A schedule the CRD lets through but cron cannot read: condition Active False
// InvalidSchedule, no pass, no requeue (only a change of the policy helps).
func TestPolicyWithAnInvalidScheduleSaysSo(t *testing.T) {
	f := newPolicyFixture(t, etcdv1.EtcdDefragPolicySpec{Schedule: "0 25 * * *"})
	f.now = f.created.Add(48 * time.Hour)
	res := f.reconcile()
	c := meta.FindStatusCondition(f.policy().Status.Conditions, etcdv1.DefragPolicyConditionActive)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != etcdv1.ReasonInvalidSchedule || !strings.Contains(c.Message, "0 25 * * *") {
		t.Fatalf("condition Active %+v, want False InvalidSchedule naming the schedule", c)
	}
	if len(f.passes()) != 0 || res.RequeueAfter != 0 {
		t.Fatalf("%d passes, requeue %v; want none", len(f.passes()), res.RequeueAfter)
	}
}

// The policy of a cluster another operator claims is left alone; its claimant runs it.
func TestPolicyOfAnotherOperatorsClusterIsLeftAlone(t *testing.T) {
	f := newPolicyFixture(t, etcdv1.EtcdDefragPolicySpec{Schedule: "@every 1h"})
	kittest.SetClaim(t, f.h.api, client.ObjectKey{Namespace: "ns", Name: "db"}, "ops-b/x")
	f.r.Claims = &kit.Claims{Me: "ops-a/x"}
	f.now = f.created.Add(time.Hour + time.Second)
	f.reconcile()
	if p := f.policy(); len(f.passes()) != 0 || p.Status.LastScheduleTime != nil {
		t.Fatalf("another operator's cluster: %d passes, status %+v", len(f.passes()), p.Status)
	}
	f.r.Claims.Me = "ops-b/x"
	f.reconcile()
	if n := len(f.passes()); n != 1 {
		t.Fatalf("the claimant's policy made %d passes, want 1", n)
	}
}

func TestEachReconcileOfADefragPolicyLogsWhatItDidWithTheTimeAtV1(t *testing.T) {
	f := newPolicyFixture(t, etcdv1.EtcdDefragPolicySpec{Schedule: "@every 1h", StartingDeadlineSeconds: ptr(int64(10))})
	due := f.created.Add(time.Hour)
	f.now = due.Add(time.Minute)
	line := kittest.NewLog(t, "etcddefragpolicy", "EtcdDefragPolicy", client.ObjectKey{Namespace: "ns", Name: "nightly"}).Reconcile(f.r)
	if line["msg"] != "step taken" || line["step"] != string(tickMissed) || line["due"] != due.UTC().Format(time.RFC3339) ||
		line["nextRun"] != due.Add(time.Hour).UTC().Format(time.RFC3339) || line["EtcdCluster"] == nil {
		t.Errorf("want the missed time, the next run and the cluster: %v", line)
	}
}

func names(passes []etcdv1.EtcdDefrag) []string {
	var out []string
	for _, p := range passes {
		out = append(out, p.Name)
	}
	return out
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// readBack reads the policy back: its creation time as the API keeps it.
func readBack(t *testing.T, h *passHarness, p *etcdv1.EtcdDefragPolicy) *etcdv1.EtcdDefragPolicy {
	t.Helper()
	got := &etcdv1.EtcdDefragPolicy{}
	if err := h.api.Get(context.Background(), client.ObjectKeyFromObject(p), got); err != nil {
		t.Fatal(err)
	}
	if got.CreationTimestamp.IsZero() {
		t.Fatal("the policy has no creation time")
	}
	return got
}
