// Package controller holds the operator's reconcilers: EtcdCluster decides membership, one
// change at a time; EtcdMember realizes one member (PVC, Pod) and removes it from etcd before
// its data goes.
package cluster

import (
	"context"
	"errors"
	"slices"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller/children"
	"github.com/quorumkeeper/etcd-operator/internal/controller/children/retention"
	"github.com/quorumkeeper/etcd-operator/internal/controller/kit"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// Reconciler reconciles EtcdCluster objects.
type Reconciler struct {
	client.Client
	Recorder  events.EventRecorder
	NewClient kit.ClientFactory
	// PodOptions must equal the member controller's: Pods are compared with what it builds.
	PodOptions specs.PodOptions
	// APIReader reads around the cache where a stale answer could restart two members at
	// once; the client when nil.
	APIReader client.Reader
	// Now is the clock of the progress deadline; time.Now when nil.
	Now func() time.Time
	// ClusterDomain is the Kubernetes cluster's DNS domain, for the fully qualified names in
	// certificates; cluster.local when empty.
	ClusterDomain string
	// Clients keeps one etcd client per cluster between reconciles; without it every
	// reconcile opens a client through NewClient and closes it.
	Clients *kit.ClientCache
	// MaxConcurrentReconciles is how many clusters are reconciled at once; 1 when 0.
	MaxConcurrentReconciles int
	// OperatorNamespace is where the operator runs, which spec.networkPolicy admits to the
	// client port; "" admits the operator's Pods from any namespace.
	OperatorNamespace string
	// RollSlots caps how many clusters restart members for a changed Pod spec at once; no
	// cap when nil.
	RollSlots *kit.RollSlots
	// Claims says which clusters are this operator's (several operators may watch one
	// namespace); it acts on every cluster when nil.
	Claims *kit.Claims

	stepBackoff, healthLagBackoff kit.Backoff
}

// openClient is the cluster's etcd client: the cached one when there is a cache.
func (r *Reconciler) openClient(ctx context.Context, c *etcdv1.EtcdCluster, endpoints []string) (etcd.Client, error) {
	if r.Clients != nil {
		return r.Clients.Client(ctx, c, endpoints)
	}
	return r.NewClient(ctx, c, endpoints)
}

func (r *Reconciler) forgetClient(key types.NamespacedName) {
	if r.Clients != nil {
		r.Clients.Forget(key)
	}
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// +kubebuilder:rbac:groups=etcd-operator.cozystack.io,resources=etcdclusters,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=etcd-operator.cozystack.io,resources=etcdclusters/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=etcd-operator.cozystack.io,resources=etcdmembers,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=etcd-operator.cozystack.io,resources=etcdmembers/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=etcd-operator.cozystack.io,resources=etcdsnapshots,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;delete
// The child objects' own rules (Services, PodDisruptionBudgets, NetworkPolicies, cert-manager
// Certificates and Issuers, Secrets) are in their packages under children.
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// Other operators' leader election Leases, in their namespaces, say whether the operator that
// claims a cluster is alive (kit.Claims); the operator's own Lease is written under the leader
// election's Role.
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get

// ensurePolicies keeps the PodDisruptionBudget and the NetworkPolicy in line. An object the
// operator may not have (someone else's, refused by the API server) comes back as degraded,
// for the status, and the rest still runs; any other error stops the reconcile.
func ensurePolicies(ctx context.Context, c *etcdv1.EtcdCluster, policies []children.Component, facts kit.Facts) (degraded, err error) {
	for _, comp := range policies {
		if err := comp.Sync(ctx, c, facts); err != nil {
			if !isDegradedWait(err) {
				return nil, err
			}
			degraded = firstErr(degraded, err)
		}
	}
	return degraded, nil
}

// Reconcile brings one cluster one step closer to its spec.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	cluster := &etcdv1.EtcdCluster{}
	if err := r.Get(ctx, req.NamespacedName, cluster); err != nil {
		if apierrors.IsNotFound(err) {
			r.forgetCluster(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	set := r.children()
	if done, res, err := r.beforeLookClaimed(ctx, req, cluster, set.Retention); done {
		return res, err
	}
	// A Service that is someone else's or that the API server refuses holds the cluster
	// back (members need their DNS names) and is reported in the status, not only logged.
	blocked := set.Services.Sync(ctx, cluster, kit.Facts{})
	if blocked != nil && !isDegradedWait(blocked) {
		return ctrl.Result{}, blocked
	}
	members, err := r.listMembers(ctx, cluster)
	if err != nil {
		return ctrl.Result{}, err
	}
	view, err := r.observe(ctx, cluster, members)
	if err != nil {
		return ctrl.Result{}, err
	}
	defer r.closeView(req.NamespacedName, view)
	if err := r.noteOwnCAs(ctx, cluster, view); err != nil {
		return ctrl.Result{}, err
	}
	facts := view.childFacts()
	if err := r.tendPVCs(ctx, cluster, view, set.Retention, facts); err != nil {
		return ctrl.Result{}, err
	}
	// etcd drops a membership change that overlaps another; a deadline turns that silence
	// into an error the next reconcile retries, after looking again.
	stepCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	progressed, stepErr := false, blocked
	if blocked == nil {
		progressed, stepErr = r.secureStep(stepCtx, cluster, view, set)
		// Growing volumes changes no membership: it is no step, and needs no quorum. Its
		// failure is retried as a step's is.
		var growErr error
		view.volumes, growErr = set.Volumes.Sync(ctx, cluster, facts)
		stepErr = firstErr(stepErr, growErr)
	}
	degraded, err := ensurePolicies(ctx, cluster, set.Policies, facts)
	if err != nil {
		return ctrl.Result{}, err
	}
	stepErr = firstErr(stepErr, degraded)
	if err := r.updateStatus(ctx, cluster, view, stepResult{progressed: progressed, err: stepErr}); err != nil {
		return ctrl.Result{}, err
	}
	if stepErr != nil {
		after := r.retryAfter(req.NamespacedName, stepErr)
		log.FromContext(ctx).Info("step not done yet", "reason", stepErr.Error(), "retryAfter", after.String())
		return ctrl.Result{RequeueAfter: after}, nil
	}
	r.forgetFailures(req.NamespacedName)
	if progressed {
		// A change to etcd alone (a promotion) changes no object the controller watches: look
		// again soon to record its effect and take the next step (the next learner of a
		// scale-out by more than one).
		return ctrl.Result{RequeueAfter: afterEtcdChange}, nil
	}
	return ctrl.Result{RequeueAfter: sooner(sooner(r.lookAgainAfter(cluster, view), view.discardedRetry), view.caRotationRetry)}, nil
}

// tendPVCs sets the members' PVCs' owners per the retention policy and releases the kept
// data of discarded members whose time has come: neither needs etcd nor is a step.
func (r *Reconciler) tendPVCs(ctx context.Context, c *etcdv1.EtcdCluster, v *clusterView, keeper *retention.Component, facts kit.Facts) error {
	if err := keeper.Sync(ctx, c, facts); err != nil {
		return err
	}
	return r.releaseDiscardedData(ctx, c, v)
}

// afterEtcdChange is how soon a cluster is looked at again after a step that changed etcd
// alone: the change is committed when the call returns.
const afterEtcdChange = 100 * time.Millisecond

// sooner is the shorter of two waits, a zero b counting as none.
func sooner(a, b time.Duration) time.Duration {
	if b > 0 && b < a {
		return b
	}
	return a
}

// beforeLookClaimed decides the cluster's claim, then, on a cluster of this operator's, what
// comes before any look (beforeLook). True when the reconcile ends there.
func (r *Reconciler) beforeLookClaimed(ctx context.Context, req ctrl.Request, c *etcdv1.EtcdCluster, keeper *retention.Component) (bool, ctrl.Result, error) {
	if done, res, err := r.claim(ctx, c); done {
		return true, res, err
	}
	done, err := r.beforeLook(ctx, req, c, keeper)
	return done || err != nil, ctrl.Result{}, err
}

// beforeLook is what comes before any look at the cluster: its deletion, a suspension, the
// marks every step needs. True when the reconcile ends there.
func (r *Reconciler) beforeLook(ctx context.Context, req ctrl.Request, c *etcdv1.EtcdCluster, keeper *retention.Component) (bool, error) {
	if !c.DeletionTimestamp.IsZero() {
		r.forgetCluster(req.NamespacedName)
		// Garbage collection removes what it owns, member finalizers let go; PVCs to be
		// retained are released first. A conflict: the cluster or one of its PVCs changed
		// since it was read, and that change brings the next reconcile.
		return true, kit.IgnoreConflict(keeper.Finalize(ctx, c))
	}
	if c.ReconcileSuspended() {
		// Hands off, for a repair by hand: no look at etcd, no step, no status but this.
		return true, kit.SetCondition(ctx, r.Client, r.Recorder, c, suspendedCondition())
	}
	if err := r.dropSuspendedCondition(ctx, c); err != nil {
		return true, err
	}
	return r.ensureMarks(ctx, c, keeper)
}

// lookAgainAfter is when to look at a cluster that took no step. A member whose Pod is Ready
// may not answer etcd's health check yet (its name not resolvable yet, its first request
// still in flight): when it does, no object the operator watches changes, and a look a minute
// later would leave the status short of a ready member that long (a 5-member bootstrap
// settled 60 s late so). Such a member is looked at again soon, backing off while it stays
// so. Otherwise nothing in Kubernetes changes when a member is removed from etcd by hand or
// stops answering while its Pod stays up; a slow look again notices. A look writes nothing
// unless the status changed.
func (r *Reconciler) lookAgainAfter(c *etcdv1.EtcdCluster, v *clusterView) time.Duration {
	after := resyncPeriod
	key, lags := client.ObjectKeyFromObject(c), r.healthLagBackoff.Get(retryBase, retryMax)
	if healthLagging(c, v) {
		after = lags.When(key)
	} else {
		lags.Forget(key)
	}
	if wait := nodeLossDueIn(c, v, r.now()); wait > 0 && wait < after {
		// A member whose node is gone is due for replacement then (spec.nodeLoss).
		after = wait
	}
	return after
}

// healthLagging: some member's Pod serves while etcd, asked through the member, does not
// answer as healthy.
func healthLagging(c *etcdv1.EtcdCluster, v *clusterView) bool {
	return slices.ContainsFunc(v.members, func(m *etcdv1.EtcdMember) bool {
		em, known := v.etcdMemberFor(c, m)
		return known && podServes(v.pods[m.Name]) && !v.healthy[em.ID]
	})
}

// closeView ends a look. The connections of a client through which no member answered wait
// out gRPC's reconnect backoff (from 1 s, growing to two minutes) before they try again, so a
// cached one would notice etcd answering up to that late: founding members forming the
// cluster seconds after their Pods start, or a quorum back after an outage. Such a client is
// dropped, and the next look dials afresh.
func (r *Reconciler) closeView(key types.NamespacedName, v *clusterView) {
	v.close()
	if v.answeredNot() {
		r.forgetClient(key)
	}
}

// ensureMarks puts the retention finalizer and the identity on the cluster before any step.
// True when the reconcile ends there, as it does when the finalizer's patch conflicted: the
// cluster changed since it was read, and that change brings the next reconcile.
func (r *Reconciler) ensureMarks(ctx context.Context, c *etcdv1.EtcdCluster, keeper *retention.Component) (bool, error) {
	if err := keeper.Mark(ctx, c); err != nil {
		return true, kit.IgnoreConflict(err)
	}
	return false, r.ensureIdentity(ctx, c)
}

// clusterOfLabeled maps an object carrying the cluster label to its EtcdCluster.
func clusterOfLabeled(_ context.Context, obj client.Object) []reconcile.Request {
	name := obj.GetLabels()[etcdv1.LabelCluster]
	if name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: name}}}
}

// clustersUsing maps an object to the clusters of its namespace for which uses is true of
// them and the object's name, so that its change wakes them at once; none when they cannot
// be listed.
func (r *Reconciler) clustersUsing(ctx context.Context, obj client.Object, uses func(c *etcdv1.EtcdCluster, name string) bool) []reconcile.Request {
	list := &etcdv1.EtcdClusterList{}
	if err := r.List(ctx, list, client.InNamespace(obj.GetNamespace())); err != nil {
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		if uses(&list.Items[i], obj.GetName()) {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return out
}

// resyncPeriod is how often a cluster at rest is looked at again.
const resyncPeriod = time.Minute

// SetupWithManager watches clusters and what they own.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&etcdv1.EtcdCluster{}).
		Owns(&etcdv1.EtcdMember{}).
		Owns(&corev1.Service{}).
		Owns(&policyv1.PodDisruptionBudget{}).
		Owns(&networkingv1.NetworkPolicy{}).
		// The Job verifying a snapshot's file before a recovery discards anything.
		Owns(&batchv1.Job{}).
		// A PVC deleted or a Pod lost decides a replacement: look at the cluster at once.
		Watches(&corev1.PersistentVolumeClaim{}, handler.EnqueueRequestsFromMapFunc(clusterOfLabeled)).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(clusterOfLabeled)).
		// Metadata only: the name is all the mapping needs, and Secrets are read live
		// (cmd/etcd-operator's clientOptions), so no Secret's data is held in memory.
		WatchesMetadata(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.clustersForSecret)).
		// A snapshot a new cluster is to restore (spec.bootstrap.restore.source.snapshotRef)
		// completing lets it start at once.
		Watches(&etcdv1.EtcdSnapshot{}, handler.EnqueueRequestsFromMapFunc(r.clustersRestoringFrom)).
		Named("etcdcluster").
		WithOptions(controller.Options{MaxConcurrentReconciles: r.MaxConcurrentReconciles}).
		Complete(r)
}

// Retries of a step that did not happen. Work in motion that no watched object reports (a
// learner catching up, founding members electing a leader, a member going away) is looked at
// again every second, as before. Anything else that repeats (etcd unreachable, unhealthy
// voters, a missing Secret, a failed call) backs off exponentially per cluster, from 1 s to
// a minute, so that one stuck cluster does not take the workers from the others. Changes to
// watched objects (a Secret created, a member's Pod ready) still wake the cluster at once;
// any step that succeeds resets the backoff.
// A wait that names when it ends (kit.Waiting.RetryIn) is looked at again then, no sooner
// than retryFloor.
const (
	retryBase  = time.Second
	retryMax   = resyncPeriod
	retryFloor = 100 * time.Millisecond
)

// inMotionWaits are the wait reasons of work under way that ends by itself.
// An upgrade waiting for a restarted member to catch up, and a quorum-loss recovery between
// its acts, are such work.
var inMotionWaits = map[string]bool{etcdv1.ReasonScaling: true, etcdv1.ReasonBootstrapping: true, etcdv1.ReasonRollingUpdate: true, etcdv1.ReasonUpgrading: true, etcdv1.ReasonQuorumRecovery: true}

func (r *Reconciler) retryAfter(key types.NamespacedName, stepErr error) time.Duration {
	var waiting kit.Waiting
	if errors.As(stepErr, &waiting) && waiting.RetryIn > 0 {
		return min(max(waiting.RetryIn, retryFloor), retryMax)
	}
	if errors.As(stepErr, &waiting) && inMotionWaits[waiting.Reason] {
		r.forgetFailures(key)
		return retryBase
	}
	return r.failures().When(key)
}

func (r *Reconciler) forgetFailures(key types.NamespacedName) { r.failures().Forget(key) }

// forgetCluster drops what the operator keeps in memory about a cluster that is gone or
// going: its etcd client, its failure backoff and its roll slot.
func (r *Reconciler) forgetCluster(key types.NamespacedName) {
	r.forgetClient(key)
	r.forgetFailures(key)
	r.healthLagBackoff.Get(retryBase, retryMax).Forget(key)
	r.RollSlots.Release(key)
}

func (r *Reconciler) failures() workqueue.TypedRateLimiter[types.NamespacedName] {
	return r.stepBackoff.Get(retryBase, retryMax)
}

func (r *Reconciler) event(ctx context.Context, c *etcdv1.EtcdCluster, eventType, reason, action, format string, args ...any) {
	r.eventAbout(ctx, c, nil, eventType, reason, action, format, args...)
}

// eventAbout records an event of the cluster that concerns another object too. The events
// API folds the events of one object with the same type, reason, action and related object
// into a series that keeps the first message only: events that differ only by the object
// they are about (one per Certificate) must name it as related, or all but the first
// message are lost ("created Certificate db-server-tls (x2)" for three Certificates).
func (r *Reconciler) eventAbout(ctx context.Context, c *etcdv1.EtcdCluster, related client.Object, eventType, reason, action, format string, args ...any) {
	kit.Emit(ctx, r.Recorder, c, related, eventType, reason, action, format, args...)
}

// isDegradedWait is true for a child object the cluster cannot have (see childProblem).
func isDegradedWait(err error) bool {
	var w kit.Waiting
	return errors.As(err, &w) && w.Degraded
}

func firstErr(first, next error) error {
	if first != nil {
		return first
	}
	return next
}
