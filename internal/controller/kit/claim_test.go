package kit

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
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

// selecting is l with the cluster selector sel published, by its holder unless l says
// another published.
func selecting(l *coordinationv1.Lease, sel string) *coordinationv1.Lease {
	if l.Annotations == nil {
		l.Annotations = map[string]string{etcdv1.AnnotationWatchNamespacesHolder: *l.Spec.HolderIdentity}
	}
	l.Annotations[etcdv1.AnnotationClusterSelector] = sel
	return l
}

// released is operator B's Lease as client-go's ReleaseOnCancel leaves it when its leader
// stops: no holder, a duration of one second from the release.
func released(at time.Time) *coordinationv1.Lease {
	l := lease("", at, "", "")
	l.Spec.LeaseDurationSeconds = ptr(int32(1))
	l.Spec.AcquireTime = &metav1.MicroTime{Time: at}
	return l
}

// missing is a claimant whose Lease this operator first saw missing at since.
func missing(since time.Time) Claimant { return Claimant{MissingSince: since} }

func TestClaimVerdict(t *testing.T) {
	t.Parallel()
	const me, other = "ops-a/etcd-operator.cozystack.io", "ops-b/etcd-operator.cozystack.io"
	alive := ClaimantOf(lease("pod-b", claimNow.Add(-time.Second), "", ""))
	for _, tc := range []struct {
		name      string
		claim     string
		unelected bool
		holder    Claimant
		now       time.Time
		want      VerdictKind
	}{
		{"unclaimed (a cluster from before claims)", "", false, Claimant{}, claimNow, Take},
		{"mine", me, false, Claimant{}, claimNow, Mine},
		{"another's, alive", other, false, alive, claimNow, Refuse},
		{"another's, expired less than the margin ago", other, false, ClaimantOf(lease("pod-b", claimNow.Add(-15*time.Second-ClaimMargin+time.Second), "", "")), claimNow, Refuse},
		{"another's, expired more than the margin ago", other, false, ClaimantOf(lease("pod-b", claimNow.Add(-15*time.Second-ClaimMargin-time.Second), "", "")), claimNow, Take},
		{"another's, released long ago", other, false, ClaimantOf(lease("", claimNow.Add(-time.Hour), "", "")), claimNow, Take},
		{"another's, released just now (a rolling update)", other, false, ClaimantOf(lease("", claimNow, "", "")), claimNow, Refuse},
		{"another's, watching the namespace", other, false, ClaimantOf(lease("pod-b", claimNow, "pod-b", "team-a,team-b")), claimNow, Refuse},
		{"another's, watching all namespaces", other, false, ClaimantOf(lease("pod-b", claimNow, "pod-b", "*")), claimNow, Refuse},
		{"another's, no longer watching the namespace", other, false, ClaimantOf(lease("pod-b", claimNow, "pod-b", "team-b")), claimNow, Take},
		{"another's, the list is a former leader's", other, false, ClaimantOf(lease("pod-b2", claimNow, "pod-b", "team-b")), claimNow, Refuse},
		{"a claim naming no Lease", "typo", false, ClaimantOf(nil), claimNow, Take},

		// Literal times. A Lease renewed at 12:00:00 for 15 s ends at 12:00:15; it may be
		// taken after 12:02:15.
		{"renewed, ended 12:00:15, now 12:02:15", other, false, ClaimantOf(lease("pod-b", time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC), "", "")), time.Date(2026, 12, 1, 12, 2, 15, 0, time.UTC), Refuse},
		{"renewed, ended 12:00:15, now 12:02:16", other, false, ClaimantOf(lease("pod-b", time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC), "", "")), time.Date(2026, 12, 1, 12, 2, 16, 0, time.UTC), Take},
		// Released by client-go at 12:00:00 (ended 12:00:01): its operator stopped, and
		// another takes its clusters once the margin is over, not before (a rolling update
		// hands over within it).
		{"released 12:00:00, now 12:00:01", other, false, ClaimantOf(released(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))), time.Date(2026, 12, 1, 12, 0, 1, 0, time.UTC), Refuse},
		{"released 12:00:00, now 12:02:01", other, false, ClaimantOf(released(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))), time.Date(2026, 12, 1, 12, 2, 1, 0, time.UTC), Refuse},
		{"released 12:00:00, now 12:02:02", other, false, ClaimantOf(released(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))), time.Date(2026, 12, 1, 12, 2, 2, 0, time.UTC), Take},
		// A Lease missing (its operator's first start, a Lease made again) is gone only
		// ClaimMargin after this operator first saw it missing.
		{"missing since 12:00:00, now 12:00:00", other, false, missing(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)), time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC), Refuse},
		{"missing since 12:00:00, now 12:02:00", other, false, missing(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)), time.Date(2026, 12, 1, 12, 2, 0, 0, time.UTC), Refuse},
		{"missing since 12:00:00, now 12:02:01", other, false, missing(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)), time.Date(2026, 12, 1, 12, 2, 1, 0, time.UTC), Take},

		// Without leader election nobody can tell this operator alive: it takes no claim of
		// another's, however dead, but takes unclaimed clusters and keeps its own.
		{"unelected, unclaimed", "", true, Claimant{}, claimNow, Take},
		{"unelected, mine", me, true, Claimant{}, claimNow, Mine},
		{"unelected, another's, alive", other, true, alive, claimNow, Refuse},
		{"unelected, another's, expired long ago", other, true, ClaimantOf(lease("pod-b", claimNow.Add(-time.Hour), "", "")), claimNow, Refuse},
		{"unelected, another's, missing long ago", other, true, missing(claimNow.Add(-time.Hour)), claimNow, Refuse},
		{"unelected, a claim naming no Lease", "typo", true, ClaimantOf(nil), claimNow, Refuse},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkVerdict(t, ClaimVerdict(tc.claim, me, tc.unelected, nil, tc.holder, "team-a", nil, tc.now), tc.claim, tc.unelected, tc.want)
		})
	}
}

// checkVerdict: got is of kind want, and a take-over or an unelected refusal says why.
func checkVerdict(t *testing.T, got Verdict, claim string, unelected bool, want VerdictKind) {
	t.Helper()
	if got.Kind != want {
		t.Fatalf("verdict %v, want %v (%+v)", got.Kind, want, got)
	}
	if got.Kind == Take && claim != "" && got.Why == "" {
		t.Errorf("a take-over from %s says no why", claim)
	}
	if unelected && got.Kind == Refuse && got.Why != WhyUnelected {
		t.Errorf("an unelected refusal says %q, want why", got.Why)
	}
}

// Sharding by label selector: a cluster this operator's selector does not match is none of
// its business, whoever claims it; one claimed by an operator whose published selector does
// not match it is taken over; a published selector that does not parse keeps its clusters.
func TestClaimVerdictWithSelectors(t *testing.T) {
	t.Parallel()
	const me, other = "ops-a/etcd-operator.cozystack.io", "ops-b/etcd-operator.cozystack.io"
	shardA, shardB := labels.Set{"shard": "a"}, labels.Set{"shard": "b"}
	publishing := func(sel string) Claimant { return ClaimantOf(selecting(lease("pod-b", claimNow, "", ""), sel)) }
	for _, tc := range []struct {
		name      string
		claim     string
		unelected bool
		mine      string // my --cluster-selector
		labels    labels.Set
		holder    Claimant
		want      VerdictKind
	}{
		{"unclaimed, selected", "", false, "shard=a", shardA, Claimant{}, Take},
		{"unclaimed, not selected", "", false, "shard=a", shardB, Claimant{}, Ignore},
		{"unclaimed, unlabelled, not selected", "", false, "shard=a", nil, Claimant{}, Ignore},
		{"unclaimed, unelected, not selected", "", true, "shard=a", shardB, Claimant{}, Ignore},
		{"mine, selected", me, false, "shard=a", shardA, Claimant{}, Mine},
		{"mine, its labels moved it to another shard", me, false, "shard=a", shardB, Claimant{}, Ignore},
		{"another's, not selected, its claimant gone", other, false, "shard=a", shardB, ClaimantOf(nil), Ignore},
		{"another's, its published selector no longer matches", other, false, "shard=b", shardB, publishing("shard=a"), Take},
		{"another's, its set-based selector no longer matches", other, false, "", labels.Set{"tier": "bronze"}, publishing("tier in (gold,silver)"), Take},
		{"another's, its published selector matches", other, false, "", shardA, publishing("shard=a"), Refuse},
		{"another's, it publishes no selector", other, false, "shard=b", shardB, publishing(""), Refuse},
		{"another's, its published selector does not parse", other, false, "shard=b", shardB, publishing("tier in (gold"), Refuse},
		{"another's, the selector is a former leader's", other, false, "shard=b", shardB, ClaimantOf(selecting(lease("pod-b2", claimNow, "pod-b", "*"), "shard=a")), Refuse},
		{"another's, selected but its namespace no longer watched", other, false, "", shardA, ClaimantOf(selecting(lease("pod-b", claimNow, "pod-b", "team-b"), "shard=a")), Take},
		{"unelected, another's no longer matching", other, true, "shard=b", shardB, publishing("shard=a"), Refuse},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mine, err := labels.Parse(tc.mine)
			if err != nil {
				t.Fatal(err)
			}
			checkVerdict(t, ClaimVerdict(tc.claim, me, tc.unelected, mine, tc.holder, "team-a", tc.labels, claimNow), tc.claim, tc.unelected, tc.want)
		})
	}
}

// A claimant's why names the selector it serves, for the take-over's event.
func TestServesSaysWhichSelector(t *testing.T) {
	t.Parallel()
	c := ClaimantOf(selecting(lease("pod-b", claimNow, "", ""), "shard=a"))
	if serves, why := c.Serves("team-a", labels.Set{"shard": "b"}, claimNow); serves || why != "it serves only clusters matching shard=a" {
		t.Fatalf("serves %v, why %q", serves, why)
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

// A missing Lease is remembered missing since the first read that missed it, through the
// reads after, and forgotten once it is seen: missing again, it is so from then.
func TestClaimantMissingSince(t *testing.T) {
	t.Parallel()
	api := fake.NewClientBuilder().WithScheme(claimScheme()).Build()
	now := claimNow
	cl := &Claims{Me: "ops-a/x", Reader: api, Now: func() time.Time { return now }}
	lookAfter := func(gap time.Duration, want time.Time) {
		t.Helper()
		now = now.Add(gap)
		c, err := cl.Claimant(context.Background(), "ops-b/etcd-operator.cozystack.io")
		if err != nil || !c.MissingSince.Equal(want) {
			t.Fatalf("at %s: missing since %s (%v), want %s", now, c.MissingSince, err, want)
		}
	}
	look := func(want time.Time) {
		t.Helper()
		lookAfter(time.Minute, want)
	}
	first := claimNow.Add(time.Minute)
	look(first)
	look(first)
	look(first)
	l := lease("pod-b", now, "", "")
	if err := api.Create(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	look(time.Time{})
	if err := api.Delete(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	again := now.Add(time.Minute)
	look(again)
	look(again)
	// Looks more than ClaimMargin apart: the Lease may have been back in between.
	lookAfter(ClaimMargin+time.Second, now.Add(ClaimMargin+time.Second))
	if c, _ := cl.Claimant(context.Background(), "typo"); !c.MissingSince.IsZero() {
		t.Fatalf("a claim naming no Lease missing since %s, want for ever", c.MissingSince)
	}
}

// forbiddenLeases is an API server this operator may not read Leases from (no RBAC).
func forbiddenLeases() client.Client {
	return fake.NewClientBuilder().WithScheme(claimScheme()).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
			return apierrors.NewForbidden(coordinationv1.Resource("leases"), "x", nil)
		}}).Build()
}

// claimedByB is a cluster operator "ops-b/y" claims.
func claimedByB() *etcdv1.EtcdCluster {
	return &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "db", Annotations: map[string]string{etcdv1.AnnotationOperator: "ops-b/y"}}}
}

// An operator without leader election reads no Lease to refuse a cluster of another's.
func TestUnelectedRefusesWithoutReadingLeases(t *testing.T) {
	t.Parallel()
	api := forbiddenLeases()
	cl := &Claims{Me: "ops-a/x", Unelected: true, Reader: api, Now: func() time.Time { return claimNow }}
	c := claimedByB()
	if v, err := cl.Verdict(context.Background(), c); err != nil || v.Kind != Refuse || v.Why != WhyUnelected {
		t.Fatalf("verdict %+v, %v; want a refusal saying why", v, err)
	}
}

// A Lease that cannot be read (no RBAC) is no Lease gone: the cluster is not taken.
func TestClaimantUnreadableIsAnError(t *testing.T) {
	t.Parallel()
	api := forbiddenLeases()
	cl := &Claims{Me: "ops-a/x", Reader: api, Now: func() time.Time { return claimNow }}
	c := claimedByB()
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

// An operator reads no Lease for a cluster its selector does not match: it ignores it,
// whoever claims it.
func TestUnselectedIsIgnoredWithoutReadingLeases(t *testing.T) {
	t.Parallel()
	cl := &Claims{Me: "ops-a/x", Selector: labels.SelectorFromSet(labels.Set{"shard": "a"}), Reader: forbiddenLeases(), Now: func() time.Time { return claimNow }}
	if v, err := cl.Verdict(context.Background(), claimedByB()); err != nil || v.Kind != Ignore || v.Holder != "ops-b/y" {
		t.Fatalf("verdict %+v, %v; want Ignore of B's claim", v, err)
	}
}

// With a selector, a cluster claimed by this operator is its own only while the selector
// matches it: once its labels move it to another shard, every gate leaves it alone.
func TestMineOnlyWhileSelected(t *testing.T) {
	t.Parallel()
	claimed := func(name string, lbls map[string]string) *etcdv1.EtcdCluster {
		return &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name, Labels: lbls,
			Annotations: map[string]string{etcdv1.AnnotationOperator: "ops-a/x"}}}
	}
	clusters := map[string]*etcdv1.EtcdCluster{
		"selected": claimed("selected", map[string]string{"shard": "a"}),
		"moved":    claimed("moved", map[string]string{"shard": "b"}),
		"bare":     claimed("bare", nil),
	}
	api := fake.NewClientBuilder().WithScheme(claimScheme()).WithObjects(clusters["selected"], clusters["moved"], clusters["bare"]).Build()
	cl := &Claims{Me: "ops-a/x", Selector: labels.SelectorFromSet(labels.Set{"shard": "a"})}
	for name, want := range map[string]bool{"selected": true, "moved": false, "bare": false} {
		if got := cl.Mine(clusters[name]); got != want {
			t.Errorf("%s: Mine %v, want %v", name, got, want)
		}
		if got := cl.Acts(context.Background(), clusters[name]); got != want {
			t.Errorf("%s: Acts %v, want %v", name, got, want)
		}
		if leave, _, err := cl.LeaveAlone(context.Background(), api, "team-a", name); err != nil || leave == want {
			t.Errorf("%s: leave alone %v, %v; want %v", name, leave, err, !want)
		}
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

// The leader publishes its namespaces and its cluster selector beside its own
// holderIdentity, and the leader election's renewal (which writes the spec of the Lease it
// read) keeps them.
func TestPublishScope(t *testing.T) {
	t.Parallel()
	l := lease("pod-b", claimNow, "", "")
	api := fake.NewClientBuilder().WithScheme(claimScheme()).WithObjects(l).Build()
	key := client.ObjectKeyFromObject(l)
	sel, err := labels.Parse("shard=a,tier in (gold,silver)")
	if err != nil {
		t.Fatal(err)
	}
	if err := PublishScope(context.Background(), api, api, key, []string{"team-a", "team-b"}, sel); err != nil {
		t.Fatal(err)
	}
	got := &coordinationv1.Lease{}
	_ = api.Get(context.Background(), key, got)
	c := ClaimantOf(got)
	if len(c.Watching) != 2 || c.Watching[0] != "team-a" || c.Watching[1] != "team-b" {
		t.Fatalf("published %v, want team-a,team-b", c.Watching)
	}
	checkPublishedSelector(t, got, sel)
	if err := PublishScope(context.Background(), api, api, key, nil, nil); err != nil {
		t.Fatal(err)
	}
	_ = api.Get(context.Background(), key, got)
	if got.Annotations[etcdv1.AnnotationWatchNamespaces] != "*" || ClaimantOf(got).Watching != nil {
		t.Fatalf("all namespaces published as %q", got.Annotations[etcdv1.AnnotationWatchNamespaces])
	}
	checkPublishedSelector(t, got, nil)
}

// checkPublishedSelector: l publishes sel (nil: all clusters, written as "" over a former
// selector), read back as the same selector.
func checkPublishedSelector(t *testing.T, l *coordinationv1.Lease, sel labels.Selector) {
	t.Helper()
	v, ok := l.Annotations[etcdv1.AnnotationClusterSelector]
	got := ClaimantOf(l).Selector
	switch {
	case sel == nil && (!ok || v != "" || got != nil):
		t.Fatalf("all clusters published as %q (present %v), read back as %v", v, ok, got)
	case sel != nil && (got == nil || v != sel.String() || got.String() != sel.String()):
		t.Fatalf("published selector %q, read back as %v; want %s", v, got, sel)
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
