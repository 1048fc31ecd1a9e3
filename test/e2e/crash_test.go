package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/test/robustness"
)

const operatorNamespace = robustness.OperatorNamespace

// killOperator deletes the operator's Pods at once (no grace), as a crash would.
func killOperator(t *testing.T) {
	t.Helper()
	n, err := robustness.KillOperator(context.Background(), k8s)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("killed %d operator Pods", n)
}

// The operator dies in the middle of a scale-out; its successor converges with no orphan or
// duplicate member, and no acknowledged write is lost.
func TestOperatorKilledDuringScaleOutConverges(t *testing.T) {
	ns := namespace(t)
	createCluster(t, ns, "crash", 3)
	waitSettled(t, ns, "crash", 3, 4*time.Minute)
	w := startWriter(t, ns, "crash", "crash")
	setReplicas(t, ns, "crash", 5)
	eventually(t, 2*time.Minute, "the scale-out under way", func() error {
		c := getCluster(t, ns, "crash")
		if len(c.Status.Members) < 4 && c.Status.Learners == 0 {
			return fmt.Errorf("members %d, learners %d", len(c.Status.Members), c.Status.Learners)
		}
		return nil
	})
	killOperator(t)
	c := waitSettled(t, ns, "crash", 5, 6*time.Minute)
	members := &etcdv1.EtcdMemberList{}
	if err := k8s.List(context.Background(), members, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(members.Items) != 5 || len(c.Status.Members) != 5 {
		t.Fatalf("%d EtcdMembers and %d members in status, want 5 of each", len(members.Items), len(c.Status.Members))
	}
	seen := map[string]bool{}
	for _, m := range c.Status.Members {
		if m.ID == "" || seen[m.ID] {
			t.Fatalf("member %s has a missing or duplicate ID %q: %v", m.Name, m.ID, memberIDs(c))
		}
		seen[m.ID] = true
	}
	w.stopAndVerifyAtMost(t, 20, 0) // the operator's death touches no member
}

func TestBootstrapFive(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	createCluster(t, ns, "five", 5)
	w := startWriter(t, ns, "five", "five")
	waitSettled(t, ns, "five", 5, 5*time.Minute)
	time.Sleep(2 * time.Second)
	w.stopAndVerifyAtMost(t, 10, 0)
}

// setOperatorReplicas scales the operator's Deployment and waits until that many are ready.
func setOperatorReplicas(t *testing.T, n int32) {
	t.Helper()
	changeOperator(t, fmt.Sprintf("%d operator replicas", n), func(d *appsv1.Deployment) { d.Spec.Replicas = &n })
}

// changeOperator patches the operator's Deployment and waits until the rollout is done.
func changeOperator(t *testing.T, what string, change func(*appsv1.Deployment)) {
	t.Helper()
	d := &appsv1.Deployment{}
	key := client.ObjectKey{Namespace: operatorNamespace, Name: "etcd-operator"}
	if err := k8s.Get(context.Background(), key, d); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(d.DeepCopy())
	change(d)
	if err := k8s.Patch(context.Background(), d, patch); err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Minute, what+" rolled out", func() error {
		if err := k8s.Get(context.Background(), key, d); err != nil {
			return err
		}
		s, want := d.Status, *d.Spec.Replicas
		if s.ObservedGeneration != d.Generation || s.UpdatedReplicas != want || s.ReadyReplicas != want || s.Replicas != want {
			return fmt.Errorf("rollout: %+v", s)
		}
		return nil
	})
}

// Two operator replicas: one leads, and killing the leader mid-scale hands over safely: the
// killed leader began the scale-out and its successor finished it (their events say so).
func TestTwoOperatorReplicasHandOverLeadership(t *testing.T) {
	setOperatorReplicas(t, 2)
	t.Cleanup(func() { setOperatorReplicas(t, 1) })
	ns := namespace(t)
	createCluster(t, ns, "ha", 3)
	waitSettled(t, ns, "ha", 3, 4*time.Minute)
	lease := &coordinationv1.Lease{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: operatorNamespace, Name: "etcd-operator.cozystack.io"}, lease); err != nil {
		t.Fatalf("no leader lease: %v", err)
	}
	leader := *lease.Spec.HolderIdentity
	pod := leaderPod(t, leader)
	w := startWriter(t, ns, "ha", "ha")
	setReplicas(t, ns, "ha", 5)
	eventually(t, 2*time.Minute, "the leader's first scale-out step", func() error {
		if by := scaleEventsBy(t, ns); by[pod.Name] == 0 {
			return fmt.Errorf("scale-out steps by operator Pod: %v", by)
		}
		return nil
	})
	if err := k8s.Delete(context.Background(), pod, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	waitSettled(t, ns, "ha", 5, 6*time.Minute)
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(lease), lease); err != nil {
		t.Fatal(err)
	}
	if *lease.Spec.HolderIdentity == leader {
		t.Fatalf("leadership did not move from the killed %s", leader)
	}
	by := scaleEventsBy(t, ns)
	successor := -by[pod.Name]
	for _, n := range by {
		successor += n
	}
	if by[pod.Name] == 0 || successor == 0 {
		t.Fatalf("scale-out steps by operator Pod %v: want some by the killed leader %s and some by its successor", by, pod.Name)
	}
	w.stopAndVerifyAtMost(t, 20, 0) // growing stops no member
}

// leaderPod is the operator Pod holding the lease: the holder identity is
// "<hostname>_<uuid>", and a Pod's hostname is its name.
func leaderPod(t *testing.T, holder string) *corev1.Pod {
	t.Helper()
	pods := &corev1.PodList{}
	if err := k8s.List(context.Background(), pods, client.InNamespace(operatorNamespace)); err != nil {
		t.Fatal(err)
	}
	for i := range pods.Items {
		if strings.HasPrefix(holder, pods.Items[i].Name+"_") {
			return &pods.Items[i]
		}
	}
	t.Fatalf("the lease holder %q is none of the operator Pods", holder)
	return nil
}

// scaleEventsBy counts the MemberAdded and MemberPromoted events of the namespace by the
// operator Pod that reported them (client-go names the reporting instance
// "<controller>-<hostname>").
func scaleEventsBy(t *testing.T, ns string) map[string]int {
	t.Helper()
	list := &eventsv1.EventList{}
	if err := k8s.List(context.Background(), list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	by := map[string]int{}
	for _, e := range list.Items {
		if e.Reason == "MemberAdded" || e.Reason == "MemberPromoted" {
			by[strings.TrimPrefix(e.ReportingInstance, "etcd-operator-")]++
		}
	}
	return by
}
