// Package controller holds the operator's reconcilers: EtcdCluster decides membership, one
// change at a time; EtcdMember realizes one member (PVC, Pod) and removes it from etcd before
// its data goes.
package controller

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// ClientFactory opens an etcd client for a cluster; tests replace it with a fake.
type ClientFactory func(ctx context.Context, c *etcdv1.EtcdCluster, endpoints []string) (etcd.Client, error)

// ClusterReconciler reconciles EtcdCluster objects.
type ClusterReconciler struct {
	client.Client
	Recorder  events.EventRecorder
	NewClient ClientFactory
	// PodOptions must equal the member controller's: Pods are compared with what it builds.
	PodOptions specs.PodOptions
	// APIReader reads around the cache where a stale answer could restart two members at
	// once; the client when nil.
	APIReader client.Reader
	// Now is the clock of the progress deadline; time.Now when nil.
	Now func() time.Time
}

func (r *ClusterReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// +kubebuilder:rbac:groups=etcd-operator.cozystack.io,resources=etcdclusters,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=etcd-operator.cozystack.io,resources=etcdclusters/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=etcd-operator.cozystack.io,resources=etcdmembers,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=etcd-operator.cozystack.io,resources=etcdmembers/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile brings one cluster one step closer to its spec.
func (r *ClusterReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	cluster := &etcdv1.EtcdCluster{}
	if err := r.Get(ctx, req.NamespacedName, cluster); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !cluster.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil // garbage collection removes what it owns; member finalizers let go
	}
	if err := r.ensureIdentity(ctx, cluster); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.ensureServices(ctx, cluster); err != nil {
		return ctrl.Result{}, err
	}
	members, err := r.listMembers(ctx, cluster)
	if err != nil {
		return ctrl.Result{}, err
	}
	view, err := r.observe(ctx, cluster, members)
	if err != nil {
		return ctrl.Result{}, err
	}
	defer view.close()
	// etcd drops a membership change that overlaps another; a deadline turns that silence
	// into an error the next reconcile retries, after looking again.
	stepCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	progressed, stepErr := r.secureStep(stepCtx, cluster, view)
	if err := r.ensurePDB(ctx, cluster, view); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.updateStatus(ctx, cluster, view, stepResult{progressed: progressed, err: stepErr}); err != nil {
		return ctrl.Result{}, err
	}
	if stepErr != nil {
		log.FromContext(ctx).Info("step not done yet", "reason", stepErr.Error())
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	if progressed {
		// A change to etcd alone (a promotion) changes no object the controller watches: look
		// again soon to record its effect and take the next step.
		return ctrl.Result{RequeueAfter: 500 * time.Millisecond}, nil
	}
	// Nothing in Kubernetes changes when a member is removed from etcd by hand or stops
	// answering while its Pod stays up; a slow look again notices. It writes nothing unless
	// the status changed.
	return ctrl.Result{RequeueAfter: resyncPeriod}, nil
}

// clusterOfLabeled maps an object carrying the cluster label to its EtcdCluster.
func clusterOfLabeled(_ context.Context, obj client.Object) []reconcile.Request {
	name := obj.GetLabels()[specs.LabelCluster]
	if name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: name}}}
}

// resyncPeriod is how often a cluster at rest is looked at again.
const resyncPeriod = time.Minute

// SetupWithManager watches clusters and what they own.
func (r *ClusterReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&etcdv1.EtcdCluster{}).
		Owns(&etcdv1.EtcdMember{}).
		Owns(&corev1.Service{}).
		Owns(&policyv1.PodDisruptionBudget{}).
		// A PVC deleted or a Pod lost decides a replacement: look at the cluster at once.
		Watches(&corev1.PersistentVolumeClaim{}, handler.EnqueueRequestsFromMapFunc(clusterOfLabeled)).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(clusterOfLabeled)).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.clustersForSecret)).
		Named("etcdcluster").
		Complete(r)
}

func (r *ClusterReconciler) event(c *etcdv1.EtcdCluster, eventType, reason, action, format string, args ...any) {
	r.eventAbout(c, nil, eventType, reason, action, format, args...)
}

// eventAbout records an event of the cluster that concerns another object too. The events
// API folds the events of one object with the same type, reason, action and related object
// into a series that keeps the first message only: events that differ only by the object
// they are about (one per Certificate) must name it as related, or all but the first
// message are lost ("created Certificate db-server-tls (x2)" for three Certificates).
func (r *ClusterReconciler) eventAbout(c *etcdv1.EtcdCluster, related client.Object, eventType, reason, action, format string, args ...any) {
	emit(r.Recorder, c, related, eventType, reason, action, format, args...)
}

// emit records an event and logs it; rec may be nil in tests.
func emit(rec events.EventRecorder, regarding, related client.Object, eventType, reason, action, format string, args ...any) {
	var rel runtime.Object
	kv := []any{"object", regarding.GetNamespace() + "/" + regarding.GetName(), "kind", fmt.Sprintf("%T", regarding), "reason", reason}
	if related != nil {
		rel = related
		kv = append(kv, "related", related.GetName())
	}
	if rec != nil {
		rec.Eventf(regarding, rel, eventType, reason, action, format, args...)
	}
	log.Log.WithName("events").Info(fmt.Sprintf(format, args...), kv...)
}

func ignoreConflict(err error) error {
	if apierrors.IsConflict(err) {
		return nil
	}
	return err
}
