package e2e

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/test/robustness"
)

const etcdVersion = "3.6.16"

func namespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-"}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), ns) })
	return ns.Name
}

func createCluster(t *testing.T, ns, name string, replicas int32) {
	t.Helper()
	createClusterAt(t, ns, name, replicas, etcdVersion)
}

func getCluster(t *testing.T, ns, name string) *etcdv1.EtcdCluster {
	t.Helper()
	c := &etcdv1.EtcdCluster{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, c); err != nil {
		t.Fatal(err)
	}
	return c
}

func setReplicas(t *testing.T, ns, name string, replicas int32) {
	t.Helper()
	c := getCluster(t, ns, name)
	patch := client.MergeFrom(c.DeepCopy())
	c.Spec.Replicas = &replicas
	if err := k8s.Patch(context.Background(), c, patch); err != nil {
		t.Fatal(err)
	}
}

// waitSettled waits until the cluster has n healthy voters, no learners and nothing in motion
// or degraded, in a status written for the current spec (robustness.Settled), so that after
// a spec change the status written before it does not count.
func waitSettled(t *testing.T, ns, name string, n int32, timeout time.Duration) *etcdv1.EtcdCluster {
	t.Helper()
	return waitSettledAfter(t, ns, name, n, time.Time{}, timeout)
}

// waitSettledAfter is waitSettled after a disruption at since that changed no spec (a Pod
// deleted, a restart): the settled status written before it would pass unchanged, so the
// status must also show the disruption was seen (robustness.SeenSince, as the robustness
// scenarios check it): a condition changed after since, or the member Pods are all Ready
// and one of them was created or became Ready after since. The second case is a Pod replaced
// faster than the operator's status noticed the member away: a one-member cluster's evicted
// Pod, recreated on its PVC while the workers were busy with other clusters, came back
// within one status write under the whole suite's load and changed no condition.
func waitSettledAfter(t *testing.T, ns, name string, n int32, since time.Time, timeout time.Duration) *etcdv1.EtcdCluster {
	t.Helper()
	var c *etcdv1.EtcdCluster
	eventually(t, timeout, fmt.Sprintf("%s/%s settled at %d members", ns, name, n), func() error {
		c = getCluster(t, ns, name)
		if err := robustness.Settled(c, n); err != nil {
			return err
		}
		if since.IsZero() {
			return nil
		}
		pods := &corev1.PodList{}
		if err := k8s.List(context.Background(), pods, client.InNamespace(ns), client.MatchingLabels{etcdv1.LabelCluster: name}); err != nil {
			return err
		}
		if err := robustness.SeenSince(c.Status.Conditions, pods.Items, int(n), since); err != nil {
			return fmt.Errorf("since %s: %w", since.Format(time.RFC3339Nano), err)
		}
		return nil
	})
	return c
}

// memberIDs maps member names to etcd member IDs as the status shows them.
func memberIDs(c *etcdv1.EtcdCluster) map[string]string {
	ids := map[string]string{}
	for _, m := range c.Status.Members {
		ids[m.Name] = m.ID
	}
	return ids
}

func TestBootstrapAndScaleThroughLearners(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	createCluster(t, ns, "scale", 1)
	waitSettled(t, ns, "scale", 1, 3*time.Minute)
	w := startWriter(t, ns, "scale", "scale")
	for i, n := range []int32{3, 5, 3, 1} {
		setReplicas(t, ns, "scale", n)
		c := waitSettled(t, ns, "scale", n, 5*time.Minute)
		t.Logf("settled at %d: members %v", n, memberIDs(c))
		switch {
		case n == 5 && w.failures() != 0:
			// Adding learners and promoting them stops no member and moves no leader.
			t.Fatalf("%d writes failed while the cluster grew: %v", w.failures(), w.errorsSeen())
		case i == 2:
			// Each voter removed from 5 was stopped first (MemberStopping): its clients moved
			// on at its graceful shutdown, so only a leadership handed over may fail a put.
			onlyLeaderMoveFailures(t, ns, w, "the scale-in from 5 to 3")
		}
	}
	// 3 -> 1 removes one voter of 3, stopped first, and then one of 2, which cannot be (its
	// removal could not commit without it): that one may fail the put in flight on it.
	w.stopAndVerifyAtMost(t, 50, eventCount(t, ns, etcdv1.ReasonLeaderMoved)+failuresPerDisruption)
	if stops := membersInEvents(t, ns, etcdv1.ReasonMemberStopping); len(stops) != 3 {
		t.Errorf("MemberStopping events name members %v, want the 3 removed from clusters of 5, 4 and 3", stops)
	}
	// 1 -> 3 -> 5 added four members and promoted each; 5 -> 3 -> 1 removed four.
	for reason, want := range map[string]int{"MemberAdded": 4, "MemberPromoted": 4, "MemberRemoved": 4} {
		if got := membersInEvents(t, ns, reason); len(got) != want {
			t.Errorf("%s events name members %v, want %d distinct members", reason, got, want)
		}
	}
}

// membersInEvents lists the members that the cluster's events with this reason are about.
func membersInEvents(t *testing.T, ns, reason string) []string {
	t.Helper()
	list := &eventsv1.EventList{}
	if err := k8s.List(context.Background(), list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var names []string
	for _, e := range list.Items {
		if e.Reason == reason && e.Regarding.Kind == "EtcdCluster" && e.Related != nil && !seen[e.Related.Name] {
			seen[e.Related.Name] = true
			names = append(names, e.Related.Name)
		}
	}
	sort.Strings(names)
	return names
}

func TestBootstrapThree(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	createCluster(t, ns, "three", 3)
	w := startWriter(t, ns, "three", "three")
	c := waitSettled(t, ns, "three", 3, 4*time.Minute)
	if c.Status.ClusterID == "" || len(c.Status.Members) != 3 {
		t.Fatalf("status lacks the cluster ID or members: %+v", c.Status)
	}
	time.Sleep(2 * time.Second) // keep writing to the settled cluster for a moment
	// The client Service routes only to members that serve: no write may fail.
	w.stopAndVerifyAtMost(t, 10, 0)
}

func TestPauseAndResumeKeepIdentity(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	createCluster(t, ns, "pause", 3)
	before := waitSettled(t, ns, "pause", 3, 4*time.Minute)
	w := startWriter(t, ns, "pause", "pause")
	time.Sleep(3 * time.Second)
	w.stopAndVerifyAtMost(t, 10, 0) // nothing happens to the cluster while it writes

	setReplicas(t, ns, "pause", 0)
	waitPaused(t, ns, "pause", 3)

	setReplicas(t, ns, "pause", 3)
	after := waitSettled(t, ns, "pause", 3, 4*time.Minute)
	if after.Status.ClusterID != before.Status.ClusterID {
		t.Fatalf("cluster ID changed across the pause: %s -> %s", before.Status.ClusterID, after.Status.ClusterID)
	}
	if b, a := fmt.Sprint(sorted(memberIDs(before))), fmt.Sprint(sorted(memberIDs(after))); a != b {
		t.Fatalf("member IDs changed across the pause:\n before %s\n after  %s", b, a)
	}
	w.stopAndVerify(t, 10) // the keys written before the pause are all still there

	setReplicas(t, ns, "pause", 5)
	waitSettled(t, ns, "pause", 5, 5*time.Minute)
}

// waitPaused waits until every Pod of the cluster is gone, its n PVCs kept, and its status
// says Paused.
func waitPaused(t *testing.T, ns, name string, n int) {
	t.Helper()
	eventually(t, 2*time.Minute, "every Pod stopped, every PVC kept", func() error {
		pods := &corev1.PodList{}
		if err := k8s.List(context.Background(), pods, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(pods.Items) > 0 {
			return fmt.Errorf("%d Pods still there", len(pods.Items))
		}
		pvcs := &corev1.PersistentVolumeClaimList{}
		if err := k8s.List(context.Background(), pvcs, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(pvcs.Items) != n {
			return fmt.Errorf("%d PVCs, want %d", len(pvcs.Items), n)
		}
		c := getCluster(t, ns, name)
		if cond := meta.FindStatusCondition(c.Status.Conditions, etcdv1.ConditionAvailable); cond == nil || cond.Reason != "Paused" {
			return fmt.Errorf("Available condition %+v, want reason Paused", cond)
		}
		return nil
	})
}

func sorted(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

func TestDeletedPodOfPVCMemberComesBackWithItsIdentity(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	createCluster(t, ns, "heal", 3)
	before := waitSettled(t, ns, "heal", 3, 4*time.Minute)
	w := startWriter(t, ns, "heal", "heal")
	victim := before.Status.Members[1].Name
	pod := &corev1.Pod{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: victim}, pod); err != nil {
		t.Fatal(err)
	}
	oldUID := pod.UID
	deleted := time.Now()
	if err := k8s.Delete(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "a new Pod for "+victim, func() error {
		p := &corev1.Pod{}
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(pod), p); err != nil {
			return err
		}
		if p.UID == oldUID {
			return fmt.Errorf("still the old Pod")
		}
		return nil
	})
	after := waitSettledAfter(t, ns, "heal", 3, deleted, 3*time.Minute)
	if memberIDs(after)[victim] != memberIDs(before)[victim] {
		t.Fatalf("member %s came back as %s, was %s", victim, memberIDs(after)[victim], memberIDs(before)[victim])
	}
	checkMembership(t, ns, "heal", 3) // etcd's own member list agrees with the status
	w.stopAndVerifyAtMost(t, 20, failuresPerDisruption)
}
