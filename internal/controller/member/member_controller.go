// Package member is the EtcdMember reconciler: it realizes one member the cluster reconciler
// decided on (its PVC, its Pod, its readiness) and, in its finalizer, takes it out of etcd
// before its data goes. It imports no other reconciler: what it shares with the cluster's
// lives in internal/controller/kit and children/retention, its builders in internal/specs.
package member

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller/children/retention"
	"github.com/quorumkeeper/etcd-operator/internal/controller/kit"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
	"github.com/quorumkeeper/etcd-operator/internal/failpoint"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// Reconciler realizes EtcdMembers: the PVC, the Pod, and the removal from etcd.
type Reconciler struct {
	client.Client
	// APIReader reads what the label-scoped cache cannot hold (LabelScoped); nil in tests
	// whose client is not a cache.
	APIReader  client.Reader
	Recorder   events.EventRecorder
	NewClient  kit.ClientFactory
	PodOptions specs.PodOptions
	// MaxConcurrentReconciles is how many members are reconciled at once; 1 when 0.
	MaxConcurrentReconciles int
}

// +kubebuilder:rbac:groups=etcd-operator.cozystack.io,resources=etcdmembers/finalizers,verbs=update
// +kubebuilder:rbac:groups=etcd-operator.cozystack.io,resources=etcdclusters/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=storage.k8s.io,resources=storageclasses,verbs=get;list;watch

// Reconcile realizes one member.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	m := &etcdv1.EtcdMember{}
	if err := r.Get(ctx, req.NamespacedName, m); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	ctx = kit.WithCluster(ctx, m.Namespace, m.Spec.ClusterName)
	cluster, err := r.cluster(ctx, m)
	if err != nil {
		return ctrl.Result{}, err
	}
	if !m.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, cluster, m)
	}
	if cluster == nil {
		return ctrl.Result{}, nil // the cluster is gone; garbage collection takes the member
	}
	if cluster.ReconcileSuspended() {
		return ctrl.Result{}, nil // hands off until the annotation goes, which wakes every member
	}
	if m.AdoptionPending() {
		return ctrl.Result{}, nil // another operator's member: its Pod runs on untouched until adopted
	}
	if controllerutil.AddFinalizer(m, etcdv1.FinalizerMember) {
		if err := r.Update(ctx, m); err != nil {
			return ctrl.Result{}, kit.IgnoreConflict(err)
		}
	}
	if m.Spec.Storage.Medium != etcdv1.StorageMediumMemory {
		err := r.ensurePVC(ctx, cluster, m)
		if errors.Is(err, errDataLost) {
			// Unknown (etcd unreachable) counts as lost: asked again soon.
			return ctrl.Result{RequeueAfter: 5 * time.Second}, r.setStatus(ctx, m, "", dataLostCondition("its PVC is gone"))
		}
		if err != nil {
			return r.blocked(ctx, m, err)
		}
	}
	res, err := r.ensurePod(ctx, cluster, m)
	if err != nil {
		return r.blocked(ctx, m, err)
	}
	return res, nil
}

// blocked reports a child object the member cannot have (someone else's PVC or Pod of that
// name, or one the API server refuses) in its Ready condition, which the cluster's Degraded
// condition repeats, and looks again later: nothing the operator watches tells when a
// quota or a webhook changes its mind. Other errors go back to the controller.
func (r *Reconciler) blocked(ctx context.Context, m *etcdv1.EtcdMember, err error) (ctrl.Result, error) {
	var w kit.Waiting
	if !errors.As(err, &w) || !w.Degraded {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: 10 * time.Second}, r.setStatus(ctx, m, m.Status.PodName, readyCondition(metav1.ConditionFalse, w.Reason, w.Message))
}

// SetupWithManager watches members and the Pods and PVCs they own.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&etcdv1.EtcdMember{}).
		Owns(&corev1.Pod{}).
		// PVCs are owned by the cluster (see ensurePVC); the member label finds their member.
		Watches(&corev1.PersistentVolumeClaim{}, handler.EnqueueRequestsFromMapFunc(memberOfLabeled)).
		// A change of the cluster's spec may give a member another Pod: one that cannot
		// start is replaced at once (replaceStuckPod). Status writes, the most of the
		// cluster's changes, leave its generation alone and wake no member.
		Watches(&etcdv1.EtcdCluster{}, handler.EnqueueRequestsFromMapFunc(r.membersOfCluster),
			builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, suspensionChanged))).
		Named("etcdmember").
		WithOptions(controller.Options{MaxConcurrentReconciles: r.MaxConcurrentReconciles}).
		Complete(r)
}

// suspensionChanged passes a change of the cluster's suspend annotation: its removal must wake
// the members the operator left alone meanwhile.
var suspensionChanged = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	old, ok1 := e.ObjectOld.(*etcdv1.EtcdCluster)
	cur, ok2 := e.ObjectNew.(*etcdv1.EtcdCluster)
	return ok1 && ok2 && old.ReconcileSuspended() != cur.ReconcileSuspended()
}}

// cluster is the member's EtcdCluster, nil when it is gone or going.
func (r *Reconciler) cluster(ctx context.Context, m *etcdv1.EtcdMember) (*etcdv1.EtcdCluster, error) {
	c := &etcdv1.EtcdCluster{}
	err := r.Get(ctx, types.NamespacedName{Namespace: m.Namespace, Name: m.Spec.ClusterName}, c)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if !c.DeletionTimestamp.IsZero() {
		return nil, nil
	}
	return c, nil
}

// clusterEvent records an event on the cluster about member m, named as related: the events
// API folds a cluster's events of one type, reason and action into a series that keeps the
// first message only, unless each names the member it is about (the cluster reconciler's
// eventAbout does the same).
func (r *Reconciler) clusterEvent(ctx context.Context, c *etcdv1.EtcdCluster, m *etcdv1.EtcdMember, eventType, reason, action, format string, args ...any) {
	kit.Emit(ctx, r.Recorder, c, m, eventType, reason, action, format, args...)
}

func (r *Reconciler) event(ctx context.Context, obj client.Object, eventType, reason, action, format string, args ...any) {
	kit.Emit(ctx, r.Recorder, obj, nil, eventType, reason, action, format, args...)
}

// finalize lets a member go. Deliberate removal: out of etcd first (leadership handed over if
// it leads), then the PVC. A member a quorum-loss recovery discards: its PVC is kept as
// discarded data (keepDiscardedPVC), no member's. Cluster deletion: nothing to ask etcd,
// everything goes. Deletion by hand: the PVC is handed to the cluster so the data survives,
// and the cluster recreates the member.
func (r *Reconciler) finalize(ctx context.Context, cluster *etcdv1.EtcdCluster, m *etcdv1.EtcdMember) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(m, etcdv1.FinalizerMember) {
		return ctrl.Result{}, nil
	}
	switch {
	case cluster == nil:
		// The cluster is being deleted: garbage collection removes the Pod, and the PVC
		// unless the cluster retains it (whenDeleted Retain).
		if err := r.keepPVCOfDeletedCluster(ctx, m); err != nil {
			return ctrl.Result{}, err
		}
	case m.Annotations[etcdv1.AnnotationDiscard] == "true":
		// The whole etcd cluster is replaced (a recovery from a snapshot): there is no quorum
		// to remove the member with, and the cluster it belongs to will not exist.
		if err := r.keepDiscardedPVC(ctx, cluster, m); err != nil {
			return ctrl.Result{}, err
		}
	case m.Annotations[etcdv1.AnnotationRemove] == "true":
		if again, err := r.removeAndLetDataGo(ctx, cluster, m); again || err != nil {
			return ctrl.Result{RequeueAfter: 2 * time.Second}, err
		}
	default:
		if err := r.rescuePVC(ctx, cluster, m); err != nil {
			return ctrl.Result{}, err
		}
		r.event(ctx, m, corev1.EventTypeWarning, etcdv1.ReasonMemberDeletedByHand, "KeepData", "EtcdMember %s was deleted without a removal: its PVC is kept and the member will be recreated", m.Name)
	}
	controllerutil.RemoveFinalizer(m, etcdv1.FinalizerMember)
	return ctrl.Result{}, kit.IgnoreConflict(r.Update(ctx, m))
}

// removeFromEtcd takes the member out of the quorum, once: a member etcd no longer knows is
// already removed. The quorum is projected again right here, with each voter's health asked
// now: the decision to remove may be old (a mark left by a crash, a replacement decided a
// while ago), and removing a voter must never leave the others without a healthy majority.
func (r *Reconciler) removeFromEtcd(ctx context.Context, c *etcdv1.EtcdCluster, m *etcdv1.EtcdMember) error {
	if m.Status.MemberID == "" {
		return nil // never added to etcd
	}
	id, err := etcd.ParseID(m.Status.MemberID)
	if err != nil {
		return err
	}
	cli, err := r.clientViaOthers(ctx, c, m)
	if err != nil {
		return err
	}
	defer func() { _ = cli.Close() }()
	opCtx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	_, list, err := cli.MemberList(opCtx)
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(list, func(em etcd.Member) bool { return em.ID == id }) {
		return nil
	}
	if ok, why := kit.RemovalVerdict(list, voterHealth(opCtx, cli, list), id); !ok {
		return fmt.Errorf("%w: %s", errRemovalRefused, why)
	}
	if err := r.handOverLeadership(opCtx, cli, c, m, id); err != nil {
		return err
	}
	err = cli.Remove(opCtx, id)
	if errors.Is(err, etcd.ErrMemberNotFound) {
		return nil
	}
	if err == nil {
		failpoint.Crash(c, failpoint.AfterMemberRemove)
		r.clusterEvent(ctx, c, m, corev1.EventTypeNormal, etcdv1.ReasonMemberRemoved, "RemoveMember", "removed member %s (%s) from etcd", m.Name, m.Status.MemberID)
	}
	return err
}

// removeAndLetDataGo is a deliberate removal: the member out of etcd, then its PVC deleted,
// or, for a member a quorum-loss recovery discards, kept as discarded data, and that first:
// it needs no etcd, whose new cluster may take long to answer, and the data is safe from
// then on whatever happens to the cluster. True when the removal is to be tried again.
func (r *Reconciler) removeAndLetDataGo(ctx context.Context, c *etcdv1.EtcdCluster, m *etcdv1.EtcdMember) (bool, error) {
	discarded := m.Annotations[etcdv1.AnnotationDiscardedByRecovery] == "true"
	if discarded {
		if err := r.keepDiscardedPVC(ctx, c, m); err != nil {
			return false, err
		}
	}
	if err := r.removeFromEtcd(ctx, c, m); err != nil {
		reason := etcdv1.ReasonRemoveFailed
		if errors.Is(err, errRemovalRefused) {
			reason = etcdv1.ReasonRemoveRefused
		}
		r.event(ctx, m, corev1.EventTypeWarning, reason, "RemoveMember", "removing %s from etcd: %v", m.Name, err)
		return true, nil
	}
	if discarded {
		return false, nil
	}
	return false, r.deletePVC(ctx, c, m)
}

// errRemovalRefused: the voters left after the removal would not keep a healthy quorum.
var errRemovalRefused = errors.New("removal refused")

// voterHealth asks each started voter for a quorum read through it.
func voterHealth(ctx context.Context, cli etcd.Client, list []etcd.Member) map[uint64]bool {
	healthy := make(map[uint64]bool, len(list))
	for _, em := range list {
		if em.IsLearner || len(em.ClientURLs) == 0 {
			continue
		}
		healthy[em.ID] = cli.Healthy(ctx, em.ClientURLs[0]) == nil
	}
	return healthy
}

// clientViaOthers opens a client through the cluster's other members that should run.
func (r *Reconciler) clientViaOthers(ctx context.Context, c *etcdv1.EtcdCluster, m *etcdv1.EtcdMember) (etcd.Client, error) {
	var others []string
	members := &etcdv1.EtcdMemberList{}
	if err := r.List(ctx, members, client.InNamespace(c.Namespace), client.MatchingLabels{etcdv1.LabelCluster: c.Name}); err != nil {
		return nil, err
	}
	for _, o := range members.Items {
		if o.Name != m.Name && !o.Spec.Dormant {
			others = append(others, specs.ClientURL(c, o.Name))
		}
	}
	if len(others) == 0 {
		return nil, errors.New("no other member to ask")
	}
	return r.NewClient(ctx, c, others)
}

// joined asks etcd whether m has started as a member (published its name): then it holds
// data that etcd counts on, and an empty start under its ID would lose committed writes. A
// member with no ID yet has not joined; one that etcd no longer lists was removed and must
// not start under that ID either. An error when etcd cannot be asked.
func (r *Reconciler) joined(ctx context.Context, c *etcdv1.EtcdCluster, m *etcdv1.EtcdMember) (bool, error) {
	if m.Status.MemberID == "" {
		return false, nil
	}
	id, err := etcd.ParseID(m.Status.MemberID)
	if err != nil {
		return false, err
	}
	cli, err := r.clientViaOthers(ctx, c, m)
	if err != nil {
		return false, err
	}
	defer func() { _ = cli.Close() }()
	listCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, list, err := cli.MemberList(listCtx)
	if err != nil {
		return false, err
	}
	for _, em := range list {
		if em.ID == id {
			return em.IsStarted(), nil
		}
	}
	return true, nil
}

// membersOfCluster maps an EtcdCluster to its EtcdMembers, as the cache holds them.
func (r *Reconciler) membersOfCluster(ctx context.Context, obj client.Object) []reconcile.Request {
	list := &etcdv1.EtcdMemberList{}
	if err := r.List(ctx, list, client.InNamespace(obj.GetNamespace()), client.MatchingLabels{etcdv1.LabelCluster: obj.GetName()}); err != nil {
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for _, m := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&m)})
	}
	return out
}

// memberOfLabeled maps an object carrying the member label to its EtcdMember.
func memberOfLabeled(_ context.Context, obj client.Object) []reconcile.Request {
	name := obj.GetLabels()[etcdv1.LabelMember]
	if name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: name}}}
}

func (r *Reconciler) handOverLeadership(ctx context.Context, cli etcd.Client, c *etcdv1.EtcdCluster, m *etcdv1.EtcdMember, id uint64) error {
	_, list, err := cli.MemberList(ctx)
	if err != nil {
		return err
	}
	for _, em := range list {
		if em.ID == id || em.IsLearner || len(em.ClientURLs) == 0 {
			continue
		}
		st, err := cli.Status(ctx, em.ClientURLs[0])
		if err != nil || st.Leader != id {
			continue
		}
		if err := cli.MoveLeader(ctx, em.ID); err != nil {
			return fmt.Errorf("moving leadership away from %s: %w", m.Name, err)
		}
		r.clusterEvent(ctx, c, m, corev1.EventTypeNormal, etcdv1.ReasonLeaderMoved, "MoveLeader", "moved leadership from %s to %s before removing it", m.Name, em.Name)
		return nil
	}
	return nil
}

// deletePVC deletes the member's PVC at the end of a deliberate removal, but only one that
// retention.PVCOfMember proves is this member's (the same test ensurePVC applies before
// using it): a PVC of the member's name that another application made, which the member
// never used, is left alone. The delete is conditional on the UID read, so a PVC replaced in between is
// not deleted either.
func (r *Reconciler) deletePVC(ctx context.Context, c *etcdv1.EtcdCluster, m *etcdv1.EtcdMember) error {
	pvc, err := r.ourPVC(ctx, c, m)
	if pvc == nil || err != nil {
		return err
	}
	err = r.Delete(ctx, pvc, client.Preconditions{UID: &pvc.UID})
	if err == nil {
		r.event(ctx, m, corev1.EventTypeNormal, etcdv1.ReasonDataDeleted, "DeletePVC", "deleted PVC %s of removed member %s", pvc.Name, m.Name)
	}
	return client.IgnoreNotFound(err)
}

// keepPVCOfDeletedCluster is the member finalizer's part of whenDeleted Retain: when the
// member goes because its cluster is being deleted (a foreground deletion removes members
// first), its PVC is released before garbage collection can take it. A member a quorum-loss
// recovery was discarding keeps its PVC as discarded data under either policy: the salvage
// copy is not the cluster's data, and goes only when a person deletes it.
func (r *Reconciler) keepPVCOfDeletedCluster(ctx context.Context, m *etcdv1.EtcdMember) error {
	c := &etcdv1.EtcdCluster{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: m.Namespace, Name: m.Spec.ClusterName}, c); err != nil {
		// Gone: its own finalizer released the PVCs first, if it was to keep them.
		return client.IgnoreNotFound(err)
	}
	if m.Annotations[etcdv1.AnnotationDiscardedByRecovery] == "true" || m.Annotations[etcdv1.AnnotationDiscard] == "true" {
		return r.keepDiscardedPVC(ctx, c, m)
	}
	if !retention.Retains(c) {
		return nil
	}
	pvc := &corev1.PersistentVolumeClaim{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: m.Namespace, Name: specs.PVCName(m)}, pvc); err != nil {
		return client.IgnoreNotFound(err)
	}
	if _, err := retention.Release(ctx, r.Client, c, pvc); err != nil {
		return fmt.Errorf("keeping PVC %s of deleted cluster %s: %w", pvc.Name, c.Name, err)
	}
	return nil
}

// keepDiscardedPVC keeps the PVC of a member a quorum-loss recovery discards
// (retention.MarkDiscarded): annotated as discarded data, with the member's identity
// annotations as they are, and owned by nothing of the cluster's. Only a PVC that is the member's (ourPVC); a repeat changes
// nothing.
func (r *Reconciler) keepDiscardedPVC(ctx context.Context, c *etcdv1.EtcdCluster, m *etcdv1.EtcdMember) error {
	pvc, err := r.ourPVC(ctx, c, m)
	if pvc == nil || err != nil {
		return err
	}
	patch := client.MergeFrom(pvc.DeepCopy())
	if !retention.MarkDiscarded(c, pvc, time.Now()) {
		return nil
	}
	if err := r.Patch(ctx, pvc, patch); err != nil {
		return client.IgnoreNotFound(err)
	}
	r.clusterEvent(ctx, c, m, corev1.EventTypeNormal, etcdv1.ReasonDiscardedDataKept, "KeepData",
		"kept PVC %s with the data of member %s (%s), which the quorum-loss recovery discards: no member uses it; it goes when you delete it (kubectl delete pvc -n %s %s) or per spec.quorumLoss.keepDiscardedDataSeconds",
		pvc.Name, m.Name, m.Status.MemberID, pvc.Namespace, pvc.Name)
	return nil
}

// rescuePVC takes the member off the PVC's owners (retention.OwnPerPolicy), so garbage
// collection of the member does not take the data with it. A PVC that is not the member's is
// not touched: under whenDeleted Delete, retention.OwnPerPolicy would make the cluster its
// controller.
func (r *Reconciler) rescuePVC(ctx context.Context, c *etcdv1.EtcdCluster, m *etcdv1.EtcdMember) error {
	pvc, err := r.ourPVC(ctx, c, m)
	if pvc == nil || err != nil {
		return err
	}
	patch := client.MergeFrom(pvc.DeepCopy())
	if changed, err := retention.OwnPerPolicy(c, pvc, r.Scheme()); err != nil || !changed {
		return err
	}
	return r.Patch(ctx, pvc, patch)
}

// ourPVC reads the member's PVC (live when the cache, which holds only labelled PVCs, has
// none of its name); nil when there is none, or when the one of its name is not the
// member's (retention.PVCOfMember), which gets a NameConflict event so that someone sees why
// it stays.
func (r *Reconciler) ourPVC(ctx context.Context, c *etcdv1.EtcdCluster, m *etcdv1.EtcdMember) (*corev1.PersistentVolumeClaim, error) {
	pvc := &corev1.PersistentVolumeClaim{}
	err := kit.GetChild(ctx, r.Client, r.APIReader, types.NamespacedName{Namespace: m.Namespace, Name: specs.PVCName(m)}, pvc)
	if err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	if !retention.PVCOfMember(pvc, c, m.Name) {
		r.event(ctx, m, corev1.EventTypeWarning, etcdv1.ReasonNameConflict, "KeepForeignPVC", "PVC %s has member %s's name but is not its (%s): the operator leaves it alone", pvc.Name, m.Name, kit.ControllerOf(pvc))
		return nil, nil
	}
	return pvc, nil
}

// needsAttention are the Ready reasons that will not pass without a person: each gets a
// Warning event when it first appears.
var needsAttention = map[string]bool{
	etcdv1.ReasonStorageClassNotFound: true, etcdv1.ReasonImagePullFailed: true, etcdv1.ReasonUnschedulable: true, etcdv1.ReasonNameConflict: true, etcdv1.ReasonObjectRefused: true,
	"CreateContainerConfigError": true, "CrashLoopBackOff": true,
}

func readyCondition(status metav1.ConditionStatus, reason, message string) metav1.Condition {
	return metav1.Condition{Type: etcdv1.MemberConditionReady, Status: status, Reason: reason, Message: message}
}

// setStatus patches podName and the Ready condition when they changed.
func (r *Reconciler) setStatus(ctx context.Context, m *etcdv1.EtcdMember, podName string, ready metav1.Condition) error {
	before := m.DeepCopy()
	m.Status.PodName = podName
	m.Status.ObservedGeneration = m.Generation
	ready.ObservedGeneration = m.Generation
	meta.SetStatusCondition(&m.Status.Conditions, ready)
	if ready.Status == metav1.ConditionTrue && m.Status.MemberID != "" {
		meta.SetStatusCondition(&m.Status.Conditions, metav1.Condition{
			Type: etcdv1.MemberConditionJoined, Status: metav1.ConditionTrue, Reason: etcdv1.ReasonServing,
			Message: "the member has served as part of the cluster", ObservedGeneration: m.Generation,
		})
	}
	if equalStatus(before, m) {
		return nil
	}
	if prev := meta.FindStatusCondition(before.Status.Conditions, etcdv1.MemberConditionReady); needsAttention[ready.Reason] && (prev == nil || prev.Reason != ready.Reason) {
		r.event(ctx, m, corev1.EventTypeWarning, ready.Reason, "StartMember", "member %s cannot start: %s", m.Name, ready.Message)
	}
	return kit.IgnoreConflict(r.Status().Patch(ctx, m, client.MergeFrom(before)))
}
