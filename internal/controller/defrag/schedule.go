package defrag

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/robfig/cron/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller/kit"
	"github.com/quorumkeeper/etcd-operator/internal/cronplan"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// ScheduleReconciler creates an EtcdDefrag at each time an EtcdCluster's spec.defrag names.
// It keeps no state of its own: the last scheduled EtcdDefrag says when the schedule last
// fired, and its name is the due time, so a second attempt at the same time is a no-op.
type ScheduleReconciler struct {
	client.Client
	Recorder events.EventRecorder
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// Claims says which clusters are this operator's; it acts on every cluster when nil.
	Claims *kit.Claims
}

func (r *ScheduleReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// Reconcile fires the cluster's schedule when due and prunes old scheduled passes; it says at
// V(1) which pass it created or pruned, and when it runs next.
func (r *ScheduleReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	c := &etcdv1.EtcdCluster{}
	if err := r.Get(ctx, req.NamespacedName, c); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if c.Spec.Defrag == nil || !c.DeletionTimestamp.IsZero() || !r.Claims.Acts(ctx, c) {
		return ctrl.Result{}, nil
	}
	step, res, err := r.fire(ctx, c)
	step.Log(ctx, err)
	return res, err
}

// fire creates the pass due now, if one is, and prunes the finished ones beyond keepFinished.
func (r *ScheduleReconciler) fire(ctx context.Context, c *etcdv1.EtcdCluster) (kit.Step, ctrl.Result, error) {
	sched, err := cron.ParseStandard(c.Spec.Defrag.Schedule)
	if err != nil {
		msg := fmt.Sprintf("spec.defrag.schedule %q is no cron schedule (%v); for example \"0 3 * * *\" or @daily", c.Spec.Defrag.Schedule, err)
		r.warn(ctx, c, "%s", msg)
		return kit.Step{Name: "parse", Why: kit.Waiting{Reason: etcdv1.ReasonInvalidDefragSchedule, Message: msg}}, ctrl.Result{}, nil
	}
	passes, err := r.scheduledPasses(ctx, c)
	if err != nil {
		return kit.Step{Name: "listPasses"}, ctrl.Result{}, err
	}
	due, isDue, next := cronplan.Due(sched, time.UTC, lastScheduled(c, passes), r.now())
	step := kit.Step{Facts: []any{"nextRun", next.UTC().Format(time.RFC3339)}}
	if isDue {
		step.Name, step.Changed = "createPass", true
		step.Facts = append(step.Facts, "pass", passName(c, due), "due", due.UTC().Format(time.RFC3339))
		if err := r.create(ctx, c, due); err != nil {
			return step, ctrl.Result{}, err
		}
	}
	pruned, err := r.prune(ctx, c, passes)
	step.Facts = append(step.Facts, "pruned", pruned)
	if len(pruned) > 0 && step.Name == "" {
		step.Name, step.Changed = "prune", true
	}
	if err != nil {
		return step, ctrl.Result{}, err
	}
	return step, ctrl.Result{RequeueAfter: time.Until(next) + time.Second}, nil
}

// lastScheduled is the due time of the newest scheduled pass, or the cluster's creation.
func lastScheduled(c *etcdv1.EtcdCluster, passes []etcdv1.EtcdDefrag) time.Time {
	last := c.CreationTimestamp.Time
	for _, p := range passes {
		if t, err := time.Parse(time.RFC3339, p.Annotations[etcdv1.AnnotationScheduledTime]); err == nil && t.After(last) {
			last = t
		}
	}
	return last
}

func (r *ScheduleReconciler) scheduledPasses(ctx context.Context, c *etcdv1.EtcdCluster) ([]etcdv1.EtcdDefrag, error) {
	list := &etcdv1.EtcdDefragList{}
	if err := r.List(ctx, list, client.InNamespace(c.Namespace), client.MatchingLabels{etcdv1.LabelDefragSchedule: c.Name}); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// passName is the name of the pass due at due: the same for a second attempt at that time.
func passName(c *etcdv1.EtcdCluster, due time.Time) string {
	return c.Name + "-defrag-" + strconv.FormatInt(due.Unix(), 10)
}

// create makes the pass due at due; it is owned by the cluster and goes with it.
func (r *ScheduleReconciler) create(ctx context.Context, c *etcdv1.EtcdCluster, due time.Time) error {
	d := &etcdv1.EtcdDefrag{
		ObjectMeta: specs.WithAdditionalMetadata(c, metav1.ObjectMeta{
			Name: passName(c, due), Namespace: c.Namespace,
			Labels:      map[string]string{etcdv1.LabelDefragSchedule: c.Name},
			Annotations: map[string]string{etcdv1.AnnotationScheduledTime: due.UTC().Format(time.RFC3339)},
		}),
		Spec: etcdv1.EtcdDefragSpec{ClusterRef: corev1.LocalObjectReference{Name: c.Name}, Rule: c.Spec.Defrag.Rule.DeepCopy()},
	}
	if err := controllerutil.SetControllerReference(c, d, r.Scheme()); err != nil {
		return err
	}
	err := r.Create(ctx, d)
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	if err != nil {
		return err
	}
	kit.Emit(ctx, r.Recorder, c, d, corev1.EventTypeNormal, etcdv1.ReasonDefragScheduled, "Defragment", "created EtcdDefrag %s for the schedule %q", d.Name, c.Spec.Defrag.Schedule)
	return nil
}

// prune deletes finished scheduled passes beyond spec.defrag.keepFinished, oldest first, and
// names those it deleted.
func (r *ScheduleReconciler) prune(ctx context.Context, c *etcdv1.EtcdCluster, passes []etcdv1.EtcdDefrag) ([]string, error) {
	keep := 3
	if k := c.Spec.Defrag.KeepFinished; k != nil {
		keep = int(*k)
	}
	var done []etcdv1.EtcdDefrag
	for _, p := range passes {
		if finished(&p) {
			done = append(done, p)
		}
	}
	sort.Slice(done, func(i, j int) bool {
		return done[i].Annotations[etcdv1.AnnotationScheduledTime] > done[j].Annotations[etcdv1.AnnotationScheduledTime]
	})
	var pruned []string
	for i := keep; i < len(done); i++ {
		if err := r.Delete(ctx, &done[i]); client.IgnoreNotFound(err) != nil {
			return pruned, err
		}
		pruned = append(pruned, done[i].Name)
	}
	return pruned, nil
}

func (r *ScheduleReconciler) warn(ctx context.Context, c *etcdv1.EtcdCluster, format string, args ...any) {
	kit.Emit(ctx, r.Recorder, c, nil, corev1.EventTypeWarning, etcdv1.ReasonInvalidDefragSchedule, "Defragment", format, args...)
}

// SetupWithManager watches clusters and the passes they own.
func (r *ScheduleReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&etcdv1.EtcdCluster{}).
		Owns(&etcdv1.EtcdDefrag{}).
		Named("etcddefrag-schedule").
		Complete(r)
}
