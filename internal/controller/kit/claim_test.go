package kit

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

var claimNow = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// lease is an operator's leader election Lease held by holder, renewed at renewed, with the
// watched namespaces published by publisher ("" publishes none).
func lease(holder string, renewed time.Time, publisher, watching string) *coordinationv1.Lease {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "ops-b", Name: "etcd-operator.cozystack.io"}}
	l.Spec.HolderIdentity = &holder
	l.Spec.LeaseDurationSeconds = ptr(int32(15))
	l.Spec.RenewTime = &metav1.MicroTime{Time: renewed}
	if publisher != "" {
		l.Annotations = map[string]string{etcdv1.AnnotationWatchNamespaces: watching, etcdv1.AnnotationWatchNamespacesHolder: publisher}
	}
	return l
}

func ptr[T any](v T) *T { return &v }

func TestClaimVerdict(t *testing.T) {
	t.Parallel()
	const me, other = "ops-a/etcd-operator.cozystack.io", "ops-b/etcd-operator.cozystack.io"
	alive := ClaimantOf(lease("pod-b", claimNow.Add(-time.Second), "", ""))
	for _, tc := range []struct {
		name   string
		claim  string
		holder Claimant
		want   VerdictKind
	}{
		{"unclaimed (a cluster from before claims)", "", Claimant{}, Take},
		{"mine", me, Claimant{}, Mine},
		{"another's, alive", other, alive, Refuse},
		{"another's, its Lease gone", other, ClaimantOf(nil), Take},
		{"another's, expired less than the margin ago", other, ClaimantOf(lease("pod-b", claimNow.Add(-15*time.Second-ClaimMargin+time.Second), "", "")), Refuse},
		{"another's, expired more than the margin ago", other, ClaimantOf(lease("pod-b", claimNow.Add(-15*time.Second-ClaimMargin-time.Second), "", "")), Take},
		{"another's, released long ago", other, ClaimantOf(lease("", claimNow.Add(-time.Hour), "", "")), Take},
		{"another's, released just now (a rolling update)", other, ClaimantOf(lease("", claimNow, "", "")), Refuse},
		{"another's, watching the namespace", other, ClaimantOf(lease("pod-b", claimNow, "pod-b", "team-a,team-b")), Refuse},
		{"another's, watching all namespaces", other, ClaimantOf(lease("pod-b", claimNow, "pod-b", "*")), Refuse},
		{"another's, no longer watching the namespace", other, ClaimantOf(lease("pod-b", claimNow, "pod-b", "team-b")), Take},
		{"another's, the list is a former leader's", other, ClaimantOf(lease("pod-b2", claimNow, "pod-b", "team-b")), Refuse},
		{"a claim naming no Lease", "typo", ClaimantOf(nil), Take},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ClaimVerdict(tc.claim, me, tc.holder, "team-a", claimNow)
			if got.Kind != tc.want {
				t.Fatalf("verdict %v, want %v (%+v)", got.Kind, tc.want, got)
			}
			if got.Kind == Take && tc.claim != "" && got.Why == "" {
				t.Errorf("a take-over from %s says no why", tc.claim)
			}
		})
	}
}

func TestLeaseKey(t *testing.T) {
	t.Parallel()
	for identity, want := range map[string]bool{
		"ops/etcd-operator.cozystack.io": true, "ops/": false, "/x": false, "nosl": false, "Ops/x": false, "ops/x/y": false,
	} {
		if _, ok := leaseKey(identity); ok != want {
			t.Errorf("leaseKey(%q) valid = %v, want %v", identity, ok, want)
		}
	}
}

func claimScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = etcdv1.AddToScheme(s)
	return s
}

// A Lease is read once per memo period for any number of clusters it claims, and again after.
func TestClaimantReadsAreReused(t *testing.T) {
	t.Parallel()
	gets := 0
	api := fake.NewClientBuilder().WithScheme(claimScheme()).WithObjects(lease("pod-b", claimNow, "", "")).
		WithInterceptorFuncs(interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			gets++
			return c.Get(ctx, key, obj, opts...)
		}}).Build()
	now := claimNow
	cl := &Claims{Me: "ops-a/x", Reader: api, Now: func() time.Time { return now }}
	for range 100 {
		if c, err := cl.Claimant(context.Background(), "ops-b/etcd-operator.cozystack.io"); err != nil || !c.Found {
			t.Fatalf("claimant %+v, %v", c, err)
		}
	}
	if gets != 1 {
		t.Fatalf("%d Lease reads for 100 looks within the memo period, want 1", gets)
	}
	now = now.Add(claimantMemo)
	if _, err := cl.Claimant(context.Background(), "ops-b/etcd-operator.cozystack.io"); err != nil || gets != 2 {
		t.Fatalf("after the memo period: %d reads, %v; want 2", gets, err)
	}
}

// A Lease that cannot be read (no RBAC) is no Lease gone: the cluster is not taken.
func TestClaimantUnreadableIsAnError(t *testing.T) {
	t.Parallel()
	api := fake.NewClientBuilder().WithScheme(claimScheme()).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
			return apierrors.NewForbidden(coordinationv1.Resource("leases"), "x", nil)
		}}).Build()
	cl := &Claims{Me: "ops-a/x", Reader: api, Now: func() time.Time { return claimNow }}
	c := &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "db", Annotations: map[string]string{etcdv1.AnnotationOperator: "ops-b/y"}}}
	if _, err := cl.Verdict(context.Background(), c); err == nil {
		t.Fatal("a forbidden Lease read gave a verdict")
	}
}

// Of two operators taking one cluster from the copy they both read, only the first write
// succeeds; the second says it lost, and writes nothing.
func TestTakeLosesToAConcurrentClaim(t *testing.T) {
	t.Parallel()
	c := &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "db"}}
	api := fake.NewClientBuilder().WithScheme(claimScheme()).WithObjects(c).Build()
	key := types.NamespacedName{Namespace: "team-a", Name: "db"}
	readA, readB := &etcdv1.EtcdCluster{}, &etcdv1.EtcdCluster{}
	_ = api.Get(context.Background(), key, readA)
	_ = api.Get(context.Background(), key, readB)
	a, b := &Claims{Me: "ops-a/x"}, &Claims{Me: "ops-b/x"}
	if won, err := a.Take(context.Background(), api, readA); !won || err != nil {
		t.Fatalf("first take: %v, %v", won, err)
	}
	if won, err := b.Take(context.Background(), api, readB); won || err != nil {
		t.Fatalf("second take from a stale copy: won %v, %v; want a lost race and no error", won, err)
	}
	got := &etcdv1.EtcdCluster{}
	_ = api.Get(context.Background(), key, got)
	if claim := got.Annotations[etcdv1.AnnotationOperator]; claim != "ops-a/x" {
		t.Fatalf("claim %q, want the first taker's", claim)
	}
}

// The gate of the reconcilers of members, snapshots and defragmentations: only the claimant
// acts; a cluster that does not exist claims nothing; without claims everything is acted on.
func TestLeaveAlone(t *testing.T) {
	t.Parallel()
	mine := &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "mine", Annotations: map[string]string{etcdv1.AnnotationOperator: "ops-a/x"}}}
	theirs := &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "theirs", Annotations: map[string]string{etcdv1.AnnotationOperator: "ops-b/x"}}}
	unclaimed := &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "unclaimed"}}
	api := fake.NewClientBuilder().WithScheme(claimScheme()).WithObjects(mine, theirs, unclaimed).Build()
	cl := &Claims{Me: "ops-a/x"}
	for name, want := range map[string]bool{"mine": false, "theirs": true, "unclaimed": true, "gone": false} {
		leave, res, err := cl.LeaveAlone(context.Background(), api, "team-a", name)
		if err != nil || leave != want {
			t.Errorf("%s: leave alone %v, %v; want %v", name, leave, err, want)
		}
		if leave && res.RequeueAfter != ClaimLookAgain {
			t.Errorf("%s: left alone without a look again (%v)", name, res)
		}
	}
	var none *Claims
	if leave, _, _ := none.LeaveAlone(context.Background(), api, "team-a", "theirs"); leave {
		t.Error("without claims a cluster was left alone")
	}
}

// The leader publishes its namespaces beside its own holderIdentity, and the leader
// election's renewal (which writes the spec of the Lease it read) keeps them.
func TestPublishWatching(t *testing.T) {
	t.Parallel()
	l := lease("pod-b", claimNow, "", "")
	api := fake.NewClientBuilder().WithScheme(claimScheme()).WithObjects(l).Build()
	key := client.ObjectKeyFromObject(l)
	if err := PublishWatching(context.Background(), api, api, key, []string{"team-a", "team-b"}); err != nil {
		t.Fatal(err)
	}
	got := &coordinationv1.Lease{}
	_ = api.Get(context.Background(), key, got)
	c := ClaimantOf(got)
	if len(c.Watching) != 2 || c.Watching[0] != "team-a" || c.Watching[1] != "team-b" {
		t.Fatalf("published %v, want team-a,team-b", c.Watching)
	}
	if err := PublishWatching(context.Background(), api, api, key, nil); err != nil {
		t.Fatal(err)
	}
	_ = api.Get(context.Background(), key, got)
	if got.Annotations[etcdv1.AnnotationWatchNamespaces] != "*" || ClaimantOf(got).Watching != nil {
		t.Fatalf("all namespaces published as %q", got.Annotations[etcdv1.AnnotationWatchNamespaces])
	}
}

// OperatorConflict reports trouble by being True: its event is a Warning, as a False
// TLSReady's is; a True ReconcileSuspended's is Normal.
func TestEventTypeOfCondition(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cond metav1.Condition
		want string
	}{
		{metav1.Condition{Type: etcdv1.ConditionOperatorConflict, Status: metav1.ConditionTrue}, "Warning"},
		{metav1.Condition{Type: etcdv1.ConditionTLSReady, Status: metav1.ConditionFalse}, "Warning"},
		{metav1.Condition{Type: etcdv1.ConditionReconcileSuspended, Status: metav1.ConditionTrue}, "Normal"},
	} {
		if got := eventTypeOf(tc.cond); got != tc.want {
			t.Errorf("%s=%s: %s event, want %s", tc.cond.Type, tc.cond.Status, got, tc.want)
		}
	}
}

// A condition written from a copy older than the stored status (another operator's, whose
// cache lags the claimant's writes) does not put the older conditions back: the write
// conflicts and is dropped, for the next look to decide again.
func TestSetConditionFromAStaleCopyKeepsNewerConditions(t *testing.T) {
	t.Parallel()
	c := &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "db"}}
	api := fake.NewClientBuilder().WithScheme(claimScheme()).WithObjects(c).WithStatusSubresource(c).Build()
	stale := &etcdv1.EtcdCluster{}
	_ = api.Get(context.Background(), client.ObjectKeyFromObject(c), stale)
	fresh := stale.DeepCopy()
	fresh.Status.Conditions = []metav1.Condition{{Type: etcdv1.ConditionAvailable, Status: metav1.ConditionTrue, Reason: etcdv1.ReasonQuorumHealthy, LastTransitionTime: metav1.Now()}}
	if err := api.Status().Update(context.Background(), fresh); err != nil {
		t.Fatal(err)
	}
	refused := metav1.Condition{Type: etcdv1.ConditionOperatorConflict, Status: metav1.ConditionTrue, Reason: etcdv1.ReasonClaimedByAnotherOperator, Message: "m"}
	if err := SetCondition(context.Background(), api, nil, stale, refused); err != nil {
		t.Fatal(err)
	}
	got := &etcdv1.EtcdCluster{}
	_ = api.Get(context.Background(), client.ObjectKeyFromObject(c), got)
	if len(got.Status.Conditions) != 1 || got.Status.Conditions[0].Type != etcdv1.ConditionAvailable {
		t.Fatalf("conditions %+v after a write from a stale copy, want the newer Available alone", got.Status.Conditions)
	}
}
