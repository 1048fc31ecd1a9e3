package kit

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

// Claims: which operator acts on a cluster. Several operators (shards) may run in one
// Kubernetes cluster; each names itself by its leader election Lease ("<namespace>/<name>")
// and claims the EtcdClusters it manages with etcdv1.AnnotationOperator. The claim is
// written once; its liveness is the claimant's own Lease, which its leader renews anyway, so
// clusters at rest cost no write. Only the EtcdCluster reconciler takes or refuses a claim;
// the others act only on a cluster that carries their own (Claims.Mine).

// ClaimMargin is how long a claimant's Lease must have expired (or been released, or been
// seen missing) before another operator takes its clusters: longer than a rolling update's
// hand-over or a Pod rescheduled after its node failed, and than any clock skew between the
// operators, so that a claimant that is merely restarting keeps its clusters.
const ClaimMargin = 2 * time.Minute

// claimantMemo is how long a Lease read is reused: a refused cluster looked at again, and
// the clusters of one namespace looked at one after the other, read each claimant's Lease at
// most this often, whatever their number. Much shorter than ClaimMargin, so a reused read
// cannot make a claimant look expired long enough to lose its clusters.
const claimantMemo = 10 * time.Second

// ClaimLookAgain is when a reconciler that left an object alone because its cluster is not
// (yet) this operator's looks at it again, for the objects no change of the cluster wakes.
const ClaimLookAgain = time.Minute

// Identity is an operator's name in claims: its leader election Lease.
func Identity(leaseNamespace, leaseName string) string {
	return leaseNamespace + "/" + leaseName
}

// leaseKey is the Lease an identity names; false when it names none (a claim written by
// hand with a typo), which counts as a claimant whose Lease is gone for good: none can ever
// appear.
func leaseKey(identity string) (types.NamespacedName, bool) {
	ns, name, ok := strings.Cut(identity, "/")
	if !ok || len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0 {
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: ns, Name: name}, true
}

// Claimant is what an operator's Lease says of it.
type Claimant struct {
	// Found: the Lease exists.
	Found bool
	// MissingSince is when this operator first saw the Lease missing, in the reads since which
	// it has not seen it: a Lease is missing for a moment at its operator's first start, or
	// deleted and made again. Zero for a Lease found, and for one that cannot exist (a claim
	// naming no Lease), which counts as missing for ever.
	MissingSince time.Time
	// Holder is the Lease's holderIdentity: the leader's, "" when none holds it (released).
	Holder string
	// Until is when the Lease ends unless renewed: renewTime + leaseDurationSeconds.
	Until time.Time
	// Watching are the namespaces its current leader published (AnnotationWatchNamespaces),
	// nil when it watches all of them or did not say.
	Watching []string
	// Selector is the label selector of the clusters its current leader published
	// (AnnotationClusterSelector), nil when it serves all of them, did not say, or said
	// something that does not parse: it then keeps its clusters.
	Selector labels.Selector
}

// ClaimantOf reads an operator's Lease; nil is a Lease that does not exist.
func ClaimantOf(lease *coordinationv1.Lease) Claimant {
	if lease == nil {
		return Claimant{}
	}
	c := Claimant{Found: true}
	if h := lease.Spec.HolderIdentity; h != nil {
		c.Holder = *h
	}
	if lease.Spec.RenewTime != nil && lease.Spec.LeaseDurationSeconds != nil {
		c.Until = lease.Spec.RenewTime.Add(time.Duration(*lease.Spec.LeaseDurationSeconds) * time.Second)
	}
	// What a former leader wrote may be out of date: the current one may serve more.
	if c.Holder == "" || lease.Annotations[etcdv1.AnnotationWatchNamespacesHolder] != c.Holder {
		return c
	}
	if published := lease.Annotations[etcdv1.AnnotationWatchNamespaces]; published != "" && published != "*" {
		c.Watching = strings.Split(published, ",")
	}
	c.Selector = publishedSelector(lease.Annotations[etcdv1.AnnotationClusterSelector])
	return c
}

// publishedSelector is the selector an AnnotationClusterSelector value says: nil (all
// clusters) for none, and for one that does not parse (written by hand, or by a version that
// writes selectors this one cannot read), so that its claimant keeps its clusters.
func publishedSelector(value string) labels.Selector {
	sel, err := labels.Parse(value)
	if err != nil || sel.Empty() {
		return nil
	}
	return sel
}

// Serves: the claimant is alive (its Lease held, or expired, released or missing less than
// ClaimMargin ago), watches namespace and selects a cluster labelled lbls (or did not say it
// does not). Otherwise why says what it is not, for the event of a take-over.
func (c Claimant) Serves(namespace string, lbls labels.Set, now time.Time) (bool, string) {
	switch {
	case !c.Found && c.MissingSince.IsZero():
		return false, "its claim names no leader election Lease"
	case !c.Found && now.After(c.MissingSince.Add(ClaimMargin)):
		return false, fmt.Sprintf("its leader election Lease has been missing since %s, more than %s", c.MissingSince.UTC().Format(time.RFC3339), ClaimMargin)
	case !c.Found:
		return true, ""
	case now.After(c.Until.Add(ClaimMargin)):
		return false, fmt.Sprintf("its leader election Lease ended at %s, more than %s ago", c.Until.UTC().Format(time.RFC3339), ClaimMargin)
	case c.Watching != nil && !slices.Contains(c.Watching, namespace):
		return false, fmt.Sprintf("it watches only namespaces %s", strings.Join(c.Watching, ","))
	case c.Selector != nil && !c.Selector.Matches(lbls):
		return false, fmt.Sprintf("it serves only clusters matching %s", c.Selector)
	}
	return true, ""
}

// VerdictKind is what an operator does about a cluster's claim.
type VerdictKind int

const (
	// Mine: the cluster carries this operator's claim; it acts.
	Mine VerdictKind = iota
	// Take: the cluster is unclaimed or its claimant does not serve it; this operator writes
	// its own claim, and acts from the next look on.
	Take
	// Refuse: another operator, alive and watching the namespace, claims the cluster; this
	// one does nothing to it but say so.
	Refuse
	// Ignore: this operator's --cluster-selector does not match the cluster: it is none of
	// its business, whoever claims it (itself included, before the cluster's labels changed).
	// It writes nothing, neither a claim nor a condition, and leaves its own claim for the
	// operator whose selector matches to take over.
	Ignore
)

// Verdict is a decision on a cluster's claim.
type Verdict struct {
	Kind VerdictKind
	// Holder is the claim found ("" when none).
	Holder string
	// Why a take is allowed (the claimant's state; "" for an unclaimed cluster), or why a
	// claimant that may be gone is refused all the same ("" when it is alive).
	Why string
}

// WhyUnelected is a Verdict's Why when an operator without leader election refuses a
// cluster: the others cannot tell whether it is alive, so it must not take their clusters.
const WhyUnelected = "this operator runs without leader election (--leader-elect=false): " +
	"no Lease tells the other operators whether it is alive, so it takes no cluster another operator claims"

// ClaimVerdict decides on a cluster in namespace labelled lbls claimed by claim ("" when
// unclaimed), seen by operator me, elected or not (unelected), whose --cluster-selector is
// selector (nil: all); holder is what the claimant's Lease says (unread for an unclaimed
// cluster, one of me's, one me does not select, or when unelected).
func ClaimVerdict(claim, me string, unelected bool, selector labels.Selector, holder Claimant, namespace string, lbls labels.Set, now time.Time) Verdict {
	switch {
	case !selects(selector, lbls):
		return Verdict{Kind: Ignore, Holder: claim}
	case claim == "":
		return Verdict{Kind: Take}
	case claim == me:
		return Verdict{Kind: Mine, Holder: claim}
	case unelected:
		return Verdict{Kind: Refuse, Holder: claim, Why: WhyUnelected}
	}
	if serves, why := holder.Serves(namespace, lbls, now); !serves {
		return Verdict{Kind: Take, Holder: claim, Why: why}
	}
	return Verdict{Kind: Refuse, Holder: claim}
}

// selects: selector (nil: all) matches a cluster labelled lbls.
func selects(selector labels.Selector, lbls labels.Set) bool {
	return selector == nil || selector.Matches(lbls)
}

// Claims is one operator's side of the claims: its identity and the Leases of the others it
// has read lately. A nil *Claims claims nothing and acts on every cluster (tests, and
// reconcilers built without one).
type Claims struct {
	// Me is this operator's identity (Identity).
	Me string
	// Unelected: this operator runs without leader election, so it has no Lease by which the
	// others could tell it alive; it takes no cluster another operator claims.
	Unelected bool
	// Selector is this operator's --cluster-selector, nil for all clusters: one it does not
	// match is none of its business (Ignore), even under its own claim.
	Selector labels.Selector
	// Reader reads Leases from the API server: the manager's cache is limited to the watched
	// namespaces, and the claimants' Leases are in theirs.
	Reader client.Reader
	// Now is the clock; time.Now when nil.
	Now func() time.Time

	mu    sync.Mutex
	reads map[string]claimantRead
}

type claimantRead struct {
	at       time.Time
	claimant Claimant
}

func (cl *Claims) now() time.Time {
	if cl.Now != nil {
		return cl.Now()
	}
	return time.Now()
}

// Mine: the cluster carries this operator's claim and matches its selector (always, without
// claims). A cluster whose labels moved it to another operator's selector is not, though
// the claim still names this one until the other takes it over.
func (cl *Claims) Mine(c *etcdv1.EtcdCluster) bool {
	return cl == nil || (c.Annotations[etcdv1.AnnotationOperator] == cl.Me && selects(cl.Selector, c.Labels))
}

// Acts is Mine for a reconciler that acts on the cluster itself (its defragmentation
// schedule, its NOSPACE remediation), saying at V(1) why it leaves the cluster alone. The
// claim's write wakes such reconcilers (they watch EtcdClusters).
func (cl *Claims) Acts(ctx context.Context, c *etcdv1.EtcdCluster) bool {
	if cl.Mine(c) {
		return true
	}
	log.FromContext(ctx).V(1).Info("the cluster is not this operator's: nothing done", "operator", cl.Me, "claim", c.Annotations[etcdv1.AnnotationOperator], "selected", selects(cl.Selector, c.Labels))
	return false
}

// LeaveAlone is the gate of a reconciler of an object that names its cluster (a member, a
// snapshot, a schedule, a defragmentation): true when the cluster, read from reader (the
// cache), is not this operator's, or could not be read (err), with when to look again. A
// cluster that does not exist claims nothing: what is left of it (a snapshot kept after it)
// is acted on.
func (cl *Claims) LeaveAlone(ctx context.Context, reader client.Reader, namespace, name string) (bool, reconcile.Result, error) {
	if cl == nil {
		return false, reconcile.Result{}, nil
	}
	c := &etcdv1.EtcdCluster{}
	if err := reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, c); err != nil {
		return !apierrors.IsNotFound(err), reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if cl.Acts(ctx, c) {
		return false, reconcile.Result{}, nil
	}
	return true, reconcile.Result{RequeueAfter: ClaimLookAgain}, nil
}

// Verdict decides on the cluster's claim, reading the claimant's Lease when it is another's.
func (cl *Claims) Verdict(ctx context.Context, c *etcdv1.EtcdCluster) (Verdict, error) {
	claim := c.Annotations[etcdv1.AnnotationOperator]
	var holder Claimant
	if claim != "" && claim != cl.Me && !cl.Unelected && selects(cl.Selector, c.Labels) {
		var err error
		if holder, err = cl.Claimant(ctx, claim); err != nil {
			return Verdict{}, err
		}
	}
	return ClaimVerdict(claim, cl.Me, cl.Unelected, cl.Selector, holder, c.Namespace, c.Labels, cl.now()), nil
}

// Claimant reads the Lease of the operator identity names, reusing a read younger than
// claimantMemo, and remembering since when the Lease is missing (Claimant.MissingSince). An
// error other than NotFound (no RBAC to read it) is returned: the caller retries rather than
// take a cluster whose claimant it cannot see.
func (cl *Claims) Claimant(ctx context.Context, identity string) (Claimant, error) {
	now := cl.now()
	cl.mu.Lock()
	read, ok := cl.reads[identity]
	cl.mu.Unlock()
	if ok && now.Sub(read.at) < claimantMemo {
		return read.claimant, nil
	}
	key, valid := leaseKey(identity)
	var claimant Claimant
	if valid {
		lease := &coordinationv1.Lease{}
		err := cl.Reader.Get(ctx, key, lease)
		switch {
		case err == nil:
			claimant = ClaimantOf(lease)
		case !apierrors.IsNotFound(err):
			return Claimant{}, fmt.Errorf("reading the leader election Lease %s of operator %s, which claims the cluster: %w", key, identity, err)
		default:
			claimant.MissingSince = missingSince(read, ok, now)
		}
	}
	cl.mu.Lock()
	if cl.reads == nil {
		cl.reads = map[string]claimantRead{}
	}
	cl.reads[identity] = claimantRead{at: now, claimant: claimant}
	cl.mu.Unlock()
	return claimant, nil
}

// missingSince is when a Lease read missing at now has been missing since: the time of the
// first of the reads since it was last seen (before, when there was one, ok). Reads more
// than ClaimMargin apart do not make one absence: the Lease may have come back and gone
// again in between, so the count starts again.
func missingSince(before claimantRead, ok bool, now time.Time) time.Time {
	c := before.claimant
	if ok && !c.Found && !c.MissingSince.IsZero() && now.Sub(before.at) <= ClaimMargin {
		return c.MissingSince
	}
	return now
}

// Take writes this operator's claim on the cluster, with the resourceVersion read: of two
// operators taking it at once, or an operator taking it from a stale copy, only one write
// succeeds. False on a conflict: the caller does nothing in this look, and the next one (the
// change brings it) decides again.
func (cl *Claims) Take(ctx context.Context, w client.Writer, c *etcdv1.EtcdCluster) (bool, error) {
	before := c.DeepCopy()
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	c.Annotations[etcdv1.AnnotationOperator] = cl.Me
	err := w.Patch(ctx, c, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
	if apierrors.IsConflict(err) {
		return false, nil
	}
	return err == nil, err
}

// PublishScope writes the namespaces this operator watches (none: all) and its cluster
// selector (nil: all) on its own Lease, beside the leader's holderIdentity, so that another
// operator may take over its claims in a namespace it stopped watching (Claimant.Watching)
// or on a cluster it no longer selects (Claimant.Selector). Run once by each elected leader.
// A conflict with the leader election's own renewal is retried; the renewal, which rewrites
// only the Lease's spec, keeps the annotations (client-go updates the Lease it read).
func PublishScope(ctx context.Context, reader client.Reader, w client.Writer, lease types.NamespacedName, namespaces []string, selector labels.Selector) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		l := &coordinationv1.Lease{}
		if err := reader.Get(ctx, lease, l); err != nil {
			return err
		}
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
			return fmt.Errorf("the Lease %s has no holder: this operator is not its leader", lease)
		}
		if l.Annotations == nil {
			l.Annotations = map[string]string{}
		}
		l.Annotations[etcdv1.AnnotationWatchNamespaces] = watchingValue(namespaces)
		l.Annotations[etcdv1.AnnotationClusterSelector] = selectorValue(selector)
		l.Annotations[etcdv1.AnnotationWatchNamespacesHolder] = *l.Spec.HolderIdentity
		return w.Update(ctx, l)
	})
}

// watchingValue is AnnotationWatchNamespaces' value for namespaces: "*" for all.
func watchingValue(namespaces []string) string {
	if len(namespaces) == 0 {
		return "*"
	}
	return strings.Join(namespaces, ",")
}

// selectorValue is AnnotationClusterSelector's value for selector: "" for all. Written even
// then, over what a former leader with a selector published.
func selectorValue(selector labels.Selector) string {
	if selector == nil {
		return ""
	}
	return selector.String()
}
