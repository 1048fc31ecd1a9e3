package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

// createDefragPolicy creates an EtcdDefragPolicy of cluster every minute.
func createDefragPolicy(t *testing.T, ns, name, cluster string, edit func(*etcdv1.EtcdDefragPolicySpec)) *etcdv1.EtcdDefragPolicy {
	t.Helper()
	p := &etcdv1.EtcdDefragPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: etcdv1.EtcdDefragPolicySpec{ClusterRef: corev1.LocalObjectReference{Name: cluster}, Schedule: "* * * * *"}}
	edit(&p.Spec)
	if err := k8s.Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	return p
}

// policyPasses are the EtcdDefrags the policy made.
func policyPasses(ns, policy string) ([]etcdv1.EtcdDefrag, error) {
	list := &etcdv1.EtcdDefragList{}
	err := k8s.List(context.Background(), list, client.InNamespace(ns), client.MatchingLabels{etcdv1.LabelDefragPolicy: policy})
	return list.Items, err
}

// policyEvents are the events about the policy with that reason.
func policyEvents(ns, policy, reason string) ([]eventsv1.Event, error) {
	list := &eventsv1.EventList{}
	if err := k8s.List(context.Background(), list, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Kind == "EtcdDefragPolicy" && e.Regarding.Name == policy && e.Reason == reason {
			out = append(out, e)
		}
	}
	return out, nil
}

// pausedClusterWithPolicy is a namespace with a cluster "idle" of no replicas (no member
// runs, so a pass of it waits Pending for ever) and an EtcdDefragPolicy of it every minute.
func pausedClusterWithPolicy(t *testing.T, policy string, edit func(*etcdv1.EtcdDefragPolicySpec)) (string, *etcdv1.EtcdDefragPolicy) {
	t.Helper()
	ns := namespace(t)
	create(t, &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "idle", Namespace: ns},
		Spec: etcdv1.EtcdClusterSpec{Replicas: ptr(int32(0)), Version: etcdVersion}})
	return ns, createDefragPolicy(t, ns, policy, "idle", edit)
}

// activeScheduled is nil when the policy's condition Active is True Scheduled.
func activeScheduled(p *etcdv1.EtcdDefragPolicy) error {
	c := meta.FindStatusCondition(p.Status.Conditions, etcdv1.DefragPolicyConditionActive)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != etcdv1.ReasonScheduled {
		return fmt.Errorf("condition Active %+v, want True Scheduled", c)
	}
	return nil
}

// An EtcdDefragPolicy every minute with Forbid on a paused cluster: the first time makes one
// pass, which waits; the next times are skipped with ConcurrencyForbidden, never a second
// pass, and status.active names the waiting one.
func TestDefragPolicyForbid(t *testing.T) {
	t.Parallel()
	ns, policy := pausedClusterWithPolicy(t, "forbid", func(s *etcdv1.EtcdDefragPolicySpec) {
		s.ConcurrencyPolicy, s.StartingDeadlineSeconds = etcdv1.DefragConcurrencyForbid, ptr(int64(50))
	})
	eventually(t, 200*time.Second, "policy forbid skipped a time for its waiting pass", func() error {
		passes, err := policyPasses(ns, "forbid")
		if err != nil {
			return err
		}
		if len(passes) > 1 {
			t.Fatalf("Forbid made %d passes while the first waits: %v", len(passes), passes)
		}
		forbidden, err := policyEvents(ns, "forbid", etcdv1.ReasonConcurrencyForbidden)
		if err != nil {
			return err
		}
		if len(passes) != 1 || len(forbidden) == 0 {
			return fmt.Errorf("%d passes, %d ConcurrencyForbidden events", len(passes), len(forbidden))
		}
		if ph := passes[0].Status.Phase; ph != "" && ph != etcdv1.EtcdDefragPhasePending {
			t.Fatalf("the pass of a paused cluster is %q, want Pending", ph)
		}
		return nil
	})
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(policy), policy); err != nil {
		t.Fatal(err)
	}
	if len(policy.Status.Active) != 1 {
		t.Errorf("status.active %v, want the waiting pass", policy.Status.Active)
	}
}

// An EtcdDefragPolicy every minute with startingDeadlineSeconds 0: every time is found late
// (the operator acts a moment after it), skipped with a Warning MissedSchedule and consumed
// (lastScheduleTime moves on); no pass is ever made.
func TestDefragPolicyMissedDeadline(t *testing.T) {
	t.Parallel()
	ns, late := pausedClusterWithPolicy(t, "late", func(s *etcdv1.EtcdDefragPolicySpec) { s.StartingDeadlineSeconds = ptr(int64(0)) })
	var first *metav1.Time
	eventually(t, 200*time.Second, "policy late missed two times", func() error {
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(late), late); err != nil {
			return err
		}
		missed, err := policyEvents(ns, "late", etcdv1.ReasonMissedSchedule)
		if err != nil {
			return err
		}
		if len(missed) == 0 || late.Status.LastScheduleTime == nil {
			return fmt.Errorf("MissedSchedule events %d, lastScheduleTime %v", len(missed), late.Status.LastScheduleTime)
		}
		if missed[0].Type != corev1.EventTypeWarning {
			t.Fatalf("MissedSchedule is a %s event, want Warning", missed[0].Type)
		}
		if first == nil {
			first = late.Status.LastScheduleTime.DeepCopy()
		}
		if !late.Status.LastScheduleTime.After(first.Time) {
			return fmt.Errorf("lastScheduleTime still %v", first)
		}
		return nil
	})
	if passes, err := policyPasses(ns, "late"); err != nil || len(passes) != 0 {
		t.Fatalf("a policy whose every time is missed made %d passes (%v)", len(passes), err)
	}
	if err := activeScheduled(late); err != nil {
		t.Error(err)
	}
}

// An EtcdDefragPolicy every minute with rule.all and historyLimit 1 on a running cluster:
// it makes a pass at each time, owned by the policy, that runs to Complete (the single
// member is skipped: its pause would cost the quorum); of the finished passes only the newest
// stays, and status.lastSuccessfulTime follows them.
func TestDefragPolicyRunsPassesAndKeepsItsHistory(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	createCluster(t, ns, "hist", 1)
	waitSettled(t, ns, "hist", 1, 4*time.Minute)
	policy := createDefragPolicy(t, ns, "hist", "hist", func(s *etcdv1.EtcdDefragPolicySpec) {
		s.HistoryLimit, s.StartingDeadlineSeconds, s.Rule = ptr(int32(1)), ptr(int64(50)), &etcdv1.DefragRule{All: true}
	})
	eventually(t, 270*time.Second, "three passes made, one kept", func() error {
		scheduled, err := policyEvents(ns, "hist", etcdv1.ReasonDefragScheduled)
		if err != nil {
			return err
		}
		passes, err := policyPasses(ns, "hist")
		if err != nil {
			return err
		}
		finished := 0
		for _, d := range passes {
			if d.Status.Phase == etcdv1.EtcdDefragPhaseFailed {
				t.Fatalf("EtcdDefrag %s failed: %+v", d.Name, d.Status)
			}
			if d.Status.Phase == etcdv1.EtcdDefragPhaseComplete {
				finished++
			}
			if owner := metav1.GetControllerOf(&d); owner == nil || owner.UID != policy.UID {
				t.Fatalf("EtcdDefrag %s is controlled by %+v, want the policy", d.Name, owner)
			}
		}
		if finished > 1 {
			return fmt.Errorf("%d finished passes kept, historyLimit 1", finished)
		}
		if len(scheduled) < 3 || finished != 1 {
			return fmt.Errorf("%d passes made, %d of %d kept finished", len(scheduled), finished, len(passes))
		}
		return nil
	})
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(policy), policy); err != nil {
		t.Fatal(err)
	}
	if policy.Status.LastSuccessfulTime == nil || policy.Status.LastScheduleTime == nil {
		t.Errorf("status %+v, want lastSuccessfulTime and lastScheduleTime", policy.Status)
	}
}

// useNamespace creates the namespace name unless it exists, and deletes it after the test if
// it created it.
func useNamespace(t *testing.T, name string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	err := k8s.Create(context.Background(), ns)
	if apierrors.IsAlreadyExists(err) {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), ns) })
}

// waitDefragComplete waits until the EtcdDefrag is Complete.
func waitDefragComplete(t *testing.T, ns, name string) {
	t.Helper()
	d := &etcdv1.EtcdDefrag{}
	eventually(t, 3*time.Minute, "EtcdDefrag "+name+" complete", func() error {
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, d); err != nil {
			return err
		}
		if d.Status.Phase != etcdv1.EtcdDefragPhaseComplete {
			return fmt.Errorf("phase %q, conditions %+v", d.Status.Phase, d.Status.Conditions)
		}
		return nil
	})
}

// Cozystack's documented EtcdDefrag and EtcdDefragPolicy examples (test/api/testdata/cozystack,
// v0.5.5), applied unchanged with kubectl in their namespace team-a beside the cluster they
// name, "etcd": both passes complete, and the policy is Active with the example's spec.
func TestCozystackDefragExamplesApply(t *testing.T) {
	t.Parallel()
	const ns = "team-a"
	useNamespace(t, ns)
	createCluster(t, ns, "etcd", 1)
	waitSettled(t, ns, "etcd", 1, 4*time.Minute)
	for _, f := range []string{"defrag.yaml", "defrag-policy.yaml"} {
		manifest, err := os.ReadFile(filepath.Join("..", "api", "testdata", "cozystack", f))
		if err != nil {
			t.Fatal(err)
		}
		applyManifest(t, ns, string(manifest))
	}
	waitDefragComplete(t, ns, "etcd-now")
	waitDefragComplete(t, ns, "etcd-guarded")
	eventually(t, time.Minute, "EtcdDefragPolicy nightly Active", func() error {
		p := &etcdv1.EtcdDefragPolicy{}
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "nightly"}, p); err != nil {
			return err
		}
		if p.Spec.ConcurrencyPolicy != etcdv1.DefragConcurrencyForbid || p.Spec.HistoryLimit == nil || *p.Spec.HistoryLimit != 3 {
			t.Fatalf("spec %+v is not the example's", p.Spec)
		}
		return activeScheduled(p)
	})
}
