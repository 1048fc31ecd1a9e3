package defrag

import (
	"context"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/robfig/cron/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	Now Clock
	// Claims says which clusters are this operator's; it acts on every cluster when nil.
	Claims *kit.Claims
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
	due, isDue, next := cronplan.Due(sched, time.UTC, lastScheduled(c.CreationTimestamp.Time, passes), r.Now.now())
	step := kit.Step{Facts: []any{"nextRun", next.UTC().Format(time.RFC3339)}}
	if isDue {
		step.Name, step.Changed = "createPass", true
		step.Facts = append(step.Facts, "pass", m.name(due), "due", due.UTC().Format(time.RFC3339))
		if err := m.create(ctx, r.Client, r.Recorder, due); err != nil {
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
		spec:    etcdv1.EtcdDefragSpec{ClusterRef: corev1.LocalObjectReference{Name: c.Name}, Rule: c.Spec.Defrag.Rule},
		cluster: c,
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

// PolicyReconciler runs EtcdDefragPolicies: at each time of its schedule a policy creates an
// EtcdDefrag of its cluster, as spec.defrag does (the same passMaker), unless the time is
// skipped: suspended, found later than the starting deadline, or forbidden by an unfinished
// pass of the policy. status.lastScheduleTime records every time acted on, so a skipped time
// is not looked at again.
type PolicyReconciler struct {
	client.Client
	Recorder events.EventRecorder
	// Now is the clock; time.Now when nil.
	Now Clock
	// Claims says which clusters are this operator's; it acts on every cluster when nil.
	Claims *kit.Claims
}

// +kubebuilder:rbac:groups=etcd-operator.cozystack.io,resources=etcddefragpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=etcd-operator.cozystack.io,resources=etcddefragpolicies/status,verbs=get;update;patch

// tickAction is what a policy does about a due time.
type tickAction string

const (
	// tickNone: no time is due.
	tickNone tickAction = ""
	// tickCreate: create the pass of the due time.
	tickCreate tickAction = "createPass"
	// tickSuspended: skip it silently; the policy is suspended.
	tickSuspended tickAction = "skipSuspended"
	// tickMissed: skip it with MissedSchedule; it was found later than the starting deadline.
	tickMissed tickAction = "skipMissed"
	// tickForbidden: skip it with ConcurrencyForbidden; a pass of the policy has not finished.
	tickForbidden tickAction = "skipForbidden"
)

// tick is what a policy does at one look: act on due (the latest time of the schedule after
// last and not after now), or nothing; next is the first time after now.
type tick struct {
	action    tickAction
	due, next time.Time
}

// maxDeadlineSeconds is the longest starting deadline a time.Duration holds (292 years); a
// longer one is no deadline either.
const maxDeadlineSeconds = math.MaxInt64 / int64(time.Second)

// decideTick decides on the policy's due time: missed times collapse into the latest one
// (cronplan.Due), and a due time is consumed, by a pass or a skip, whatever the policy does.
// Suspension goes first (its times are not backfilled on resume), then the starting deadline,
// then concurrency.
func decideTick(sched cron.Schedule, last, now time.Time, spec *etcdv1.EtcdDefragPolicySpec, unfinished int) tick {
	due, isDue, next := cronplan.Due(sched, time.UTC, last, now)
	t := tick{due: due, next: next}
	switch {
	case !isDue:
		t.action = tickNone
	case spec.Suspend != nil && *spec.Suspend:
		t.action = tickSuspended
	case spec.StartingDeadlineSeconds != nil && now.Sub(due) > time.Duration(min(*spec.StartingDeadlineSeconds, maxDeadlineSeconds))*time.Second:
		t.action = tickMissed
	case spec.ConcurrencyPolicy != etcdv1.DefragConcurrencyAllow && unfinished > 0:
		t.action = tickForbidden
	default:
		t.action = tickCreate
	}
	return t
}

// policyMaker makes the policy's passes: owned by the policy, with its rule and TTL, and
// labelled with its name and its cluster's, as Cozystack's operator labels them.
func policyMaker(p *etcdv1.EtcdDefragPolicy) passMaker {
	return passMaker{
		owner: p, label: etcdv1.LabelDefragPolicy, prefix: p.Name + "-", schedule: p.Spec.Schedule,
		labels: map[string]string{etcdv1.LabelCluster: p.Spec.ClusterRef.Name},
		spec:   etcdv1.EtcdDefragSpec{ClusterRef: p.Spec.ClusterRef, Rule: p.Spec.Rule, TTLSecondsAfterFinished: p.Spec.TTLSecondsAfterFinished},
	}
}

// Reconcile prunes the policy's history, acts on its due time and records what it did; it
// says at V(1) which pass it created or which time it skipped and why, and when it runs next.
func (r *PolicyReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	p := &etcdv1.EtcdDefragPolicy{}
	if err := r.Get(ctx, req.NamespacedName, p); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !p.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	ctx = kit.WithCluster(ctx, p.Namespace, p.Spec.ClusterRef.Name)
	if leave, res, err := r.Claims.LeaveAlone(ctx, r.Client, p.Namespace, p.Spec.ClusterRef.Name); leave {
		return res, err
	}
	before := p.Status.DeepCopy()
	step, next, err := r.run(ctx, p)
	if err == nil && !equality.Semantic.DeepEqual(before, &p.Status) {
		err = r.Status().Update(ctx, p)
	}
	step.Log(ctx, err)
	if err != nil || next.IsZero() {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: max(next.Sub(r.Now.now()), time.Second)}, nil
}

// run does the policy's work and sets its status; next is zero when only a change of the
// policy can make it act (an invalid schedule).
func (r *PolicyReconciler) run(ctx context.Context, p *etcdv1.EtcdDefragPolicy) (kit.Step, time.Time, error) {
	m := policyMaker(p)
	passes, err := m.list(ctx, r.Client)
	if err != nil {
		return kit.Step{Name: "listPasses"}, time.Time{}, err
	}
	var pruned []string
	if p.Spec.HistoryLimit != nil {
		pruned, err = prune(ctx, r.Client, passes, int(*p.Spec.HistoryLimit))
		if err != nil {
			return kit.Step{Name: "prune", Facts: []any{"pruned", pruned}}, time.Time{}, err
		}
	}
	unfinished := observePasses(p, passes)
	step := kit.Step{Facts: []any{"pruned", pruned, "active", len(unfinished)}}
	if len(pruned) > 0 {
		step.Name, step.Changed = "prune", true
	}
	sched, err := cron.ParseStandard(p.Spec.Schedule)
	if err != nil {
		msg := fmt.Sprintf("spec.schedule %q is no cron schedule (%v); for example \"0 3 * * *\" or @daily", p.Spec.Schedule, err)
		setActive(p, metav1.ConditionFalse, etcdv1.ReasonInvalidSchedule, msg)
		step.Name, step.Why = "parse", kit.Waiting{Reason: etcdv1.ReasonInvalidSchedule, Message: msg}
		return step, time.Time{}, nil
	}
	last := p.CreationTimestamp.Time
	if p.Status.LastScheduleTime != nil && p.Status.LastScheduleTime.After(last) {
		last = p.Status.LastScheduleTime.Time
	}
	t := decideTick(sched, lastScheduled(last, passes), r.Now.now(), &p.Spec, len(unfinished))
	step.Facts = append(step.Facts, "nextRun", t.next.UTC().Format(time.RFC3339))
	if t.action != tickNone {
		step.Name, step.Changed = string(t.action), true
		step.Facts = append(step.Facts, "due", t.due.UTC().Format(time.RFC3339))
	}
	if err := r.act(ctx, p, m, t, unfinished); err != nil {
		return step, time.Time{}, err
	}
	if t.action != tickNone {
		p.Status.LastScheduleTime = &metav1.Time{Time: t.due}
	}
	if t.action == tickCreate {
		step.Facts = append(step.Facts, "pass", m.name(t.due))
	}
	return step, t.next, nil
}

// act carries the tick out: creates its pass, or says why it skips the due time; and sets the
// condition Active.
func (r *PolicyReconciler) act(ctx context.Context, p *etcdv1.EtcdDefragPolicy, m passMaker, t tick, unfinished []string) error {
	due := t.due.UTC().Format(time.RFC3339)
	switch t.action {
	case tickCreate:
		// The cluster's additionalMetadata reaches the pass; a cluster not there (yet) gives none.
		c := &etcdv1.EtcdCluster{}
		if err := r.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: p.Spec.ClusterRef.Name}, c); client.IgnoreNotFound(err) != nil {
			return err
		} else if err == nil {
			m.cluster = c
		}
		if err := m.create(ctx, r.Client, r.Recorder, t.due); err != nil {
			return err
		}
		p.Status.Active = activeRefs(append(unfinished, m.name(t.due)))
	case tickMissed:
		kit.Emit(ctx, r.Recorder, p, nil, corev1.EventTypeWarning, etcdv1.ReasonMissedSchedule, "Defragment",
			"skipped the time %s: found %s later, past spec.startingDeadlineSeconds %d", due, r.Now.now().Sub(t.due).Round(time.Second), *p.Spec.StartingDeadlineSeconds)
	case tickForbidden:
		kit.Emit(ctx, r.Recorder, p, nil, corev1.EventTypeNormal, etcdv1.ReasonConcurrencyForbidden, "Defragment",
			"skipped the time %s: EtcdDefrag %s of the policy has not finished (concurrencyPolicy Forbid)", due, unfinished[0])
	}
	if p.Spec.Suspend != nil && *p.Spec.Suspend {
		setActive(p, metav1.ConditionFalse, etcdv1.ReasonSuspended, "spec.suspend is true: no new EtcdDefrags")
		return nil
	}
	setActive(p, metav1.ConditionTrue, etcdv1.ReasonScheduled, fmt.Sprintf("next run at %s", t.next.UTC().Format(time.RFC3339)))
	return nil
}

// observePasses sets status.active and status.lastSuccessfulTime from the policy's passes and
// returns the unfinished ones' names, sorted.
func observePasses(p *etcdv1.EtcdDefragPolicy, passes []etcdv1.EtcdDefrag) []string {
	var unfinished []string
	for i := range passes {
		d := &passes[i]
		if !finished(d) {
			unfinished = append(unfinished, d.Name)
			continue
		}
		if d.Status.Phase == etcdv1.EtcdDefragPhaseComplete && d.Status.CompletedAt != nil &&
			(p.Status.LastSuccessfulTime == nil || d.Status.CompletedAt.After(p.Status.LastSuccessfulTime.Time)) {
			p.Status.LastSuccessfulTime = d.Status.CompletedAt.DeepCopy()
		}
	}
	sort.Strings(unfinished)
	p.Status.Active = activeRefs(unfinished)
	return unfinished
}

// activeRefs are the references of status.active, sorted by name; nil for none.
func activeRefs(names []string) []corev1.LocalObjectReference {
	sort.Strings(names)
	var refs []corev1.LocalObjectReference
	for i, n := range names {
		if i == 0 || n != names[i-1] {
			refs = append(refs, corev1.LocalObjectReference{Name: n})
		}
	}
	return refs
}

func setActive(p *etcdv1.EtcdDefragPolicy, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&p.Status.Conditions, metav1.Condition{
		Type: etcdv1.DefragPolicyConditionActive, Status: status, Reason: reason, Message: msg, ObservedGeneration: p.Generation,
	})
}

// SetupWithManager watches policies and the passes they own.
func (r *PolicyReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&etcdv1.EtcdDefragPolicy{}).
		Owns(&etcdv1.EtcdDefrag{}).
		Named("etcddefragpolicy").
		Complete(r)
}
