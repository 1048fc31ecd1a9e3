package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
	"github.com/quorumkeeper/etcd-operator/test/robustness"
)

// A follower's node evicts its Pod under memory pressure, as a kubelet's eviction manager
// does: the containers stopped, the Pod left Failed (Evicted), never started again. The
// member comes back on its PVC under its member ID while a client writes, and no
// acknowledged write is lost.
func TestEvictedMemberComesBackOnItsPVC(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	createCluster(t, ns, "evicted", 3)
	before := waitSettled(t, ns, "evicted", 3, 4*time.Minute)
	w := startWriter(t, ns, "evicted", "evicted")
	victim := follower(t, w, before)
	pod, pvc := memberPodAndPVC(t, ns, victim.Name)
	since := time.Now()
	if err := robustness.EvictUnderPressure(pod); err != nil {
		t.Fatal(err)
	}
	waitBackOnItsPVC(t, ns, "evicted", before, pod, pvc, since, "Evicted")
	w.stopAndVerifyAtMost(t, 20, failuresPerDisruption)
}

// The node of a follower is shut down gracefully, as a kubelet's graceful node shutdown
// does: every Pod on it stopped and left Failed (Terminated), the node away for 10 s; when
// it is back it starts none of them. The member comes back on its PVC under its member ID
// while a client writes, and no acknowledged write is lost. Not parallel: every Pod of the
// node stops, those of other tests (and perhaps the operator's) too.
func TestMemberOfANodeShutDownGracefullyComesBackOnItsPVC(t *testing.T) {
	ns := namespace(t)
	createCluster(t, ns, "shutdown", 3)
	before := waitSettled(t, ns, "shutdown", 3, 4*time.Minute)
	w := startWriter(t, ns, "shutdown", "shutdown")
	victim := follower(t, w, before)
	pod, pvc := memberPodAndPVC(t, ns, victim.Name)
	since := time.Now()
	if err := robustness.ShutDownNode(pod.Spec.NodeName, 10); err != nil {
		t.Fatal(err)
	}
	waitBackOnItsPVC(t, ns, "shutdown", before, pod, pvc, since, "node shutdown")
	w.stopAndVerifyAtMost(t, 20, failuresPerDisruption)
}

// follower is a voter that does not lead, as etcd says through the writer's client.
func follower(t *testing.T, w *writer, c *etcdv1.EtcdCluster) etcdv1.MemberSummary {
	t.Helper()
	leader := leaderID(t, w)
	for _, m := range c.Status.Members {
		if m.ID != leader && m.Role == etcdv1.RoleVoter {
			return m
		}
	}
	t.Fatalf("no follower among %v (leader %s)", memberIDs(c), leader)
	return etcdv1.MemberSummary{}
}

// leaderID is the ID (hex) of the member that leads, as etcd says through the writer's client.
func leaderID(t *testing.T, w *writer) string {
	t.Helper()
	var leader string
	eventually(t, time.Minute, "asking etcd which member leads", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		st, err := w.cli.Status(ctx, w.cli.Endpoints()[0])
		if err != nil {
			return err
		}
		leader = etcd.FormatID(st.Leader)
		return nil
	})
	return leader
}

func memberPodAndPVC(t *testing.T, ns, member string) (*corev1.Pod, *corev1.PersistentVolumeClaim) {
	t.Helper()
	pod := &corev1.Pod{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: member}, pod); err != nil {
		t.Fatal(err)
	}
	pvc := &corev1.PersistentVolumeClaim{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: member}, pvc); err != nil {
		t.Fatal(err)
	}
	return pod, pvc
}

// waitBackOnItsPVC waits until the member of the stopped Pod has a new Pod, Ready, on the
// same PVC, the operator said why it replaced the Pod (an event naming how it ended), and
// the cluster settled with every member under the ID it had.
func waitBackOnItsPVC(t *testing.T, ns, name string, before *etcdv1.EtcdCluster, stopped *corev1.Pod, pvc *corev1.PersistentVolumeClaim, since time.Time, how string) {
	t.Helper()
	eventually(t, 4*time.Minute, "a new Pod of "+stopped.Name+" Ready", func() error {
		pod := &corev1.Pod{}
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(stopped), pod); err != nil {
			return err
		}
		if pod.UID == stopped.UID {
			return fmt.Errorf("still the Pod of before: %s %s %q", pod.Status.Phase, pod.Status.Reason, pod.Status.Message)
		}
		if !robustness.PodReady(pod) {
			return fmt.Errorf("the new Pod is not Ready (%s)", pod.Status.Phase)
		}
		return nil
	})
	list := &eventsv1.EventList{}
	if err := k8s.List(context.Background(), list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var said []string
	for _, e := range list.Items {
		if e.Reason == etcdv1.ReasonTerminalPodReplaced && e.Regarding.Name == stopped.Name {
			said = append(said, e.Note)
		}
	}
	if !slices.ContainsFunc(said, func(note string) bool { return strings.Contains(note, how) }) {
		t.Errorf("%s events of %s: %q, want one that says %q", etcdv1.ReasonTerminalPodReplaced, stopped.Name, said, how)
	}
	after := waitSettledAfter(t, ns, name, 3, since, 3*time.Minute)
	if got, want := memberIDs(after), memberIDs(before); !maps.Equal(got, want) {
		t.Fatalf("members %v after, %v before: the member must come back under its ID", got, want)
	}
	kept := &corev1.PersistentVolumeClaim{}
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(pvc), kept); err != nil || kept.UID != pvc.UID {
		t.Fatalf("the member's PVC was not kept: %v (uid %s, was %s)", err, kept.UID, pvc.UID)
	}
}
