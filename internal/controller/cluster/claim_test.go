package cluster

import (
	"context"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller/kit"
)

const (
	operatorA = "ops-a/etcd-operator.cozystack.io"
	operatorB = "ops-b/etcd-operator.cozystack.io"
)

// claimHarness is the cluster reconciler of operator A with claims, its writes to the cluster
// counted, on a clock the test moves; operator B's Lease is renewed now.
type claimHarness struct {
	*harness
	clock                     time.Time
	claimWrites, statusWrites int
	// refuseClaims makes every write of a claim fail with a conflict: another operator's
	// claim landed first.
	refuseClaims bool
	recorder     *events.FakeRecorder
}

func newClaimHarness(t *testing.T, claim string) *claimHarness {
	t.Helper()
	h := &claimHarness{harness: newHarness(t), clock: time.Now().Truncate(time.Second), recorder: events.NewFakeRecorder(50)}
	if claim != "" {
		h.annotate(etcdv1.AnnotationOperator, claim)
	}
	h.create(operatorLease(h.clock, ""))
	h.r.Client = interceptor.NewClient(h.api.(client.WithWatch), interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if data, _ := patch.Data(obj); strings.Contains(string(data), etcdv1.AnnotationOperator) {
				if h.refuseClaims {
					return apierrors.NewConflict(schema.GroupResource{Resource: "etcdclusters"}, obj.GetName(), nil)
				}
				h.claimWrites++
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			if _, ok := obj.(*etcdv1.EtcdCluster); ok {
				h.statusWrites++
			}
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	})
	h.r.Recorder = h.recorder
	h.r.Now = func() time.Time { return h.clock }
	h.r.Claims = &kit.Claims{Me: operatorA, Reader: h.api, Now: func() time.Time { return h.clock }}
	return h
}

// operatorLease is operator B's leader election Lease, renewed at renewed, publishing watching
// when not "".
func operatorLease(renewed time.Time, watching string) *coordinationv1.Lease {
	holder, seconds := "pod-b", int32(15)
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "ops-b", Name: "etcd-operator.cozystack.io"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &seconds, RenewTime: &metav1.MicroTime{Time: renewed}}}
	if watching != "" {
		l.Annotations = map[string]string{etcdv1.AnnotationWatchNamespaces: watching, etcdv1.AnnotationWatchNamespacesHolder: holder}
	}
	return l
}

// selectingLease is operator B's Lease, renewed at renewed, publishing the cluster selector
// sel.
func selectingLease(renewed time.Time, sel string) *coordinationv1.Lease {
	l := operatorLease(renewed, "*")
	l.Annotations[etcdv1.AnnotationClusterSelector] = sel
	return l
}

// setLease rewrites operator B's Lease, and moves the clock past the time its last read is
// reused.
func (h *claimHarness) setLease(l *coordinationv1.Lease) {
	h.t.Helper()
	old := &coordinationv1.Lease{}
	if err := h.api.Get(context.Background(), client.ObjectKeyFromObject(l), old); err != nil {
		h.t.Fatal(err)
	}
	l.ResourceVersion = old.ResourceVersion
	if err := h.api.Update(context.Background(), l); err != nil {
		h.t.Fatal(err)
	}
	h.clock = h.clock.Add(time.Minute)
}

func (h *claimHarness) look() ctrl.Result {
	h.t.Helper()
	h.realizeMembers()
	res, err := h.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(h.cluster)})
	if err != nil {
		h.t.Fatalf("reconcile: %v", err)
	}
	return res
}

func (h *claimHarness) events() []string {
	var out []string
	for {
		select {
		case e := <-h.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// A cluster from before claims is claimed at its first look, with one write and nothing else
// done in that look; the looks after act on it and write the claim no more.
func TestUnclaimedClusterIsClaimedOnceThenManaged(t *testing.T) {
	h := newClaimHarness(t, "")
	h.look()
	if claim := h.clusterObj().Annotations[etcdv1.AnnotationOperator]; claim != operatorA {
		t.Fatalf("claim %q after the first look, want %s", claim, operatorA)
	}
	if n := len(h.members()); n != 0 || h.statusWrites != 0 {
		t.Fatalf("the look that claimed the cluster also made %d members and %d status writes", n, h.statusWrites)
	}
	for range 4 {
		h.look()
	}
	if n := len(h.members()); n == 0 {
		t.Fatal("the claimant made no member")
	}
	if h.claimWrites != 1 {
		t.Fatalf("the claim was written %d times, want once", h.claimWrites)
	}
}

// A claim another operator wrote first makes this operator's look do nothing: it acts
// from a look that reads its own claim only.
func TestLostClaimDoesNothingThatLook(t *testing.T) {
	h := newClaimHarness(t, "")
	h.refuseClaims = true
	h.look()
	c := h.clusterObj()
	if n := len(h.members()); n != 0 || len(c.Finalizers) != 0 || h.statusWrites != 0 {
		t.Fatalf("the look that lost the claim made %d members, finalizers %v, %d status writes", n, c.Finalizers, h.statusWrites)
	}
}

// A cluster another live operator claims is left alone: no member, no finalizer, no status
// but the OperatorConflict condition, written once with one Warning event however often the
// cluster is looked at, naming both operators and the fix.
func TestClusterOfAnotherLiveOperatorIsRefusedOnce(t *testing.T) {
	h := newClaimHarness(t, operatorB)
	var res ctrl.Result
	for range 3 {
		res = h.look()
	}
	c := h.clusterObj()
	if n := len(h.members()); n != 0 || len(c.Finalizers) != 0 {
		t.Fatalf("refused cluster: %d members, finalizers %v", n, c.Finalizers)
	}
	if c.Annotations[etcdv1.AnnotationOperator] != operatorB || h.claimWrites != 0 {
		t.Fatalf("claim %q after %d claim writes, want %s's untouched", c.Annotations[etcdv1.AnnotationOperator], h.claimWrites, operatorB)
	}
	checkRefusal(t, c)
	if len(c.Status.Conditions) != 1 || h.statusWrites != 1 {
		t.Fatalf("%d status writes leaving conditions %+v; want the one condition, written once", h.statusWrites, c.Status.Conditions)
	}
	if evs := h.events(); len(evs) != 1 || !strings.Contains(evs[0], "Warning "+etcdv1.ReasonClaimedByAnotherOperator) {
		t.Fatalf("events %q, want one Warning %s", evs, etcdv1.ReasonClaimedByAnotherOperator)
	}
	if res.RequeueAfter != resyncPeriod {
		t.Fatalf("refused cluster looked at again after %v, want %v (to notice the claimant gone)", res.RequeueAfter, resyncPeriod)
	}
}

// checkRefusal: the cluster says that operator A refuses it, leaving it to operator B, and how
// to end the overlap.
func checkRefusal(t *testing.T, c *etcdv1.EtcdCluster) {
	t.Helper()
	cond := meta.FindStatusCondition(c.Status.Conditions, etcdv1.ConditionOperatorConflict)
	if cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != etcdv1.ReasonClaimedByAnotherOperator {
		t.Fatalf("OperatorConflict %+v", cond)
	}
	for _, want := range []string{operatorA, operatorB, "--watch-namespaces", "watchNamespaces"} {
		if !strings.Contains(cond.Message, want) {
			t.Errorf("message %q does not say %q", cond.Message, want)
		}
	}
}

// Operator B stopped watching the namespace (its leader published its list without it), or
// stopped for good: operator A takes the cluster over, says so, and manages it.
func TestClusterIsTakenOverFromAnOperatorThatNoLongerServesIt(t *testing.T) {
	for name, lease := range map[string]func(now time.Time) *coordinationv1.Lease{
		"no longer watching": func(now time.Time) *coordinationv1.Lease { return operatorLease(now, "other") },
		"Lease expired":      func(now time.Time) *coordinationv1.Lease { return operatorLease(now.Add(-time.Hour), "") },
	} {
		t.Run(name, func(t *testing.T) {
			h := newClaimHarness(t, operatorB)
			h.look()
			if cond := h.condition(etcdv1.ConditionOperatorConflict); cond.Status != metav1.ConditionTrue {
				t.Fatalf("operator B alive and watching: OperatorConflict %+v", cond)
			}
			h.events()
			h.setLease(lease(h.clock))
			h.look()
			if claim := h.clusterObj().Annotations[etcdv1.AnnotationOperator]; claim != operatorA {
				t.Fatalf("claim %q, want taken over by %s", claim, operatorA)
			}
			if evs := h.events(); len(evs) != 1 || !strings.Contains(evs[0], "Normal "+etcdv1.ReasonClaimTakenOver) || !strings.Contains(evs[0], operatorB) {
				t.Fatalf("events %q, want one %s naming %s", evs, etcdv1.ReasonClaimTakenOver, operatorB)
			}
			for range 3 {
				h.look()
			}
			if len(h.members()) == 0 {
				t.Fatal("no member made after the take-over")
			}
			if meta.FindStatusCondition(h.clusterObj().Status.Conditions, etcdv1.ConditionOperatorConflict) != nil {
				t.Fatal("the new claimant kept the condition it had written itself as the refuser")
			}
		})
	}
}

// writeConflict stores the OperatorConflict condition of operator refuser, refused by holder.
func (h *claimHarness) writeConflict(refuser, holder string) {
	h.t.Helper()
	c := h.clusterObj()
	meta.SetStatusCondition(&c.Status.Conditions, conflictCondition(refuser, holder, c.Namespace, ""))
	if err := h.api.Status().Update(context.Background(), c); err != nil {
		h.t.Fatal(err)
	}
}

// The claimant keeps the OperatorConflict condition the refuser wrote, through its own
// status writes, as long as the refuser serves the namespace (removing it would have the
// refuser write it again, in turns); once the refuser's Lease ended, it removes it, once.
func TestClaimantKeepsTheConflictWhileTheRefuserServes(t *testing.T) {
	h := newClaimHarness(t, operatorA)
	h.writeConflict(operatorB, operatorA)
	for range 4 {
		h.look()
	}
	if len(h.members()) == 0 {
		t.Fatal("the claimant made no member")
	}
	if cond := h.condition(etcdv1.ConditionOperatorConflict); cond.Status != metav1.ConditionTrue {
		t.Fatalf("the claimant's status writes dropped the refuser's condition: %+v", cond)
	}
	h.events()
	h.setLease(operatorLease(h.clock.Add(-time.Hour), ""))
	h.look()
	if meta.FindStatusCondition(h.clusterObj().Status.Conditions, etcdv1.ConditionOperatorConflict) != nil {
		t.Fatal("the condition stayed after the refuser's Lease ended")
	}
	if evs := h.events(); len(evs) != 1 || !strings.Contains(evs[0], etcdv1.ReasonOperatorConflictResolved) {
		t.Fatalf("events %q, want one %s", evs, etcdv1.ReasonOperatorConflictResolved)
	}
}

func TestRefuserOfReadsConflictCondition(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name          string
		cond          metav1.Condition
		want          string
		wantUnelected bool
	}{
		{"elected refuser", conflictCondition(operatorB, operatorA, "team-a", ""), operatorB, false},
		{"refuser without leader election", conflictCondition(operatorB, operatorA, "team-a", kit.WhyUnelected), operatorB, true},
		{"written by hand", metav1.Condition{Message: "written by hand"}, "", false},
	} {
		if got, unelected := refuserOf(&tc.cond); got != tc.want || unelected != tc.wantUnelected {
			t.Errorf("%s: refuserOf = %q, %v; want %q, %v", tc.name, got, unelected, tc.want, tc.wantUnelected)
		}
	}
}

// operatorC is a third operator, refused like A by the claimant.
const operatorC = "ops-c/etcd-operator.cozystack.io"

func TestConflictOver(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	alive := kit.ClaimantOf(operatorLease(now, ""))
	byB := conflictCondition(operatorB, operatorA, "ns", "")
	for _, tc := range []struct {
		name  string
		cond  metav1.Condition
		state kit.Claimant
		want  bool
	}{
		{"refuser alive and watching", byB, alive, false},
		{"refuser published a list without the namespace", byB, kit.ClaimantOf(operatorLease(now, "other")), true},
		{"refuser's Lease expired", byB, kit.ClaimantOf(operatorLease(now.Add(-time.Hour), "")), true},
		{"refuser's published selector matches", byB, kit.ClaimantOf(selectingLease(now, "shard=a")), false},
		{"refuser's published selector no longer matches", byB, kit.ClaimantOf(selectingLease(now, "shard=b")), true},
		{"refuser's Lease missing for a moment", byB, kit.Claimant{MissingSince: now.Add(-time.Minute)}, false},
		{"refuser's Lease missing for longer than the margin", byB, kit.Claimant{MissingSince: now.Add(-time.Hour)}, true},
		{"refuser without leader election (cannot be told gone)", conflictCondition(operatorB, operatorA, "ns", kit.WhyUnelected), kit.Claimant{}, false},
		{"the refuser is the claimant now", conflictCondition(operatorA, operatorB, "ns", ""), alive, true},
		{"no refuser named", metav1.Condition{Message: "written by hand"}, alive, true},
	} {
		if got := conflictOver(&tc.cond, operatorA, tc.state, "ns", labels.Set{"shard": "a"}, now); got != tc.want {
			t.Errorf("%s: conflictOver = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A refuser leaves the condition another live refuser wrote as it is, and writes its own
// over one whose writer is gone, over its own, or where there is none.
func TestConflictStands(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	alive := kit.ClaimantOf(operatorLease(now, ""))
	byC := conflictCondition(operatorC, operatorB, "ns", "")
	byCUnelected := conflictCondition(operatorC, operatorB, "ns", kit.WhyUnelected)
	mine := conflictCondition(operatorA, operatorB, "ns", "")
	resolved := byC
	resolved.Status = metav1.ConditionFalse
	for _, tc := range []struct {
		name     string
		existing *metav1.Condition
		state    kit.Claimant
		want     bool
	}{
		{"none", nil, kit.Claimant{}, false},
		{"another refuser's, alive", &byC, alive, true},
		{"another refuser's, its Lease missing for a moment", &byC, kit.Claimant{MissingSince: now.Add(-time.Minute)}, true},
		{"another refuser's, its Lease expired long ago", &byC, kit.ClaimantOf(operatorLease(now.Add(-time.Hour), "")), false},
		{"another refuser's, no longer watching", &byC, kit.ClaimantOf(operatorLease(now, "other")), false},
		{"another refuser's, without leader election", &byCUnelected, kit.Claimant{}, true},
		{"mine", &mine, kit.Claimant{}, false},
		{"another refuser's, not True", &resolved, alive, false},
	} {
		if got := conflictStands(tc.existing, operatorA, tc.state, "ns", nil, now); got != tc.want {
			t.Errorf("%s: conflictStands = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// Operator A, refused by live claimant B, finds the condition live operator C wrote when
// refused too: it leaves it, and writes nothing however often it looks.
func TestSecondRefuserLeavesTheFirstOnesCondition(t *testing.T) {
	h := newClaimHarness(t, operatorB)
	lc := operatorLease(h.clock, "")
	lc.Namespace = "ops-c"
	h.create(lc)
	h.writeConflict(operatorC, operatorB)
	for range 3 {
		h.look()
	}
	if h.statusWrites != 0 {
		t.Fatalf("%d status writes over the other refuser's condition, want none", h.statusWrites)
	}
	if cond := h.condition(etcdv1.ConditionOperatorConflict); !strings.HasPrefix(cond.Message, conflictPrefix+operatorC) {
		t.Fatalf("the condition says %q, want %s's", cond.Message, operatorC)
	}
}

// An operator without leader election refuses a cluster of another's even when that one's
// Lease ended long ago, and its condition says why.
func TestUnelectedOperatorRefusesAnotherOperatorsCluster(t *testing.T) {
	h := newClaimHarness(t, operatorB)
	h.r.Claims.Unelected = true
	h.setLease(operatorLease(h.clock.Add(-time.Hour), ""))
	h.look()
	if claim := h.clusterObj().Annotations[etcdv1.AnnotationOperator]; claim != operatorB || h.claimWrites != 0 {
		t.Fatalf("claim %q after %d claim writes, want %s's untouched", claim, h.claimWrites, operatorB)
	}
	cond := h.condition(etcdv1.ConditionOperatorConflict)
	if cond.Status != metav1.ConditionTrue || !strings.Contains(cond.Message, "without leader election") {
		t.Fatalf("OperatorConflict %+v, want one saying the operator runs without leader election", cond)
	}
}

// relabel sets the cluster's shard label, as a person moving it to another shard does.
func (h *claimHarness) relabel(shard string) {
	h.t.Helper()
	c := h.clusterObj()
	patch := client.MergeFrom(c.DeepCopy())
	c.Labels = map[string]string{"shard": shard}
	if err := h.api.Patch(context.Background(), c, patch); err != nil {
		h.t.Fatal(err)
	}
}

// Sharding by label selector: operator A (shard=a) manages a cluster; its label moves it to
// shard b. A stops acting on it at once and writes nothing to it, its claim included;
// operator B (shard=b) takes it over, for A's Lease says A serves shard=a only.
func TestRelabelledClusterMovesToTheOtherShard(t *testing.T) {
	h := newClaimHarness(t, operatorA)
	shardA, shardB := labels.SelectorFromSet(labels.Set{"shard": "a"}), labels.SelectorFromSet(labels.Set{"shard": "b"})
	h.r.Claims.Selector = shardA
	leaseA := operatorLease(h.clock, "")
	leaseA.Namespace = "ops-a"
	h.create(leaseA)
	if err := kit.PublishScope(context.Background(), h.api, h.api, client.ObjectKeyFromObject(leaseA), nil, shardA); err != nil {
		t.Fatal(err)
	}
	h.relabel("a")
	for range 4 {
		h.look()
	}
	members := len(h.members())
	if members == 0 {
		t.Fatal("operator A made no member of its own cluster")
	}
	h.relabel("b")
	h.events()
	h.looksWritingNothing(members)
	h.r.Claims = &kit.Claims{Me: operatorB, Selector: shardB, Reader: h.api, Now: func() time.Time { return h.clock }}
	h.look()
	if claim := h.clusterObj().Annotations[etcdv1.AnnotationOperator]; claim != operatorB {
		t.Fatalf("claim %q, want taken over by %s", claim, operatorB)
	}
	if evs := h.events(); len(evs) != 1 || !strings.Contains(evs[0], etcdv1.ReasonClaimTakenOver) || !strings.Contains(evs[0], "matching shard=a") {
		t.Fatalf("events %q, want one %s saying A serves shard=a only", evs, etcdv1.ReasonClaimTakenOver)
	}
}

// looksWritingNothing: operator A looks at the cluster, which it claims but no longer
// selects, and writes nothing to it (its claim stays, its members stay as many), says
// nothing, and does not ask to look again (a label change wakes it).
func (h *claimHarness) looksWritingNothing(members int) {
	h.t.Helper()
	before, claimWrites, statusWrites := h.clusterObj().ResourceVersion, h.claimWrites, h.statusWrites
	for range 3 {
		if res := h.look(); res.RequeueAfter != 0 {
			h.t.Fatalf("operator A looks again after %v at a cluster it does not select", res.RequeueAfter)
		}
	}
	c := h.clusterObj()
	if c.ResourceVersion != before || h.claimWrites != claimWrites || h.statusWrites != statusWrites || len(h.members()) != members {
		h.t.Fatalf("operator A wrote to a cluster it no longer selects: resourceVersion %s -> %s, %d claim and %d status writes, %d members (was %d)",
			before, c.ResourceVersion, h.claimWrites-claimWrites, h.statusWrites-statusWrites, len(h.members()), members)
	}
	if c.Annotations[etcdv1.AnnotationOperator] != operatorA || len(h.events()) != 0 {
		h.t.Fatalf("claim %q after operator A's looks, want its own left for B to take, without an event", c.Annotations[etcdv1.AnnotationOperator])
	}
}
