package defrag

import (
	"context"
	"fmt"
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

// PolicyReconciler runs EtcdDefragPolicies: at each time of its schedule a policy creates an
// EtcdDefrag of its cluster, as spec.defrag does (the same passMaker), unless the time is
// skipped: suspended, found later than the starting deadline, or forbidden by an unfinished
// pass of the policy. status.lastScheduleTime records every time acted on, so a skipped time
// is not looked at again.
type PolicyReconciler struct {
	client.Client
	Recorder events.EventRecorder
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// Claims says which clusters are this operator's; it acts on every cluster when nil.
	Claims *kit.Claims
}

// +kubebuilder:rbac:groups=etcd-operator.cozystack.io,resources=etcddefragpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=etcd-operator.cozystack.io,resources=etcddefragpolicies/status,verbs=get;update;patch

func (r *PolicyReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

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
	case spec.StartingDeadlineSeconds != nil && now.Sub(due) > time.Duration(*spec.StartingDeadlineSeconds)*time.Second:
		t.action = tickMissed
	case spec.ConcurrencyPolicy != etcdv1.DefragConcurrencyAllow && unfinished > 0:
		t.action = tickForbidden
	default:
		t.action = tickCreate
	}
	return t
}

// policyMaker makes the policy's passes: owned by the policy, with its rule and TTL.
func policyMaker(p *etcdv1.EtcdDefragPolicy) passMaker {
	return passMaker{
		owner: p, label: etcdv1.LabelDefragPolicy, prefix: p.Name + "-", schedule: p.Spec.Schedule,
		spec: etcdv1.EtcdDefragSpec{ClusterRef: p.Spec.ClusterRef, Rule: p.Spec.Rule, TTLSecondsAfterFinished: p.Spec.TTLSecondsAfterFinished},
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
	return ctrl.Result{RequeueAfter: max(next.Sub(r.now()), time.Second)}, nil
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
	t := decideTick(sched, lastScheduled(last, passes), r.now(), &p.Spec, len(unfinished))
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
		if _, err := m.create(ctx, r.Client, r.Recorder, t.due); err != nil {
			return err
		}
		p.Status.Active = activeRefs(append(unfinished, m.name(t.due)))
	case tickMissed:
		kit.Emit(ctx, r.Recorder, p, nil, corev1.EventTypeWarning, etcdv1.ReasonMissedSchedule, "Defragment",
			"skipped the time %s: found %s later, past spec.startingDeadlineSeconds %d", due, r.now().Sub(t.due).Round(time.Second), *p.Spec.StartingDeadlineSeconds)
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
