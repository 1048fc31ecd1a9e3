package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/failpoint"
)

// shortLease are leader-election timings for a run of crashes: the restarted operator waits
// one lease duration for the Lease its crashed predecessor held, every crash. Only while no
// other test runs (the crash tests run alone), so the API server answers renewals at once.
var shortLease = []string{"--leader-elect-lease-duration=5s", "--leader-elect-renew-deadline=4s", "--leader-elect-retry-period=1s"}

// setOperatorFailpoints turns the operator's failpoints, and the short lease, on or off and
// waits for the rollout.
func setOperatorFailpoints(t *testing.T, on bool) {
	t.Helper()
	changeOperator(t, fmt.Sprintf("failpoints=%v", on), func(d *appsv1.Deployment) {
		container := &d.Spec.Template.Spec.Containers[0]
		var env []corev1.EnvVar
		for _, e := range container.Env {
			if e.Name != failpoint.EnvVar {
				env = append(env, e)
			}
		}
		args := slices.DeleteFunc(slices.Clone(container.Args), func(arg string) bool {
			return strings.HasPrefix(arg, "--leader-elect-")
		})
		if on {
			env = append(env, corev1.EnvVar{Name: failpoint.EnvVar, Value: "enabled"})
			args = append(args, shortLease...)
		}
		container.Env, container.Args = env, args
	})
}

// operatorCrashes counts the restarts of the operator's containers, and fails the test if
// one of them exited for another reason than a failpoint.
func operatorCrashes(t *testing.T) int32 {
	t.Helper()
	pods := &corev1.PodList{}
	if err := k8s.List(context.Background(), pods, client.InNamespace(operatorNamespace),
		client.MatchingLabels{"app.kubernetes.io/name": "etcd-operator"}); err != nil {
		t.Fatal(err)
	}
	var n int32
	for _, p := range pods.Items {
		for _, cs := range p.Status.ContainerStatuses {
			n += cs.RestartCount
			if last := cs.LastTerminationState.Terminated; last != nil && last.ExitCode != failpoint.ExitCode {
				t.Fatalf("operator container of %s exited with %d (%s), not at a failpoint; the end of its log:\n%s",
					p.Name, last.ExitCode, last.Reason, previousLogTail(t, &p, cs.Name))
			}
		}
	}
	return n
}

// armFailpoint makes the operator crash after step for this cluster (or stops it, with "").
func armFailpoint(t *testing.T, ns, name, step string) {
	t.Helper()
	c := getCluster(t, ns, name)
	patch := client.MergeFrom(c.DeepCopy())
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	c.Annotations[etcdv1.AnnotationCrashAfter] = step
	if step == "" {
		delete(c.Annotations, etcdv1.AnnotationCrashAfter)
	}
	if err := k8s.Patch(context.Background(), c, patch); err != nil {
		t.Fatal(err)
	}
}

// crashAfter arms the failpoint, does what reaches it, waits for the operator to die there
// and disarms it, so that the restarted operator finishes from the state the crash left.
func crashAfter(t *testing.T, ns, name, step string, action func()) {
	t.Helper()
	before := operatorCrashes(t)
	armFailpoint(t, ns, name, step)
	action()
	waitForCrash(t, ns, name, step, before)
}

// waitForCrash waits until the operator has crashed more often than before, then disarms.
func waitForCrash(t *testing.T, ns, name, step string, before int32) {
	t.Helper()
	eventually(t, 3*time.Minute, "the operator crashing after "+step, func() error {
		if n := operatorCrashes(t); n == before {
			return fmt.Errorf("%d crashes so far", n)
		}
		return nil
	})
	armFailpoint(t, ns, name, "")
	t.Logf("the operator crashed after %s", step)
}

// checkMembership fails unless EtcdMembers, etcd's members and the status agree on n
// members with distinct IDs: no orphan, no duplicate.
func checkMembership(t *testing.T, ns, name string, n int) {
	t.Helper()
	checkMembershipWith(t, ns, name, n, access{})
}

// checkMembershipWith is checkMembership for a cluster reached the way a says.
func checkMembershipWith(t *testing.T, ns, name string, n int, a access) {
	t.Helper()
	c := getCluster(t, ns, name)
	members := &etcdv1.EtcdMemberList{}
	if err := k8s.List(context.Background(), members, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	cli := dialClusterWith(t, ns, name, a)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list, err := cli.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(members.Items) != n || len(list.Members) != n || len(c.Status.Members) != n {
		t.Fatalf("%d EtcdMembers, %d etcd members, %d in status; want %d of each", len(members.Items), len(list.Members), len(c.Status.Members), n)
	}
	inEtcd := map[string]bool{}
	for _, m := range list.Members {
		if m.IsLearner || m.Name == "" {
			t.Fatalf("etcd member %x (%q) is a learner or never started", m.ID, m.Name)
		}
		inEtcd[fmt.Sprintf("%x", m.ID)] = true
	}
	for _, m := range c.Status.Members {
		if !inEtcd[m.ID] {
			t.Fatalf("member %s has ID %q, which etcd does not know: %v", m.Name, m.ID, memberIDs(c))
		}
		delete(inEtcd, m.ID)
	}
}

// The operator crashes right after each step of bootstrap, scale-out, scale-in, pause and
// resume; each time its restart converges with no orphan or duplicate member, and no write
// acknowledged through the client Service is lost.
func TestCrashAfterEachStepConverges(t *testing.T) {
	setOperatorFailpoints(t, true)
	t.Cleanup(func() { setOperatorFailpoints(t, false) })
	ns := namespace(t)
	const name = "fp"
	c := &etcdv1.EtcdCluster{Spec: etcdv1.EtcdClusterSpec{Replicas: ptr(int32(3)), Version: etcdVersion}}
	c.Name, c.Namespace = name, ns
	c.Annotations = map[string]string{etcdv1.AnnotationCrashAfter: failpoint.AfterBootstrapMember}
	before := operatorCrashes(t)
	if err := k8s.Create(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	waitForCrash(t, ns, name, failpoint.AfterBootstrapMember, before)
	waitSettled(t, ns, name, 3, 4*time.Minute)
	checkMembership(t, ns, name, 3)
	w := startWriter(t, ns, name, name)

	for _, s := range []struct {
		step     string
		replicas int32
	}{
		{failpoint.AfterCreateMember, 4},
		{failpoint.AfterAddLearner, 5},
		{failpoint.AfterRemovalMark, 4},
		{failpoint.AfterMemberRemove, 3},
		{failpoint.AfterPromote, 4},
	} {
		crashAfter(t, ns, name, s.step, func() { setReplicas(t, ns, name, s.replicas) })
		waitSettled(t, ns, name, s.replicas, 5*time.Minute)
		checkMembership(t, ns, name, int(s.replicas))
	}
	// Two removals (5 -> 4 -> 3) may each fail a write; the crashes touch no member.
	w.stopAndVerifyAtMost(t, 20, 2*failuresPerDisruption)

	ids := memberIDs(getCluster(t, ns, name))
	crashAfter(t, ns, name, failpoint.AfterDormantFlip, func() { setReplicas(t, ns, name, 0) })
	waitPaused(t, ns, name, 4)
	crashAfter(t, ns, name, failpoint.AfterDormantFlip, func() { setReplicas(t, ns, name, 4) })
	resumed := waitSettled(t, ns, name, 4, 5*time.Minute)
	checkMembership(t, ns, name, 4)
	if got := memberIDs(resumed); fmt.Sprint(sorted(got)) != fmt.Sprint(sorted(ids)) {
		t.Fatalf("member IDs changed across a crashed pause and resume: %v, then %v", ids, got)
	}
	w.stopAndVerify(t, 20) // every write from before the pause is still there
}

func ptr[T any](v T) *T { return &v }

// previousLogTail is the end of the log of the container's last run, which says why it ended
// (the local cluster's node agent writes there when a probe failed and it killed the container).
func previousLogTail(t *testing.T, pod *corev1.Pod, container string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	raw, err := kubeClientset(t).CoreV1().Pods(pod.Namespace).GetLogs(pod.Name,
		&corev1.PodLogOptions{Container: container, Previous: true, TailLines: ptr(int64(40))}).DoRaw(ctx)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	return string(raw)
}
