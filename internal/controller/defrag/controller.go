// Package defrag runs EtcdDefrag passes (one member at a time, the leader last, never below
// quorum; the decisions are package defragplan's) and creates them on the schedule of an
// EtcdCluster's spec.defrag or of an EtcdDefragPolicy.
package defrag

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller/kit"
	"github.com/quorumkeeper/etcd-operator/internal/defragplan"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
	"github.com/quorumkeeper/etcd-operator/internal/metrics"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// Reconciler runs EtcdDefrag passes. Each reconcile gives one member its outcome and
// records it, so a pass interrupted by a crash goes on with the next member.
type Reconciler struct {
	client.Client
	Recorder  events.EventRecorder
	NewClient kit.ClientFactory
	// Now is the clock of startedAt, finishedAt and the TTL; time.Now when nil.
	Now func() time.Time
	// APIReader reads the pass itself and lists a cluster's passes around the cache: each
	// step acts on etcd from what the pass records, and a copy of the pass the cache has not
	// brought up to date with the last step would take that step again (a member
	// defragmented twice, its second record lost to a conflict). The client when nil.
	APIReader client.Reader
	// MaxConcurrentReconciles is how many passes advance at once; 1 when 0. A member's
	// defragmentation can take minutes, and passes of other clusters (another tenant's
	// NOSPACE remediation behind a nightly pass) must not wait for it.
	MaxConcurrentReconciles int
	// Claims says which clusters are this operator's; it acts on every cluster when nil.
	Claims *kit.Claims

	turns clusterTurns
}

// clusterTurns lets one reconcile at a time work on the passes of a cluster: with several
// workers, two passes of one cluster would otherwise both see none running and start, and
// defragment two of its members at once.
type clusterTurns struct {
	mu   sync.Mutex
	busy map[types.NamespacedName]bool
}

// take is false when another reconcile has the cluster's turn; the caller comes back later
// rather than hold a worker for the length of a defragmentation.
func (t *clusterTurns) take(key types.NamespacedName) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.busy[key] {
		return false
	}
	if t.busy == nil {
		t.busy = map[types.NamespacedName]bool{}
	}
	t.busy[key] = true
	return true
}

func (t *clusterTurns) give(key types.NamespacedName) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.busy, key)
}

func (r *Reconciler) now() metav1.Time {
	if r.Now != nil {
		return metav1.NewTime(r.Now().Truncate(time.Second))
	}
	return metav1.NewTime(time.Now().Truncate(time.Second))
}

// +kubebuilder:rbac:groups=etcd-operator.cozystack.io,resources=etcddefrags,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=etcd-operator.cozystack.io,resources=etcddefrags/status,verbs=get;update;patch

// Reconcile takes one EtcdDefrag one member further, and says at V(1) which step it took and
// why: the member it defragments, skips or leads away from, or what the pass waits for.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	d := &etcdv1.EtcdDefrag{}
	if err := r.reader().Get(ctx, req.NamespacedName, d); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	ctx = kit.WithCluster(ctx, d.Namespace, d.Spec.ClusterRef.Name)
	if leave, res, err := r.Claims.LeaveAlone(ctx, r.Client, d.Namespace, d.Spec.ClusterRef.Name); leave {
		return res, err
	}
	step, res, err := r.advance(ctx, d)
	step.Facts = append(step.Facts, "phase", d.Status.Phase, "requeueAfter", res.RequeueAfter.String())
	step.Log(ctx, err)
	if err != nil {
		return ctrl.Result{}, err
	}
	return res, nil
}

// reader reads around the cache when it can (APIReader).
func (r *Reconciler) reader() client.Reader { return kit.Live(r.APIReader, r.Client) }

// advance takes the pass one step: it expires a finished pass, or waits for the cluster, its
// turn and its members, or takes the next member.
func (r *Reconciler) advance(ctx context.Context, d *etcdv1.EtcdDefrag) (kit.Step, ctrl.Result, error) {
	if finished(d) {
		return r.expire(ctx, d)
	}
	c := &etcdv1.EtcdCluster{}
	err := r.Get(ctx, types.NamespacedName{Namespace: d.Namespace, Name: d.Spec.ClusterRef.Name}, c)
	if apierrors.IsNotFound(err) {
		return r.finish(ctx, d, etcdv1.EtcdDefragPhaseFailed, etcdv1.ReasonClusterNotFound, fmt.Sprintf("EtcdCluster %s does not exist", d.Spec.ClusterRef.Name))
	}
	if err != nil {
		return kit.Step{Name: "getCluster"}, ctrl.Result{}, err
	}
	key := types.NamespacedName{Namespace: d.Namespace, Name: d.Spec.ClusterRef.Name}
	if !r.turns.take(key) {
		return kit.Step{Name: "waitForTurn", Why: kit.Waiting{Reason: etcdv1.ReasonAnotherPassRunning, Message: "another pass of this cluster has its turn; one pass at a time"}},
			ctrl.Result{RequeueAfter: 5 * time.Second}, nil
	}
	defer r.turns.give(key)
	if other, err := r.runningPass(ctx, d); err != nil || other != "" {
		if err != nil {
			return kit.Step{Name: "listPasses"}, ctrl.Result{}, err
		}
		return r.wait(ctx, d, etcdv1.ReasonAnotherPassRunning, fmt.Sprintf("EtcdDefrag %s is defragmenting this cluster; one pass at a time", other), 5*time.Second)
	}
	names, err := r.memberNames(ctx, c)
	if err != nil {
		return kit.Step{Name: "listMembers"}, ctrl.Result{}, err
	}
	if len(names) == 0 {
		return r.wait(ctx, d, etcdv1.ReasonNoRunningMember, "the cluster has no running member (paused or not bootstrapped)", 10*time.Second)
	}
	return r.step(ctx, d, c, names)
}

// step looks at etcd and gives the next member its outcome.
func (r *Reconciler) step(ctx context.Context, d *etcdv1.EtcdDefrag, c *etcdv1.EtcdCluster, names []string) (kit.Step, ctrl.Result, error) {
	endpointOf := func(name string) string { return specs.ClientURL(c, name) }
	endpoints := make([]string, 0, len(names))
	for _, n := range names {
		endpoints = append(endpoints, endpointOf(n))
	}
	cli, err := r.NewClient(ctx, c, endpoints)
	if err != nil {
		return r.wait(ctx, d, etcdv1.ReasonEtcdUnreachable, err.Error(), 5*time.Second)
	}
	defer func() { _ = cli.Close() }()
	view, err := defragplan.Look(ctx, cli, names, endpointOf)
	if err != nil {
		return r.wait(ctx, d, etcdv1.ReasonEtcdUnreachable, err.Error(), 5*time.Second)
	}
	view.Quota = specs.QuotaBackendBytes(c) // for members that report none (etcd 3.5, 3.6.0 to 3.6.5)
	seen := []any{"members", len(names), "healthyVoters", view.HealthyVoters, "voters", view.Voters, "leader", etcd.FormatID(view.Leader)}
	if r.start(d, names) {
		r.event(ctx, d, corev1.EventTypeNormal, etcdv1.ReasonDefragStarted, "Defragment", "defragmenting the members of %s one at a time, the leader last", c.Name)
		return kit.Step{Name: "start", Changed: true, Facts: seen}, ctrl.Result{RequeueAfter: 100 * time.Millisecond}, r.Status().Update(ctx, d)
	}
	name, ok := defragplan.NextMember(d.Status.Members, view)
	if !ok {
		return r.complete(ctx, d)
	}
	v := defragplan.Decide(d.Spec.Rule, view, name)
	seen = append(seen, "member", name, "verdictReason", v.Reason, "verdict", v.Message)
	if v.MoveLeader {
		return kit.Step{Name: "moveLeader", Changed: true, Facts: seen}, ctrl.Result{RequeueAfter: 100 * time.Millisecond}, r.moveLeader(ctx, cli, d, view, name)
	}
	row := r.process(ctx, cli, view, name, v)
	taken := kit.Step{Name: "defragment", Changed: true, Facts: append(seen, "outcome", row.Outcome, "role", row.Role,
		"dbSizeBefore", row.DBSizeBefore, "reclaimedBytes", row.ReclaimedBytes)}
	if !v.Defragment {
		taken.Name = "skip"
	}
	return taken, ctrl.Result{RequeueAfter: 100 * time.Millisecond}, r.record(ctx, d, row)
}

// record writes a member's outcome, or the role it had, once the step it names was taken on
// etcd. The step cannot be taken back, so a conflict (the pass changed meanwhile, if only its
// labels) must not lose it: looking again, the next reconcile would find the member
// defragmented already and record it Skipped, with nothing reclaimed. The row is put onto the
// pass as it now is, until it is written.
func (r *Reconciler) record(ctx context.Context, d *etcdv1.EtcdDefrag, row etcdv1.MemberDefragStatus) error {
	return kit.RecordAct(ctx, r.reader(), d, func() error {
		if row.Outcome == etcdv1.DefragOutcomeDefragmented && rowOf(d, row.Name).Outcome != etcdv1.DefragOutcomeDefragmented {
			d.Status.Defragmented++
		}
		setRow(d, row)
		return r.Status().Update(ctx, d)
	})
}

// start sets the pass Running with a Pending row per member; true when it changed d.
func (r *Reconciler) start(d *etcdv1.EtcdDefrag, names []string) bool {
	if d.Status.Phase == etcdv1.EtcdDefragPhaseRunning {
		return false
	}
	now := r.now()
	d.Status.Phase, d.Status.StartedAt = etcdv1.EtcdDefragPhaseRunning, &now
	d.Status.Members = nil
	for _, n := range names {
		d.Status.Members = append(d.Status.Members, etcdv1.MemberDefragStatus{Name: n, Outcome: etcdv1.DefragOutcomePending})
	}
	meta.RemoveStatusCondition(&d.Status.Conditions, etcdv1.DefragConditionWaiting)
	return true
}

// process defragments the member or records why not.
func (r *Reconciler) process(ctx context.Context, cli etcd.Client, view defragplan.PassView, name string, v defragplan.Verdict) etcdv1.MemberDefragStatus {
	m := view.Members[name]
	now := r.now()
	role := etcdv1.DefragRoleFollower
	if m.ID == view.Leader && m.ID != 0 {
		role = etcdv1.DefragRoleLeader
	}
	row := etcdv1.MemberDefragStatus{Name: name, Role: role, Outcome: v.Outcome, Reason: v.Reason, Message: v.Message,
		DBSizeBefore: m.Sizes.DBSize, FinishedAt: &now}
	if !v.Defragment {
		return row
	}
	defragCtx, cancel := context.WithTimeout(ctx, defragplan.DefragmentTimeout)
	defer cancel()
	if err := cli.Defragment(defragCtx, m.Endpoint); err != nil {
		row.Outcome, row.Reason, row.Message = etcdv1.DefragOutcomeFailed, etcdv1.ReasonDefragmentFailed, err.Error()
		return row
	}
	row.Outcome = etcdv1.DefragOutcomeDefragmented
	if st, err := cli.Status(ctx, m.Endpoint); err == nil {
		row.DBSizeAfter = st.DBSize
		row.ReclaimedBytes = max(0, row.DBSizeBefore-st.DBSize)
	}
	finishedAt := r.now()
	row.FinishedAt = &finishedAt
	return row
}

// moveLeader hands leadership to another healthy voter before the leader is defragmented,
// and remembers in the member's row that it led.
func (r *Reconciler) moveLeader(ctx context.Context, cli etcd.Client, d *etcdv1.EtcdDefrag, view defragplan.PassView, name string) error {
	if err := defragplan.LeadAway(ctx, cli, view, name); err != nil {
		return err
	}
	r.event(ctx, d, corev1.EventTypeNormal, etcdv1.ReasonLeaderMoved, "MoveLeader", "moved leadership away from %s before defragmenting it", name)
	row := rowOf(d, name)
	row.Role = etcdv1.DefragRoleLeader
	return r.record(ctx, d, row)
}

func rowOf(d *etcdv1.EtcdDefrag, name string) etcdv1.MemberDefragStatus {
	for _, row := range d.Status.Members {
		if row.Name == name {
			return row
		}
	}
	return etcdv1.MemberDefragStatus{Name: name}
}

// setRow replaces the member's row; a role recorded earlier (leader) is kept.
func setRow(d *etcdv1.EtcdDefrag, row etcdv1.MemberDefragStatus) {
	for i := range d.Status.Members {
		if d.Status.Members[i].Name == row.Name {
			if d.Status.Members[i].Role == etcdv1.DefragRoleLeader {
				row.Role = etcdv1.DefragRoleLeader
			}
			d.Status.Members[i] = row
			return
		}
	}
	d.Status.Members = append(d.Status.Members, row)
}

// complete ends a pass whose members all have an outcome: Failed when one failed.
func (r *Reconciler) complete(ctx context.Context, d *etcdv1.EtcdDefrag) (kit.Step, ctrl.Result, error) {
	skipped, failed := 0, 0
	for _, row := range d.Status.Members {
		switch row.Outcome {
		case etcdv1.DefragOutcomeSkipped:
			skipped++
		case etcdv1.DefragOutcomeFailed:
			failed++
		}
	}
	msg := fmt.Sprintf("%d defragmented, %d skipped, %d failed", d.Status.Defragmented, skipped, failed)
	if failed > 0 {
		return r.finish(ctx, d, etcdv1.EtcdDefragPhaseFailed, etcdv1.ReasonMemberFailed, msg)
	}
	return r.finish(ctx, d, etcdv1.EtcdDefragPhaseComplete, etcdv1.ReasonComplete, msg)
}

// finish ends the pass in phase; its step says why.
func (r *Reconciler) finish(ctx context.Context, d *etcdv1.EtcdDefrag, phase etcdv1.EtcdDefragPhase, reason, message string) (kit.Step, ctrl.Result, error) {
	now := r.now()
	d.Status.Phase, d.Status.CompletedAt = phase, &now
	status := metav1.ConditionTrue
	eventType := corev1.EventTypeNormal
	if phase == etcdv1.EtcdDefragPhaseFailed {
		status, eventType = metav1.ConditionFalse, corev1.EventTypeWarning
	}
	meta.RemoveStatusCondition(&d.Status.Conditions, etcdv1.DefragConditionWaiting)
	meta.SetStatusCondition(&d.Status.Conditions, metav1.Condition{Type: etcdv1.DefragConditionComplete, Status: status, Reason: reason, Message: message, ObservedGeneration: d.Generation})
	r.event(ctx, d, eventType, "Defrag"+string(phase), "Defragment", "%s", message)
	done := kit.Step{Name: "finish", Changed: true, Facts: []any{"reason", reason, "message", message}}
	return done, ctrl.Result{}, metrics.DefragFinished(phase == etcdv1.EtcdDefragPhaseFailed, r.Status().Update(ctx, d))
}

// wait records why a pass has not started (or cannot go on) and leaves it Pending; the pass
// looks again after after.
func (r *Reconciler) wait(ctx context.Context, d *etcdv1.EtcdDefrag, reason, message string, after time.Duration) (kit.Step, ctrl.Result, error) {
	before := d.DeepCopy()
	if d.Status.Phase == "" {
		d.Status.Phase = etcdv1.EtcdDefragPhasePending
	}
	meta.SetStatusCondition(&d.Status.Conditions, metav1.Condition{Type: etcdv1.DefragConditionWaiting, Status: metav1.ConditionTrue, Reason: reason, Message: message, ObservedGeneration: d.Generation})
	waits := kit.Step{Name: "wait", Why: kit.Waiting{Reason: reason, Message: message}}
	if equalStatus(before, d) {
		return waits, ctrl.Result{RequeueAfter: after}, nil
	}
	log.FromContext(ctx).Info("defragmentation waits", "reason", reason, "message", message)
	waits.Changed = true
	return waits, ctrl.Result{RequeueAfter: after}, r.Status().Patch(ctx, d, client.MergeFrom(before))
}

func equalStatus(a, b *etcdv1.EtcdDefrag) bool {
	ca, cb := meta.FindStatusCondition(a.Status.Conditions, etcdv1.DefragConditionWaiting), meta.FindStatusCondition(b.Status.Conditions, etcdv1.DefragConditionWaiting)
	return a.Status.Phase == b.Status.Phase && ca != nil && cb != nil && ca.Reason == cb.Reason && ca.Message == cb.Message
}

func finished(d *etcdv1.EtcdDefrag) bool {
	return d.Status.Phase == etcdv1.EtcdDefragPhaseComplete || d.Status.Phase == etcdv1.EtcdDefragPhaseFailed
}

// expire deletes a finished pass once its TTL has run out.
func (r *Reconciler) expire(ctx context.Context, d *etcdv1.EtcdDefrag) (kit.Step, ctrl.Result, error) {
	if d.Spec.TTLSecondsAfterFinished == nil || d.Status.CompletedAt == nil {
		return kit.Step{Facts: []any{"ttl", "none"}}, ctrl.Result{}, nil
	}
	left := d.Status.CompletedAt.Add(time.Duration(*d.Spec.TTLSecondsAfterFinished) * time.Second).Sub(r.now().Time)
	if left > 0 {
		return kit.Step{Facts: []any{"ttlLeft", left.String()}}, ctrl.Result{RequeueAfter: left}, nil
	}
	return kit.Step{Name: "expire", Changed: true}, ctrl.Result{}, client.IgnoreNotFound(r.Delete(ctx, d, client.Preconditions{UID: &d.UID}))
}

// runningPass names another pass running on the same cluster. Before d starts, the passes
// are read live: the cluster's turn orders the reconciles, and the one that started the other
// pass may have finished a moment ago, its status not yet in the cache.
func (r *Reconciler) runningPass(ctx context.Context, d *etcdv1.EtcdDefrag) (string, error) {
	var reader client.Reader = r.Client
	if d.Status.Phase != etcdv1.EtcdDefragPhaseRunning && r.APIReader != nil {
		reader = r.APIReader
	}
	list := &etcdv1.EtcdDefragList{}
	if err := reader.List(ctx, list, client.InNamespace(d.Namespace)); err != nil {
		return "", err
	}
	for _, other := range list.Items {
		if other.Name != d.Name && other.Spec.ClusterRef.Name == d.Spec.ClusterRef.Name && other.Status.Phase == etcdv1.EtcdDefragPhaseRunning {
			return other.Name, nil
		}
	}
	return "", nil
}

// memberNames are the cluster's members that should be running, by name.
func (r *Reconciler) memberNames(ctx context.Context, c *etcdv1.EtcdCluster) ([]string, error) {
	list := &etcdv1.EtcdMemberList{}
	if err := r.List(ctx, list, client.InNamespace(c.Namespace), client.MatchingLabels{etcdv1.LabelCluster: c.Name}); err != nil {
		return nil, err
	}
	var names []string
	for _, m := range list.Items {
		if m.Spec.ClusterName == c.Name && !m.Spec.Dormant && m.DeletionTimestamp.IsZero() {
			names = append(names, m.Name)
		}
	}
	return names, nil
}

func (r *Reconciler) event(ctx context.Context, d *etcdv1.EtcdDefrag, eventType, reason, action, format string, args ...any) {
	kit.Emit(ctx, r.Recorder, d, nil, eventType, reason, action, format, args...)
}

// SetupWithManager watches EtcdDefrags.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&etcdv1.EtcdDefrag{}).
		Named("etcddefrag").
		WithOptions(ctrlcontroller.Options{MaxConcurrentReconciles: r.MaxConcurrentReconciles}).
		Complete(r)
}
