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
	// Claims says which clusters are this operator's; it acts on every cluster when nil.
	Claims *kit.Claims

	// silent holds the clusters whose etcd did not just answer (silences).
	silent silences
}

// +kubebuilder:rbac:groups=etcd-operator.cozystack.io,resources=etcdmembers/finalizers,verbs=update
// +kubebuilder:rbac:groups=etcd-operator.cozystack.io,resources=etcdclusters/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=storage.k8s.io,resources=storageclasses,verbs=get;list;watch

// Reconcile realizes one member, and says at V(1) which step it took and why (kit.Step): the
// member's role and ID with the facts of the step, never anything of a Secret.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	m := &etcdv1.EtcdMember{}
	if err := r.Get(ctx, req.NamespacedName, m); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	ctx = kit.WithCluster(ctx, m.Namespace, m.Spec.ClusterName)
	// Also the finalizer: the operator that manages the cluster takes the member out of etcd.
	if leave, res, err := r.Claims.LeaveAlone(ctx, r.Client, m.Namespace, m.Spec.ClusterName); leave {
		return res, err
	}
	step, res, err := r.realize(ctx, m)
	step.Facts = append(step.Facts, "role", m.Status.Role, "memberID", m.Status.MemberID, "deleting", !m.DeletionTimestamp.IsZero())
	if res.RequeueAfter > 0 {
		step.Facts = append(step.Facts, "requeueAfter", res.RequeueAfter.String())
	}
	step.Log(ctx, err)
	return res, err
}

// realize takes the member's step: its finalizer while it is deleted; nothing while its
// cluster is gone or suspended or the member is another operator's; else its PVC and Pod.
func (r *Reconciler) realize(ctx context.Context, m *etcdv1.EtcdMember) (kit.Step, ctrl.Result, error) {
	cluster, err := r.cluster(ctx, m)
	if err != nil {
		return kit.Step{Name: "getCluster"}, ctrl.Result{}, err
	}
	if !m.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, cluster, m)
	}
	switch {
	case cluster == nil:
		return kit.Step{Name: "clusterGone"}, ctrl.Result{}, nil // garbage collection takes the member
	case cluster.ReconcileSuspended():
		// Hands off until the annotation goes, which wakes every member.
		return kit.Step{Name: "suspended", Facts: []any{"annotation", etcdv1.AnnotationSuspendReconcile}}, ctrl.Result{}, nil
	case m.AdoptionPending():
		return kit.Step{Name: "adoptionPending"}, ctrl.Result{}, nil // another operator's member: its Pod runs on untouched until adopted
	}
	if controllerutil.AddFinalizer(m, etcdv1.FinalizerMember) {
		if err := r.Update(ctx, m); err != nil {
			// Why says it also of a conflict, which the reconcile drops: the change that
			// caused it brings the next look.
			return kit.Step{Name: "addFinalizer", Why: err, Facts: []any{"conflict", apierrors.IsConflict(err)}}, ctrl.Result{}, kit.IgnoreConflict(err)
		}
		step, res, err := r.realizeChildren(ctx, cluster, m)
		return finalizerAdded(step), res, err
	}
	return r.realizeChildren(ctx, cluster, m)
}

// finalizerAdded is the step of a look that added the member's finalizer first: a change, and
// named for it when no other step applied.
func finalizerAdded(step kit.Step) kit.Step {
	step.Changed = true
	if step.Name == "" {
		step.Name = "addFinalizer"
	}
	step.Facts = append(step.Facts, "finalizerAdded", true)
	return step
}

// realizeChildren gives the member its PVC, then its Pod. The step is the Pod's, with what
// became of the PVC; "ensurePVC" when only the PVC changed.
func (r *Reconciler) realizeChildren(ctx context.Context, cluster *etcdv1.EtcdCluster, m *etcdv1.EtcdMember) (kit.Step, ctrl.Result, error) {
	var pvc []any
	pvcChanged := false
	if m.Spec.Storage.Medium != etcdv1.StorageMediumMemory {
		fate, err := r.ensurePVC(ctx, cluster, m)
		pvc, pvcChanged = pvcFacts(m, fate), fate.changed()
		if errors.Is(err, errDataLost) {
			// Unknown (etcd unreachable) counts as lost: asked again soon.
			lost, werr := r.waiting(ctx, m, "dataLost", "", dataLostCondition("its PVC is gone"))
			lost.Facts = append(pvc, "cause", err.Error())
			return lost, ctrl.Result{RequeueAfter: 5 * time.Second}, werr
		}
		if err != nil {
			return r.blocked(ctx, m, kit.Step{Name: "ensurePVC", Changed: pvcChanged, Facts: pvc}, err)
		}
	}
	step, res, err := r.ensurePod(ctx, cluster, m)
	step.Facts = append(step.Facts, pvc...)
	step.Changed = step.Changed || pvcChanged
	if step.Name == "" && pvcChanged {
		step.Name = "ensurePVC"
	}
	if err != nil {
		return r.blocked(ctx, m, step, err)
	}
	return step, res, nil
}

// blocked reports a child object the member cannot have (someone else's PVC or Pod of that
// name, or one the API server refuses) in its Ready condition, which the cluster's Degraded
// condition repeats, and looks again later: nothing the operator watches tells when a
// quota or a webhook changes its mind. Other errors go back to the controller, with the step
// that met them (attempted).
func (r *Reconciler) blocked(ctx context.Context, m *etcdv1.EtcdMember, attempted kit.Step, err error) (kit.Step, ctrl.Result, error) {
	var w kit.Waiting
	if !errors.As(err, &w) || !w.Degraded {
		return attempted, ctrl.Result{}, err
	}
	step, err := r.waiting(ctx, m, "blocked", m.Status.PodName, readyCondition(metav1.ConditionFalse, w.Reason, w.Message))
	step.Changed = step.Changed || attempted.Changed
	step.Facts = append([]any{"attempted", attempted.Name}, attempted.Facts...)
	return step, ctrl.Result{RequeueAfter: 10 * time.Second}, err
}

// waiting is the step, called name, that waits for ready's reason: the member's Ready condition
// says it (setStatus).
func (r *Reconciler) waiting(ctx context.Context, m *etcdv1.EtcdMember, name, podName string, ready metav1.Condition) (kit.Step, error) {
	changed, err := r.setStatus(ctx, m, podName, ready)
	return kit.Step{Name: name, Changed: changed, Why: kit.Waiting{Reason: ready.Reason, Message: ready.Message}}, err
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
			builder.WithPredicates(clusterWakesMembers)).
		Named("etcdmember").
		WithOptions(controller.Options{MaxConcurrentReconciles: r.MaxConcurrentReconciles}).
		Complete(r)
}

// clusterWakesMembers passes the changes of a cluster its members act on: its spec, its
// suspension, its claim, and its labels (a cluster relabelled back into this operator's
// --cluster-selector is its own again, and its members waited for it).
var clusterWakesMembers = predicate.Or(predicate.GenerationChangedPredicate{}, suspensionChanged, claimChanged, predicate.LabelChangedPredicate{})

// suspensionChanged passes a change of the cluster's suspend annotation: its removal must wake
// the members the operator left alone meanwhile.
var suspensionChanged = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	old, ok1 := e.ObjectOld.(*etcdv1.EtcdCluster)
	cur, ok2 := e.ObjectNew.(*etcdv1.EtcdCluster)
	return ok1 && ok2 && old.ReconcileSuspended() != cur.ReconcileSuspended()
}}

// claimChanged passes a change of the cluster's claim (etcdv1.AnnotationOperator): the members
// of a cluster this operator just claimed wait for it.
var claimChanged = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	return e.ObjectOld.GetAnnotations()[etcdv1.AnnotationOperator] != e.ObjectNew.GetAnnotations()[etcdv1.AnnotationOperator]
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
// eventAbout does the same). Each is a Normal event: what goes wrong is the member's own.
func (r *Reconciler) clusterEvent(ctx context.Context, c *etcdv1.EtcdCluster, m *etcdv1.EtcdMember, reason, action, format string, args ...any) {
	kit.Emit(ctx, r.Recorder, c, m, corev1.EventTypeNormal, reason, action, format, args...)
}

func (r *Reconciler) event(ctx context.Context, obj client.Object, eventType, reason, action, format string, args ...any) {
	kit.Emit(ctx, r.Recorder, obj, nil, eventType, reason, action, format, args...)
}

// finalize lets a member go. Deliberate removal: out of etcd first (leadership handed over if
// it leads), then the PVC. A member a quorum-loss recovery discards: its PVC is kept as
// discarded data (keepDiscardedPVC), no member's. Cluster deletion: nothing to ask etcd,
// everything goes. Deletion by hand: the PVC is handed to the cluster so the data survives,
// and the cluster recreates the member. Its step names the case and what became of the PVC.
func (r *Reconciler) finalize(ctx context.Context, cluster *etcdv1.EtcdCluster, m *etcdv1.EtcdMember) (kit.Step, ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(m, etcdv1.FinalizerMember) {
		return kit.Step{}, ctrl.Result{}, nil
	}
	var step kit.Step
	switch {
	case cluster == nil:
		// The cluster is being deleted: garbage collection removes the Pod, and the PVC
		// unless the cluster retains it (whenDeleted Retain).
		fate, err := r.keepPVCOfDeletedCluster(ctx, m)
		if step = finalizing("finalizeClusterDeletion", m, fate); err != nil {
			return step, ctrl.Result{}, err
		}
	case m.Annotations[etcdv1.AnnotationDiscard] == "true":
		// The whole etcd cluster is replaced (a recovery from a snapshot): there is no quorum
		// to remove the member with, and the cluster it belongs to will not exist.
		fate, err := r.keepDiscardedPVC(ctx, cluster, m)
		if step = finalizing("finalizeDiscard", m, fate); err != nil {
			return step, ctrl.Result{}, err
		}
	case m.Annotations[etcdv1.AnnotationRemove] == "true":
		removal, again, err := r.removeAndLetDataGo(ctx, cluster, m)
		if again || err != nil {
			return removal, ctrl.Result{RequeueAfter: 2 * time.Second}, err
		}
		step = removal
	default:
		fate, err := r.rescuePVC(ctx, cluster, m)
		if step = finalizing("finalizeDeletionByHand", m, fate); err != nil {
			return step, ctrl.Result{}, err
		}
		r.event(ctx, m, corev1.EventTypeWarning, etcdv1.ReasonMemberDeletedByHand, "KeepData", "EtcdMember %s was deleted without a removal: its PVC is kept and the member will be recreated", m.Name)
	}
	controllerutil.RemoveFinalizer(m, etcdv1.FinalizerMember)
	if err := r.Update(ctx, m); err != nil {
		step.Why = err // also a conflict, which the reconcile drops for the next look
		return step, ctrl.Result{}, kit.IgnoreConflict(err)
	}
	step.Changed = true
	return step, ctrl.Result{}, nil
}

// finalizing is the finalizer's step name, which did fate to the member's PVC.
func finalizing(name string, m *etcdv1.EtcdMember, fate pvcFate) kit.Step {
	return kit.Step{Name: name, Changed: fate.changed(), Facts: pvcFacts(m, fate)}
}

// removeFromEtcd takes the member out of the quorum, once: a member etcd no longer knows is
// already removed. The quorum is projected again right here, with each voter's health asked
// now: the decision to remove may be old (a mark left by a crash, a replacement decided a
// while ago), and removing a voter must never leave the others without a healthy majority.
// True when this call removed it.
func (r *Reconciler) removeFromEtcd(ctx context.Context, c *etcdv1.EtcdCluster, m *etcdv1.EtcdMember) (bool, error) {
	opCtx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	cli, id, list, err := r.etcdMembers(opCtx, c, m)
	if cli == nil || err != nil {
		return false, err // never added to etcd, or etcd cannot be asked
	}
	defer func() { _ = cli.Close() }()
	if !slices.ContainsFunc(list, func(em etcd.Member) bool { return em.ID == id }) {
		return false, nil
	}
	health := voterHealth(opCtx, cli, list, id)
	if ok, why := kit.RemovalVerdict(list, health, id); !ok {
		return false, fmt.Errorf("%w: %s", errRemovalRefused, why)
	}
	if err := r.handOverLeadership(opCtx, cli, c, m, id, list); err != nil {
		return false, err
	}
	if kit.StopBeforeRemoval(list, health, id) {
		if stopped, err := r.stopBeforeRemoval(ctx, c, m); !stopped || err != nil {
			return false, err
		}
	}
	err = cli.Remove(opCtx, id)
	if errors.Is(err, etcd.ErrMemberNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	failpoint.Crash(c, failpoint.AfterMemberRemove)
	r.clusterEvent(ctx, c, m, etcdv1.ReasonMemberRemoved, "RemoveMember", "removed member %s (%s) from etcd", m.Name, m.Status.MemberID)
	return true, nil
}

// removeAndLetDataGo is a deliberate removal: the member out of etcd, then its PVC deleted,
// or, for a member a quorum-loss recovery discards, kept as discarded data, and that first:
// it needs no etcd, whose new cluster may take long to answer, and the data is safe from
// then on whatever happens to the cluster. True when the removal is to be tried again; its
// step then waits, and says why.
func (r *Reconciler) removeAndLetDataGo(ctx context.Context, c *etcdv1.EtcdCluster, m *etcdv1.EtcdMember) (kit.Step, bool, error) {
	step := kit.Step{Name: "finalizeRemoval"}
	discarded := m.Annotations[etcdv1.AnnotationDiscardedByRecovery] == "true"
	if discarded {
		fate, err := r.keepDiscardedPVC(ctx, c, m)
		step = finalizing(step.Name, m, fate)
		if err != nil {
			return step, false, err
		}
	}
	removed, err := r.removeFromEtcd(ctx, c, m)
	var stopping memberStopping
	if errors.As(err, &stopping) {
		step.Why = kit.Waiting{Reason: etcdv1.ReasonMemberStopping, Message: stopping.Error()}
		step.Changed = step.Changed || stopping.deleted
		return step, true, nil
	}
	if err != nil {
		reason := etcdv1.ReasonRemoveFailed
		if errors.Is(err, errRemovalRefused) {
			reason = etcdv1.ReasonRemoveRefused
		}
		msg := fmt.Sprintf("removing %s from etcd: %v", m.Name, err)
		r.event(ctx, m, corev1.EventTypeWarning, reason, "RemoveMember", "%s", msg)
		step.Why = kit.Waiting{Reason: reason, Message: msg}
		return step, true, nil
	}
	step.Changed = step.Changed || removed
	step.Facts = append(step.Facts, "removedFromEtcd", removed)
	if discarded {
		return step, false, nil
	}
	fate, err := r.deletePVC(ctx, c, m)
	step.Changed = step.Changed || fate.changed()
	step.Facts = append(step.Facts, pvcFacts(m, fate)...)
	return step, false, err
}

// stopBeforeRemoval deletes the member's Pod and says whether it has stopped: its etcd shuts
// down gracefully, so its clients finish their requests and go to the other members, instead
// of losing them when etcd ends a removed member at once. A Pod that is not Ready serves no
// client (a damaged member being replaced, one on a lost node) and is not waited for, nor is a
// Pod that is not the member's. A stopping Pod counts as stopped once it is gone, or stopWait
// after its deletion began: a node that does not answer must not hold the removal up.
func (r *Reconciler) stopBeforeRemoval(ctx context.Context, c *etcdv1.EtcdCluster, m *etcdv1.EtcdMember) (bool, error) {
	pod := &corev1.Pod{}
	err := r.Get(ctx, types.NamespacedName{Namespace: m.Namespace, Name: m.Name}, pod)
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	if !podOfMember(pod, m) {
		return true, nil
	}
	if !pod.DeletionTimestamp.IsZero() {
		if time.Since(deletionBegan(pod)) > stopWait {
			return true, nil
		}
		return false, memberStopping{pod: pod.Name}
	}
	if !kit.PodReady(pod) {
		return true, nil
	}
	if err := r.Delete(ctx, pod, client.Preconditions{UID: &pod.UID}); err != nil {
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	}
	r.clusterEvent(ctx, c, m, etcdv1.ReasonMemberStopping, "StopMember",
		"stopping member %s before removing it from etcd, so that its clients move to the other members", m.Name)
	return false, memberStopping{pod: pod.Name, deleted: true}
}

// stopWait is how long a removal waits for the member's Pod to stop: etcd finishes its
// requests within its request timeout (about 5 s) of SIGTERM and is gone in about a second
// without watches to close.
const stopWait = 15 * time.Second

// deletionBegan is when the Pod's deletion was asked for: its deletion timestamp is the end
// of its grace period.
func deletionBegan(pod *corev1.Pod) time.Time {
	began := pod.DeletionTimestamp.Time
	if pod.DeletionGracePeriodSeconds != nil {
		began = began.Add(-time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second)
	}
	return began
}

// memberStopping: the member's Pod is stopping before its removal (stopBeforeRemoval); deleted
// when this look deleted it.
type memberStopping struct {
	pod     string
	deleted bool
}

func (s memberStopping) Error() string {
	return fmt.Sprintf("waiting for Pod %s to stop before the member is removed from etcd", s.pod)
}

// errRemovalRefused: the voters left after the removal would not keep a healthy quorum.
var errRemovalRefused = errors.New("removal refused")

// voterHealth asks each started voter but the one going for a quorum read through it.
// The verdict projects the quorum without that one, so its health counts for nothing, and a
// member replaced because it is down would cost the removal the whole health timeout (3 s).
func voterHealth(ctx context.Context, cli etcd.Client, list []etcd.Member, going uint64) map[uint64]bool {
	healthy := make(map[uint64]bool, len(list))
	for _, em := range list {
		if em.ID == going || em.IsLearner || len(em.ClientURLs) == 0 {
			continue
		}
		healthy[em.ID] = cli.Healthy(ctx, em.ClientURLs[0]) == nil
	}
	return healthy
}

// etcdMembers asks etcd, through the cluster's other members that should run, which members
// it has, and the ID of m among them. cli is nil, and etcd not asked, when m has no ID: it was
// never added. The caller bounds ctx and closes cli.
func (r *Reconciler) etcdMembers(ctx context.Context, c *etcdv1.EtcdCluster, m *etcdv1.EtcdMember) (cli etcd.Client, id uint64, list []etcd.Member, err error) {
	if m.Status.MemberID == "" {
		return nil, 0, nil, nil
	}
	if id, err = etcd.ParseID(m.Status.MemberID); err != nil {
		return nil, 0, nil, err
	}
	others, err := r.othersToAsk(ctx, c, m)
	if err != nil {
		return nil, 0, nil, err
	}
	if cli, err = r.NewClient(ctx, c, others); err != nil {
		return nil, 0, nil, err
	}
	if _, list, err = cli.MemberList(ctx); err != nil {
		_ = cli.Close()
		return nil, 0, nil, err
	}
	return cli, id, list, nil
}

// othersToAsk are the client URLs of the cluster's members other than m that should run.
func (r *Reconciler) othersToAsk(ctx context.Context, c *etcdv1.EtcdCluster, m *etcdv1.EtcdMember) ([]string, error) {
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
	return others, nil
}

// joined asks etcd whether m has started as a member (published its name): then it holds
// data that etcd counts on, and an empty start under its ID would lose committed writes. A
// member with no ID yet has not joined; one that etcd no longer lists was removed and must
// not start under that ID either. An error when etcd cannot be asked.
func (r *Reconciler) joined(ctx context.Context, c *etcdv1.EtcdCluster, m *etcdv1.EtcdMember) (bool, error) {
	if m.Status.MemberID == "" {
		return false, nil // never added: etcd need not be asked
	}
	key := client.ObjectKeyFromObject(c)
	if err := r.silent.recent(key, time.Now()); err != nil {
		return false, err
	}
	listCtx, cancel := context.WithTimeout(ctx, silenceHeld)
	defer cancel()
	cli, id, list, err := r.etcdMembers(listCtx, c, m)
	r.silent.note(key, time.Now(), err)
	if cli == nil || err != nil {
		return false, err
	}
	defer func() { _ = cli.Close() }()
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

// handOverLeadership moves etcd's leadership away from m, whose ID is id, when it leads: list
// is etcd's members as removeFromEtcd read them.
func (r *Reconciler) handOverLeadership(ctx context.Context, cli etcd.Client, c *etcdv1.EtcdCluster, m *etcdv1.EtcdMember, id uint64, list []etcd.Member) error {
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
		r.clusterEvent(ctx, c, m, etcdv1.ReasonLeaderMoved, "MoveLeader", "moved leadership from %s to %s before removing it", m.Name, em.Name)
		return nil
	}
	return nil
}

// deletePVC deletes the member's PVC at the end of a deliberate removal, but only one that
// retention.PVCOfMember proves is this member's (the same test ensurePVC applies before
// using it): a PVC of the member's name that another application made, which the member
// never used, is left alone. The delete is conditional on the UID read, so a PVC replaced in between is
// not deleted either.
func (r *Reconciler) deletePVC(ctx context.Context, c *etcdv1.EtcdCluster, m *etcdv1.EtcdMember) (pvcFate, error) {
	pvc, fate, err := r.ourPVC(ctx, c, m)
	if pvc == nil || err != nil {
		return fate, err
	}
	if err := r.Delete(ctx, pvc, client.Preconditions{UID: &pvc.UID}); err != nil {
		return afterError(err)
	}
	r.event(ctx, m, corev1.EventTypeNormal, etcdv1.ReasonDataDeleted, "DeletePVC", "deleted PVC %s of removed member %s", pvc.Name, m.Name)
	return pvcDeleted, nil
}

// keepPVCOfDeletedCluster is the member finalizer's part of whenDeleted Retain: when the
// member goes because its cluster is being deleted (a foreground deletion removes members
// first), its PVC is released before garbage collection can take it. A member a quorum-loss
// recovery was discarding keeps its PVC as discarded data under either policy: the salvage
// copy is not the cluster's data, and goes only when a person deletes it.
func (r *Reconciler) keepPVCOfDeletedCluster(ctx context.Context, m *etcdv1.EtcdMember) (pvcFate, error) {
	c := &etcdv1.EtcdCluster{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: m.Namespace, Name: m.Spec.ClusterName}, c); err != nil {
		// Gone: its own finalizer released the PVCs first, if it was to keep them.
		return pvcUnchanged, client.IgnoreNotFound(err)
	}
	if m.Annotations[etcdv1.AnnotationDiscardedByRecovery] == "true" || m.Annotations[etcdv1.AnnotationDiscard] == "true" {
		return r.keepDiscardedPVC(ctx, c, m)
	}
	if !retention.Retains(c) {
		return pvcGoesWithCluster, nil
	}
	pvc := &corev1.PersistentVolumeClaim{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: m.Namespace, Name: specs.PVCName(m)}, pvc); err != nil {
		return afterError(err)
	}
	released, err := retention.Release(ctx, r.Client, c, pvc)
	switch {
	case err != nil:
		return afterError(fmt.Errorf("keeping PVC %s of deleted cluster %s: %w", pvc.Name, c.Name, err))
	case released:
		return pvcReleased, nil
	default:
		return pvcUnchanged, nil
	}
}

// keepDiscardedPVC keeps the PVC of a member a quorum-loss recovery discards
// (retention.MarkDiscarded): annotated as discarded data, with the member's identity
// annotations as they are, and owned by nothing of the cluster's. Only a PVC that is the member's (ourPVC); a repeat changes
// nothing.
func (r *Reconciler) keepDiscardedPVC(ctx context.Context, c *etcdv1.EtcdCluster, m *etcdv1.EtcdMember) (pvcFate, error) {
	pvc, fate, err := r.ourPVC(ctx, c, m)
	if pvc == nil || err != nil {
		return fate, err
	}
	patch := client.MergeFrom(pvc.DeepCopy())
	if !retention.MarkDiscarded(c, pvc, time.Now()) {
		return pvcUnchanged, nil
	}
	if err := r.Patch(ctx, pvc, patch); err != nil {
		return afterError(err)
	}
	r.clusterEvent(ctx, c, m, etcdv1.ReasonDiscardedDataKept, "KeepData",
		"kept PVC %s with the data of member %s (%s), which the quorum-loss recovery discards: no member uses it; it goes when you delete it (kubectl delete pvc -n %s %s) or per spec.quorumLoss.keepDiscardedDataSeconds",
		pvc.Name, m.Name, m.Status.MemberID, pvc.Namespace, pvc.Name)
	return pvcKeptAsDiscarded, nil
}

// rescuePVC takes the member off the PVC's owners (retention.OwnPerPolicy), so garbage
// collection of the member does not take the data with it. A PVC that is not the member's is
// not touched: under whenDeleted Delete, retention.OwnPerPolicy would make the cluster its
// controller.
func (r *Reconciler) rescuePVC(ctx context.Context, c *etcdv1.EtcdCluster, m *etcdv1.EtcdMember) (pvcFate, error) {
	pvc, fate, err := r.ourPVC(ctx, c, m)
	if pvc == nil || err != nil {
		return fate, err
	}
	patch := client.MergeFrom(pvc.DeepCopy())
	if changed, err := retention.OwnPerPolicy(c, pvc, r.Scheme()); err != nil || !changed {
		return pvcUnchanged, err
	}
	if err := r.Patch(ctx, pvc, patch); err != nil {
		return pvcUnchanged, err
	}
	return pvcOwnedPerPolicy, nil
}

// ourPVC reads the member's PVC (live when the cache, which holds only labelled PVCs, has
// none of its name); nil when there is none (pvcAbsent), when it cannot be read (pvcUnchanged,
// with the error), or when the one of its name is not the member's (retention.PVCOfMember;
// pvcNotTheMembers), which gets a NameConflict event so that someone sees why it stays.
func (r *Reconciler) ourPVC(ctx context.Context, c *etcdv1.EtcdCluster, m *etcdv1.EtcdMember) (*corev1.PersistentVolumeClaim, pvcFate, error) {
	pvc := &corev1.PersistentVolumeClaim{}
	err := kit.GetChild(ctx, r.Client, r.APIReader, types.NamespacedName{Namespace: m.Namespace, Name: specs.PVCName(m)}, pvc)
	if err != nil {
		fate, err := afterError(err)
		return nil, fate, err
	}
	if !retention.PVCOfMember(pvc, c, m.Name) {
		r.event(ctx, m, corev1.EventTypeWarning, etcdv1.ReasonNameConflict, "KeepForeignPVC", "PVC %s has member %s's name but is not its (%s): the operator leaves it alone", pvc.Name, m.Name, kit.ControllerOf(pvc))
		return nil, pvcNotTheMembers, nil
	}
	return pvc, pvcUnchanged, nil
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

// setStatus patches podName and the Ready condition when they changed; true when it wrote them.
func (r *Reconciler) setStatus(ctx context.Context, m *etcdv1.EtcdMember, podName string, ready metav1.Condition) (bool, error) {
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
		return false, nil
	}
	if prev := meta.FindStatusCondition(before.Status.Conditions, etcdv1.MemberConditionReady); needsAttention[ready.Reason] && (prev == nil || prev.Reason != ready.Reason) {
		r.event(ctx, m, corev1.EventTypeWarning, ready.Reason, "StartMember", "member %s cannot start: %s", m.Name, ready.Message)
	}
	err := r.Status().Patch(ctx, m, client.MergeFrom(before))
	return err == nil, kit.IgnoreConflict(err)
}
