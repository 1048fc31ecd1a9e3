package schedule

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller/kit"
	"github.com/quorumkeeper/etcd-operator/internal/cronplan"
)

// Reconciler runs EtcdSnapshotSchedules.
type Reconciler struct {
	client.Client
	Recorder events.EventRecorder
	Now      func() time.Time
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
		Named("etcdsnapshotschedule").
		Complete(r)
}

// Reconcile expires old snapshots, starts a due one unless another snapshot of the cluster is
// running, and records what happened.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	sc := &etcdv1.EtcdSnapshotSchedule{}
	if err := r.Get(ctx, req.NamespacedName, sc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	ctx = kit.WithCluster(ctx, sc.Namespace, sc.Spec.ClusterRef.Name)
	if !sc.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.orphanSnapshots(ctx, sc)
	}
	if !controllerutil.ContainsFinalizer(sc, etcdv1.FinalizerKeepSnapshots) {
		controllerutil.AddFinalizer(sc, etcdv1.FinalizerKeepSnapshots)
		return ctrl.Result{}, r.Update(ctx, sc)
	}
	before := sc.Status.DeepCopy()
	now := r.Now()
	cron, loc, err := Parse(sc.Spec.Schedule, sc.Spec.TimeZone)
	if err != nil {
		setReady(sc, metav1.ConditionFalse, etcdv1.ReasonInvalidSchedule, err.Error())
		return ctrl.Result{}, r.updateStatus(ctx, sc, before)
	}
	all := &etcdv1.EtcdSnapshotList{}
	if err := r.List(ctx, all, client.InNamespace(sc.Namespace)); err != nil {
		return ctrl.Result{}, err
	}
	owned, running := r.survey(sc, all.Items)
	if err := r.expire(ctx, sc, owned, now); err != nil {
		return ctrl.Result{}, err
	}
	recordOutcomes(sc, owned)
	last := sc.CreationTimestamp.Time
	if sc.Status.LastScheduleTime != nil {
		last = sc.Status.LastScheduleTime.Time
	}
	due, isDue, next := cronplan.Due(cron, loc, last, now)
	sc.Status.NextScheduleTime = &metav1.Time{Time: next}
	sc.Status.Active = running
	switch {
	case sc.Spec.Suspend:
		// No next run while suspended (status.nextScheduleTime says "unless suspended"):
		// a time there would read as a promise.
		sc.Status.NextScheduleTime = nil
		setReady(sc, metav1.ConditionTrue, etcdv1.ReasonSuspended, "spec.suspend is true: no new snapshots")
	case isDue && running != "":
		// Never two snapshots of a cluster at once: this run waits for the running one.
		setReady(sc, metav1.ConditionTrue, etcdv1.ReasonWaiting, fmt.Sprintf("a run is due; EtcdSnapshot %s of the cluster is still running", running))
		next = now.Add(10 * time.Second)
	case isDue:
		name, err := r.start(ctx, sc, due)
		if err != nil {
			return ctrl.Result{}, err
		}
		sc.Status.LastScheduleTime, sc.Status.Active = &metav1.Time{Time: due}, name
		setReady(sc, metav1.ConditionTrue, etcdv1.ReasonScheduled, fmt.Sprintf("started EtcdSnapshot %s", name))
	default:
		setReady(sc, metav1.ConditionTrue, etcdv1.ReasonScheduled, fmt.Sprintf("next run at %s", next.Format(time.RFC3339)))
	}
	if err := r.updateStatus(ctx, sc, before); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: max(time.Until(next), time.Second)}, nil
}

// updateStatus writes the status only when this reconcile changed it: most reconciles (a
// snapshot of the schedule moved on, the timer fired early) change nothing.
func (r *Reconciler) updateStatus(ctx context.Context, sc *etcdv1.EtcdSnapshotSchedule, before *etcdv1.EtcdSnapshotScheduleStatus) error {
	if equality.Semantic.DeepEqual(before, &sc.Status) {
		return nil
	}
	return r.Status().Update(ctx, sc)
}

// orphanSnapshots releases the schedule's snapshots, then lets the schedule go.
func (r *Reconciler) orphanSnapshots(ctx context.Context, sc *etcdv1.EtcdSnapshotSchedule) error {
	if !controllerutil.ContainsFinalizer(sc, etcdv1.FinalizerKeepSnapshots) {
		return nil
	}
	list := &etcdv1.EtcdSnapshotList{}
	if err := r.List(ctx, list, client.InNamespace(sc.Namespace), client.MatchingLabels{etcdv1.LabelSnapshotSchedule: sc.Name}); err != nil {
		return err
	}
	for i := range list.Items {
		s := &list.Items[i]
		if !metav1.IsControlledBy(s, sc) {
			continue
		}
		if err := controllerutil.RemoveControllerReference(sc, s, r.Scheme()); err != nil {
			return err
		}
		if err := r.Update(ctx, s); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	controllerutil.RemoveFinalizer(sc, etcdv1.FinalizerKeepSnapshots)
	return client.IgnoreNotFound(r.Update(ctx, sc))
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

func (r *Reconciler) expire(ctx context.Context, sc *etcdv1.EtcdSnapshotSchedule, owned []*etcdv1.EtcdSnapshot, now time.Time) error {
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
	for _, name := range Expired(snaps, keep, maxAge, now) {
		// The snapshot's finalizer deletes its stored file first (deletionPolicy Delete).
		if err := r.Delete(ctx, byName[name]); client.IgnoreNotFound(err) != nil {
			return err
		}
		r.event(ctx, sc, corev1.EventTypeNormal, etcdv1.ReasonExpired, "deleted EtcdSnapshot %s and its stored file (retention)", name)
	}
	return nil
}

// start creates the run's EtcdSnapshot. Its name comes from the scheduled time, so a run
// retried after a crash finds the snapshot it created instead of creating a second one.
func (r *Reconciler) start(ctx context.Context, sc *etcdv1.EtcdSnapshotSchedule, due time.Time) (string, error) {
	s := &etcdv1.EtcdSnapshot{
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("%s-%d", sc.Name, due.Unix()), Namespace: sc.Namespace,
			Labels: map[string]string{etcdv1.LabelSnapshotSchedule: sc.Name},
		},
		Spec: etcdv1.EtcdSnapshotSpec{
			ClusterRef: sc.Spec.ClusterRef, Destination: *sc.Spec.Destination.DeepCopy(),
			DeletionPolicy: sc.Spec.DeletionPolicy,
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
