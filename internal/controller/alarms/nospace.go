// Package alarms remediates etcd's NOSPACE alarm: compact, keeping the history the cluster
// configures when it fits, defragment every member (an EtcdDefrag with rule.all, run by the
// defrag controller), then disarm. CORRUPT is never disarmed here.
package alarms

import (
	"context"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller/kit"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// Reconciler remediates NOSPACE on clusters whose Alarm condition says NoSpace. Each alarm
// episode (the condition's transition time) has its own EtcdDefrag, named after it, so a
// crash at any point repeats nothing but the harmless compaction.
type Reconciler struct {
	client.Client
	Recorder  events.EventRecorder
	NewClient kit.ClientFactory
	// MaxConcurrentReconciles is how many clusters are remediated at once; 1 when 0. A
	// compaction may take up to 20 s (withClient), and another cluster's NOSPACE must not wait
	// for it.
	MaxConcurrentReconciles int
	// Claims says which clusters are this operator's; it acts on every cluster when nil.
	Claims *kit.Claims
}

// step is what the remediation does next, decided from what exists.
type step int

const (
	stepNone    step = iota // no NOSPACE, or the cluster opted out
	stepStart               // compact and create the pass
	stepWait                // the pass runs
	stepDisarm              // the pass finished: disarm
	stepCleanUp             // the alarm is gone: delete finished passes
)

// decide is the pure decision from the cluster's Alarm condition and this episode's pass.
func decide(c *etcdv1.EtcdCluster, pass *etcdv1.EtcdDefrag, hasOldPasses bool) step {
	cond := meta.FindStatusCondition(c.Status.Conditions, etcdv1.ConditionAlarm)
	noSpace := cond != nil && cond.Status == metav1.ConditionTrue && cond.Reason == etcdv1.ReasonNoSpace
	switch {
	case !noSpace && hasOldPasses:
		return stepCleanUp
	case !noSpace || optedOut(c):
		return stepNone
	case pass == nil:
		return stepStart
	case pass.Status.Phase == etcdv1.EtcdDefragPhaseComplete || pass.Status.Phase == etcdv1.EtcdDefragPhaseFailed:
		return stepDisarm
	}
	return stepWait
}

func optedOut(c *etcdv1.EtcdCluster) bool {
	return c.Spec.Alarms != nil && c.Spec.Alarms.NoSpace == etcdv1.NoSpaceReport
}

// +kubebuilder:rbac:groups=etcd-operator.cozystack.io,resources=etcddefrags,verbs=get;list;watch;create;delete

// Reconcile takes a cluster's NOSPACE remediation one step further.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	c := &etcdv1.EtcdCluster{}
	if err := r.Get(ctx, req.NamespacedName, c); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !r.Claims.Acts(ctx, c) {
		return ctrl.Result{}, nil
	}
	passes := &etcdv1.EtcdDefragList{}
	if err := r.List(ctx, passes, client.InNamespace(c.Namespace), client.MatchingLabels{etcdv1.LabelNoSpaceRemediation: c.Name}); err != nil {
		return ctrl.Result{}, err
	}
	name := passName(c)
	var pass *etcdv1.EtcdDefrag
	for i := range passes.Items {
		if passes.Items[i].Name == name {
			pass = &passes.Items[i]
		}
	}
	switch decide(c, pass, len(passes.Items) > 0) {
	case stepStart:
		return ctrl.Result{RequeueAfter: 2 * time.Second}, r.start(ctx, c, name)
	case stepWait:
		return ctrl.Result{RequeueAfter: 2 * time.Second}, nil
	case stepDisarm:
		return ctrl.Result{RequeueAfter: 5 * time.Second}, r.disarm(ctx, c, pass)
	case stepCleanUp:
		return ctrl.Result{}, r.cleanUp(ctx, passes.Items)
	}
	return ctrl.Result{}, nil
}

// passName names the pass of the current NOSPACE episode after its start.
func passName(c *etcdv1.EtcdCluster) string {
	cond := meta.FindStatusCondition(c.Status.Conditions, etcdv1.ConditionAlarm)
	if cond == nil {
		return ""
	}
	return c.Name + "-nospace-" + strconv.FormatInt(cond.LastTransitionTime.Unix(), 10)
}

// start compacts, which frees the pages of the revisions compacted away, and asks for every
// member to be defragmented, which gives them back. The compaction keeps the history
// spec.options configures unless that history itself does not fit in the quota: then it
// compacts to the current revision, as the only way out, and the event says so.
func (r *Reconciler) start(ctx context.Context, c *etcdv1.EtcdCluster, name string) error {
	var note string
	_, err := r.withClient(ctx, c, func(ctx context.Context, cli etcd.Client, endpoints []string) (int64, error) {
		var err error
		note, err = compact(ctx, c, cli, endpoints)
		return 0, err
	})
	if err != nil {
		return err
	}
	d := &etcdv1.EtcdDefrag{
		ObjectMeta: specs.WithAdditionalMetadata(c, metav1.ObjectMeta{Name: name, Namespace: c.Namespace, Labels: map[string]string{etcdv1.LabelNoSpaceRemediation: c.Name}}),
		Spec:       etcdv1.EtcdDefragSpec{ClusterRef: corev1.LocalObjectReference{Name: c.Name}, Rule: &etcdv1.DefragRule{All: true}},
	}
	if err := controllerutil.SetControllerReference(c, d, r.Scheme()); err != nil {
		return err
	}
	if err := r.Create(ctx, d); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	r.event(ctx, c, corev1.EventTypeNormal, etcdv1.ReasonNoSpaceRemediation, "%s; defragmenting every member (EtcdDefrag %s), then disarming NOSPACE", note, name)
	return nil
}

// disarm clears every NOSPACE alarm once the pass is done. Should the backend still be over
// its quota, etcd raises the alarm again, and the next episode starts.
func (r *Reconciler) disarm(ctx context.Context, c *etcdv1.EtcdCluster, pass *etcdv1.EtcdDefrag) error {
	n, err := r.withClient(ctx, c, func(ctx context.Context, cli etcd.Client, _ []string) (int64, error) {
		alarms, err := cli.Alarms(ctx)
		if err != nil {
			return 0, err
		}
		var disarmed int64
		for _, a := range alarms {
			if a.Type != etcd.AlarmNoSpace {
				continue // CORRUPT stays: a person or the member replacement deals with it
			}
			if err := cli.DisarmAlarm(ctx, a); err != nil {
				return disarmed, err
			}
			disarmed++
		}
		return disarmed, nil
	})
	if err != nil {
		return err
	}
	if n > 0 {
		r.event(ctx, c, corev1.EventTypeNormal, etcdv1.ReasonNoSpaceDisarmed, "disarmed NOSPACE on %d members after EtcdDefrag %s (%s, %d defragmented)", n, pass.Name, pass.Status.Phase, pass.Status.Defragmented)
	}
	return nil
}

// cleanUp deletes the finished passes of past episodes.
func (r *Reconciler) cleanUp(ctx context.Context, passes []etcdv1.EtcdDefrag) error {
	for i := range passes {
		p := &passes[i]
		if p.Status.Phase != etcdv1.EtcdDefragPhaseComplete && p.Status.Phase != etcdv1.EtcdDefragPhaseFailed {
			continue
		}
		if err := r.Delete(ctx, p); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	return nil
}

func (r *Reconciler) withClient(ctx context.Context, c *etcdv1.EtcdCluster, fn func(context.Context, etcd.Client, []string) (int64, error)) (int64, error) {
	members := &etcdv1.EtcdMemberList{}
	if err := r.List(ctx, members, client.InNamespace(c.Namespace), client.MatchingLabels{etcdv1.LabelCluster: c.Name}); err != nil {
		return 0, err
	}
	var endpoints []string
	for _, m := range members.Items {
		if !m.Spec.Dormant && m.DeletionTimestamp.IsZero() {
			endpoints = append(endpoints, specs.ClientURL(c, m.Name))
		}
	}
	if len(endpoints) == 0 {
		return 0, fmt.Errorf("cluster %s has no running member", c.Name)
	}
	cli, err := r.NewClient(ctx, c, endpoints)
	if err != nil {
		return 0, err
	}
	defer func() { _ = cli.Close() }()
	callCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	return fn(callCtx, cli, endpoints)
}

func (r *Reconciler) event(ctx context.Context, c *etcdv1.EtcdCluster, eventType, reason, format string, args ...any) {
	kit.Emit(ctx, r.Recorder, c, nil, eventType, reason, "Remediate", format, args...)
}

// SetupWithManager watches clusters (their Alarm condition) and the passes they own.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&etcdv1.EtcdCluster{}).
		Owns(&etcdv1.EtcdDefrag{}).
		Named("etcd-nospace").
		WithOptions(ctrlcontroller.Options{MaxConcurrentReconciles: r.MaxConcurrentReconciles}).
		Complete(r)
}
