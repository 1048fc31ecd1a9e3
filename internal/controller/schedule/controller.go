package schedule

import (
	"context"
	"fmt"
	"time"

	"github.com/robfig/cron/v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller/kit"
	"github.com/quorumkeeper/etcd-operator/internal/cronplan"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// Reconciler runs EtcdSnapshotSchedules.
type Reconciler struct {
	client.Client
	// APIReader lists the schedule's snapshots around the cache before the schedule lets them
	// go (orphanSnapshots); the client when nil.
	APIReader client.Reader
	Recorder  events.EventRecorder
	Now       func() time.Time
	// Claims says which clusters are this operator's; it acts on every cluster when nil.
	Claims *kit.Claims
	// AgentImage is the operator's own image: the archiver of spec.archive runs it.
	AgentImage string
}

// +kubebuilder:rbac:groups=etcd-operator.cozystack.io,resources=etcdsnapshotschedules,verbs=get;list;watch;update
// +kubebuilder:rbac:groups=etcd-operator.cozystack.io,resources=etcdsnapshotschedules/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=etcd-operator.cozystack.io,resources=etcdsnapshotschedules/finalizers,verbs=update
// +kubebuilder:rbac:groups=etcd-operator.cozystack.io,resources=etcdsnapshots,verbs=get;list;watch;create;update;delete

// SetupWithManager watches schedules and the snapshots they own.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Now == nil {
		r.Now = time.Now
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&etcdv1.EtcdSnapshotSchedule{}).
		Owns(&etcdv1.EtcdSnapshot{}).
		Owns(&appsv1.Deployment{}).
		// A CA rotation's stage changes the archiver's TLS (specs.ArchiverDeployment): the
		// schedules of that cluster are looked at once it moves on.
		Watches(&etcdv1.EtcdCluster{}, handler.EnqueueRequestsFromMapFunc(r.schedulesOf),
			builder.WithPredicates(predicate.Funcs{UpdateFunc: caRotationMoved})).
		Named("etcdsnapshotschedule").
		Complete(r)
}

// caRotationMoved: the update changed a cluster's CA rotation.
func caRotationMoved(e event.UpdateEvent) bool {
	before, after := e.ObjectOld.(*etcdv1.EtcdCluster), e.ObjectNew.(*etcdv1.EtcdCluster)
	return !equality.Semantic.DeepEqual(before.Status.CARotation, after.Status.CARotation)
}

// schedulesOf are the schedules of the cluster.
func (r *Reconciler) schedulesOf(ctx context.Context, obj client.Object) []reconcile.Request {
	list := &etcdv1.EtcdSnapshotScheduleList{}
	if err := r.List(ctx, list, client.InNamespace(obj.GetNamespace())); err != nil {
		return nil
	}
	var out []reconcile.Request
	for _, sc := range list.Items {
		if sc.Spec.ClusterRef.Name == obj.GetName() {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&sc)})
		}
	}
	return out
}

// live reads around the cache when it can (APIReader).
func (r *Reconciler) live() client.Reader { return kit.Live(r.APIReader, r.Client) }

// Reconcile expires old snapshots, starts a due one unless another snapshot of the cluster is
// running, and records what happened; it says at V(1) which snapshot it started or expired,
// or why it started none, and when it runs next.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	sc := &etcdv1.EtcdSnapshotSchedule{}
	if err := r.Get(ctx, req.NamespacedName, sc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	ctx = kit.WithCluster(ctx, sc.Namespace, sc.Spec.ClusterRef.Name)
	if leave, res, err := r.Claims.LeaveAlone(ctx, r.Client, sc.Namespace, sc.Spec.ClusterRef.Name); leave {
		return res, err
	}
	step, res, err := r.advance(ctx, sc)
	step.Log(ctx, err)
	return res, err
}

// advance keeps the schedule's finalizer, then runs it.
func (r *Reconciler) advance(ctx context.Context, sc *etcdv1.EtcdSnapshotSchedule) (kit.Step, ctrl.Result, error) {
	if !sc.DeletionTimestamp.IsZero() {
		return r.orphanSnapshots(ctx, sc)
	}
	if !controllerutil.ContainsFinalizer(sc, etcdv1.FinalizerKeepSnapshots) {
		controllerutil.AddFinalizer(sc, etcdv1.FinalizerKeepSnapshots)
		return kit.Step{Name: "addFinalizer", Changed: true}, ctrl.Result{}, r.Update(ctx, sc)
	}
	before := sc.Status.DeepCopy()
	sched, loc, err := Parse(sc.Spec.Schedule, sc.Spec.TimeZone)
	if err != nil {
		setReady(sc, metav1.ConditionFalse, etcdv1.ReasonInvalidSchedule, err.Error())
		waits := kit.Step{Name: "parse", Why: kit.Waiting{Reason: etcdv1.ReasonInvalidSchedule, Message: err.Error()}}
		return waits, ctrl.Result{}, r.updateStatus(ctx, sc, before)
	}
	step, next, err := r.run(ctx, sc, sched, loc)
	if err != nil {
		return step, ctrl.Result{}, err
	}
	if sc.Spec.Archive != nil {
		next = minTime(next, r.Now().Add(archiveLookAgain))
	}
	if err := r.updateStatus(ctx, sc, before); err != nil {
		return step, ctrl.Result{}, err
	}
	return step, ctrl.Result{RequeueAfter: max(time.Until(next), time.Second)}, nil
}

// run expires the schedule's old snapshots and starts a due one, recording both in the
// status; it returns its step and when to look next.
func (r *Reconciler) run(ctx context.Context, sc *etcdv1.EtcdSnapshotSchedule, sched cron.Schedule, loc *time.Location) (kit.Step, time.Time, error) {
	now := r.Now()
	all := &etcdv1.EtcdSnapshotList{}
	if err := r.List(ctx, all, client.InNamespace(sc.Namespace)); err != nil {
		return kit.Step{Name: "listSnapshots"}, time.Time{}, err
	}
	owned, running := r.survey(sc, all.Items)
	expired, err := r.expire(ctx, sc, owned, now)
	if err != nil {
		return kit.Step{Name: "expire", Facts: []any{"expired", expired}}, time.Time{}, err
	}
	recordOutcomes(sc, owned)
	last := sc.CreationTimestamp.Time
	if sc.Status.LastScheduleTime != nil {
		last = sc.Status.LastScheduleTime.Time
	}
	due, isDue, next := cronplan.Due(sched, loc, last, now)
	sc.Status.NextScheduleTime = &metav1.Time{Time: next}
	sc.Status.Active = running
	step := kit.Step{Changed: len(expired) > 0, Facts: []any{"expired", expired, "running", running}}
	if len(expired) > 0 {
		step.Name = "expire"
	}
	switch {
	case sc.Spec.Suspend:
		// No next run while suspended (status.nextScheduleTime says "unless suspended"):
		// a time there would read as a promise.
		sc.Status.NextScheduleTime = nil
		const suspended = "spec.suspend is true: no new snapshots"
		setReady(sc, metav1.ConditionTrue, etcdv1.ReasonSuspended, suspended)
		step.Name, step.Why = "suspended", kit.Waiting{Reason: etcdv1.ReasonSuspended, Message: suspended}
	case isDue && running != "":
		// Never two snapshots of a cluster at once: this run waits for the running one.
		msg := fmt.Sprintf("a run is due; EtcdSnapshot %s of the cluster is still running", running)
		setReady(sc, metav1.ConditionTrue, etcdv1.ReasonWaiting, msg)
		next = now.Add(10 * time.Second)
		step.Name, step.Why = "waitForRunningSnapshot", kit.Waiting{Reason: etcdv1.ReasonWaiting, Message: msg}
		step.Facts = append(step.Facts, "due", due.Format(time.RFC3339))
	case isDue:
		name, err := r.start(ctx, sc, due)
		if err != nil {
			return kit.Step{Name: "startSnapshot", Facts: []any{"due", due.Format(time.RFC3339)}}, time.Time{}, err
		}
		sc.Status.LastScheduleTime, sc.Status.Active = &metav1.Time{Time: due}, name
		setReady(sc, metav1.ConditionTrue, etcdv1.ReasonScheduled, fmt.Sprintf("started EtcdSnapshot %s", name))
		step.Name, step.Changed = "startSnapshot", true
		step.Facts = append(step.Facts, "snapshot", name, "due", due.Format(time.RFC3339))
	default:
		setReady(sc, metav1.ConditionTrue, etcdv1.ReasonScheduled, fmt.Sprintf("next run at %s", next.Format(time.RFC3339)))
	}
	step.Facts = append(step.Facts, "nextRun", next.Format(time.RFC3339))
	if based, err := r.syncArchive(ctx, sc, owned, held(sc, all.Items), sc.Status.Active, now); err != nil {
		return kit.Step{Name: "syncArchive"}, time.Time{}, err
	} else if based != "" {
		sc.Status.Active = based
		step.Name, step.Changed = "startArchiveBase", true
		step.Facts = append(step.Facts, "snapshot", based)
	}
	return step, next, nil
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// updateStatus writes the status only when this reconcile changed it: most reconciles (a
// snapshot of the schedule moved on, the timer fired early) change nothing.
func (r *Reconciler) updateStatus(ctx context.Context, sc *etcdv1.EtcdSnapshotSchedule, before *etcdv1.EtcdSnapshotScheduleStatus) error {
	if equality.Semantic.DeepEqual(before, &sc.Status) {
		return nil
	}
	return r.Status().Update(ctx, sc)
}

// orphanSnapshots releases the schedule's snapshots, then lets the schedule go. They are
// listed live: a snapshot the schedule created a moment ago may not be in the cache yet, and
// one left controlled by the schedule goes with it, its stored file too.
func (r *Reconciler) orphanSnapshots(ctx context.Context, sc *etcdv1.EtcdSnapshotSchedule) (kit.Step, ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(sc, etcdv1.FinalizerKeepSnapshots) {
		return kit.Step{Facts: []any{"deleting", true}}, ctrl.Result{}, nil
	}
	list := &etcdv1.EtcdSnapshotList{}
	if err := r.live().List(ctx, list, client.InNamespace(sc.Namespace), client.MatchingLabels{etcdv1.LabelSnapshotSchedule: sc.Name}); err != nil {
		return kit.Step{Name: "listSnapshots"}, ctrl.Result{}, err
	}
	released := kit.Step{Name: "releaseSnapshots", Changed: true, Facts: []any{"deleting", true, "snapshots", len(list.Items)}}
	for i := range list.Items {
		s := &list.Items[i]
		if !metav1.IsControlledBy(s, sc) {
			continue
		}
		if err := controllerutil.RemoveControllerReference(sc, s, r.Scheme()); err != nil {
			return released, ctrl.Result{}, err
		}
		if err := r.Update(ctx, s); client.IgnoreNotFound(err) != nil {
			return released, ctrl.Result{}, err
		}
	}
	controllerutil.RemoveFinalizer(sc, etcdv1.FinalizerKeepSnapshots)
	return released, ctrl.Result{}, client.IgnoreNotFound(r.Update(ctx, sc))
}

// survey returns the schedule's snapshots for retention, and the name of any unfinished
// snapshot of the same cluster (the schedule's or anyone's).
func (r *Reconciler) survey(sc *etcdv1.EtcdSnapshotSchedule, items []etcdv1.EtcdSnapshot) ([]*etcdv1.EtcdSnapshot, string) {
	var owned []*etcdv1.EtcdSnapshot
	running := ""
	for i := range items {
		s := &items[i]
		if s.Spec.ClusterRef.Name != sc.Spec.ClusterRef.Name || !s.DeletionTimestamp.IsZero() {
			continue
		}
		if s.Status.Phase != etcdv1.SnapshotComplete && s.Status.Phase != etcdv1.SnapshotFailed {
			running = s.Name
		}
		if s.Labels[etcdv1.LabelSnapshotSchedule] == sc.Name && metav1.IsControlledBy(s, sc) {
			owned = append(owned, s)
		}
	}
	return owned, running
}

// expire deletes the snapshots retention lets go, and names them.
func (r *Reconciler) expire(ctx context.Context, sc *etcdv1.EtcdSnapshotSchedule, owned []*etcdv1.EtcdSnapshot, now time.Time) ([]string, error) {
	snaps := make([]Snap, 0, len(owned))
	byName := map[string]*etcdv1.EtcdSnapshot{}
	for _, s := range owned {
		byName[s.Name] = s
		t := s.CreationTimestamp.Time
		if s.Status.CompletionTime != nil {
			t = s.Status.CompletionTime.Time
		}
		snaps = append(snaps, Snap{Name: s.Name, Complete: s.Status.Phase == etcdv1.SnapshotComplete, Failed: s.Status.Phase == etcdv1.SnapshotFailed, Time: t})
	}
	keep := 0
	if sc.Spec.Retention.KeepLast != nil {
		keep = int(*sc.Spec.Retention.KeepLast)
	}
	var maxAge time.Duration
	if sc.Spec.Retention.MaxAge != nil {
		maxAge = sc.Spec.Retention.MaxAge.Duration
	}
	var deleted []string
	for _, name := range Expired(snaps, keep, maxAge, now) {
		// The snapshot's finalizer deletes its stored file first (deletionPolicy Delete).
		if err := r.Delete(ctx, byName[name]); client.IgnoreNotFound(err) != nil {
			return deleted, err
		}
		r.event(ctx, sc, corev1.EventTypeNormal, etcdv1.ReasonExpired, "deleted EtcdSnapshot %s and its stored file (retention)", name)
		deleted = append(deleted, name)
	}
	return deleted, nil
}

// start creates the run's EtcdSnapshot. Its name comes from the scheduled time, so a run
// retried after a crash finds the snapshot it created instead of creating a second one.
func (r *Reconciler) start(ctx context.Context, sc *etcdv1.EtcdSnapshotSchedule, due time.Time) (string, error) {
	// The cluster's spec.additionalMetadata, when the cluster is there to say (a snapshot of
	// a cluster that is not fails on its own, with the reason).
	var c *etcdv1.EtcdCluster
	if have := (&etcdv1.EtcdCluster{}); r.Get(ctx, types.NamespacedName{Namespace: sc.Namespace, Name: sc.Spec.ClusterRef.Name}, have) == nil {
		c = have
	}
	s := &etcdv1.EtcdSnapshot{
		ObjectMeta: specs.WithAdditionalMetadata(c, metav1.ObjectMeta{
			Name: fmt.Sprintf("%s-%d", sc.Name, due.Unix()), Namespace: sc.Namespace,
			Labels: map[string]string{etcdv1.LabelSnapshotSchedule: sc.Name},
		}),
		Spec: etcdv1.EtcdSnapshotSpec{
			ClusterRef: sc.Spec.ClusterRef, Destination: *sc.Spec.Destination.DeepCopy(),
			DeletionPolicy: sc.Spec.DeletionPolicy, Resources: sc.Spec.Resources.DeepCopy(),
		},
	}
	if s.Spec.DeletionPolicy == "" {
		s.Spec.DeletionPolicy = etcdv1.SnapshotDelete
	}
	if err := controllerutil.SetControllerReference(sc, s, r.Scheme()); err != nil {
		return "", err
	}
	if err := r.Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", err
	}
	r.event(ctx, sc, corev1.EventTypeNormal, etcdv1.ReasonStarted, "created EtcdSnapshot %s", s.Name)
	return s.Name, nil
}

// recordOutcomes sets the last success and the last failure newer than it.
func recordOutcomes(sc *etcdv1.EtcdSnapshotSchedule, owned []*etcdv1.EtcdSnapshot) {
	var ok, failed *etcdv1.EtcdSnapshot
	for _, s := range owned {
		if s.Status.CompletionTime == nil {
			continue
		}
		switch s.Status.Phase {
		case etcdv1.SnapshotComplete:
			if ok == nil || s.Status.CompletionTime.After(ok.Status.CompletionTime.Time) {
				ok = s
			}
		case etcdv1.SnapshotFailed:
			if failed == nil || s.Status.CompletionTime.After(failed.Status.CompletionTime.Time) {
				failed = s
			}
		}
	}
	if ok != nil {
		sc.Status.LastSuccessfulSnapshot, sc.Status.LastSuccessfulTime = ok.Name, ok.Status.CompletionTime
	}
	sc.Status.LastFailure = nil
	if failed != nil && (ok == nil || failed.Status.CompletionTime.After(ok.Status.CompletionTime.Time)) {
		f := &etcdv1.SnapshotFailure{Snapshot: failed.Name, Time: failed.Status.CompletionTime}
		if c := meta.FindStatusCondition(failed.Status.Conditions, etcdv1.SnapshotConditionReady); c != nil {
			f.Reason, f.Message = c.Reason, c.Message
		}
		sc.Status.LastFailure = f
	}
}

func setReady(sc *etcdv1.EtcdSnapshotSchedule, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&sc.Status.Conditions, metav1.Condition{
		Type: etcdv1.SnapshotScheduleConditionReady, Status: status, Reason: reason, Message: msg, ObservedGeneration: sc.Generation,
	})
}

func (r *Reconciler) event(ctx context.Context, sc *etcdv1.EtcdSnapshotSchedule, kind, reason, format string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(sc, nil, kind, reason, "Schedule", format, args...)
	}
	kit.LogEvent(ctx, sc, nil, kind, reason, format, args...)
}
