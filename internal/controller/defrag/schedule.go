package defrag

import (
	"context"
	"fmt"
	"time"

	"github.com/robfig/cron/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller/kit"
	"github.com/quorumkeeper/etcd-operator/internal/cronplan"
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
	m := scheduleMaker(c)
	passes, err := m.list(ctx, r.Client)
	if err != nil {
		return kit.Step{Name: "listPasses"}, ctrl.Result{}, err
	}
	due, isDue, next := cronplan.Due(sched, time.UTC, lastScheduled(c.CreationTimestamp.Time, passes), r.now())
	step := kit.Step{Facts: []any{"nextRun", next.UTC().Format(time.RFC3339)}}
	if isDue {
		step.Name, step.Changed = "createPass", true
		step.Facts = append(step.Facts, "pass", m.name(due), "due", due.UTC().Format(time.RFC3339))
		if _, err := m.create(ctx, r.Client, r.Recorder, due); err != nil {
			return step, ctrl.Result{}, err
		}
	}
	keep := 3
	if k := c.Spec.Defrag.KeepFinished; k != nil {
		keep = int(*k)
	}
	pruned, err := prune(ctx, r.Client, passes, keep)
	step.Facts = append(step.Facts, "pruned", pruned)
	if len(pruned) > 0 && step.Name == "" {
		step.Name, step.Changed = "prune", true
	}
	if err != nil {
		return step, ctrl.Result{}, err
	}
	return step, ctrl.Result{RequeueAfter: time.Until(next) + time.Second}, nil
}

// scheduleMaker makes the passes of the cluster's spec.defrag: owned by the cluster, they go
// with it, and finished ones beyond spec.defrag.keepFinished (default 3) are pruned.
func scheduleMaker(c *etcdv1.EtcdCluster) passMaker {
	return passMaker{
		owner: c, label: etcdv1.LabelDefragSchedule, prefix: c.Name + "-defrag-", schedule: c.Spec.Defrag.Schedule,
		spec: etcdv1.EtcdDefragSpec{ClusterRef: corev1.LocalObjectReference{Name: c.Name}, Rule: c.Spec.Defrag.Rule},
	}
}

// passName is the name of the pass of spec.defrag due at due.
func passName(c *etcdv1.EtcdCluster, due time.Time) string { return scheduleMaker(c).name(due) }

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
