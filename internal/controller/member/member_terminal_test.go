package member

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// The kubelet's terminal phases are the ones it never starts a Pod from again: evicted under
// node pressure, stopped for a graceful node shutdown, or every container exited 0. A Pod in
// any other phase is left to the kubelet.
func TestDecideTerminalPod(t *testing.T) {
	for _, tc := range []struct {
		name            string
		phase           corev1.PodPhase
		reason, message string
		medium          etcdv1.StorageMedium
		want            string // Ready reason, "" for no verdict
		says            []string
	}{
		{"running", corev1.PodRunning, "", "", "", "", nil},
		{"pending", corev1.PodPending, "", "", "", "", nil},
		{"unknown", corev1.PodUnknown, "", "", "", "", nil},
		{"evicted", corev1.PodFailed, "Evicted", "The node was low on resource: memory.", "", etcdv1.ReasonPodTerminal,
			[]string{"Failed (Evicted: The node was low on resource: memory.)", "PVC db-2", "member 2"}},
		{"node shutdown", corev1.PodFailed, "Terminated", "Pod was terminated in response to imminent node shutdown.", "", etcdv1.ReasonPodTerminal,
			[]string{"Failed (Terminated: Pod was terminated in response to imminent node shutdown.)"}},
		{"node shutdown, older kubelet", corev1.PodFailed, "Shutdown", "", "", etcdv1.ReasonPodTerminal, []string{"Failed (Shutdown)"}},
		{"exited 0 on SIGTERM", corev1.PodSucceeded, "", "", "", etcdv1.ReasonPodTerminal, []string{"Succeeded"}},
		{"evicted tmpfs member", corev1.PodFailed, "Evicted", "low on memory", etcdv1.StorageMediumMemory, etcdv1.ReasonDataLost,
			[]string{"tmpfs", "Failed (Evicted: low on memory)"}},
		{"tmpfs member exited 0", corev1.PodSucceeded, "", "", etcdv1.StorageMediumMemory, etcdv1.ReasonDataLost, []string{"tmpfs"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "db-2"},
				Status: corev1.PodStatus{Phase: tc.phase, Reason: tc.reason, Message: tc.message}}
			m := &etcdv1.EtcdMember{ObjectMeta: metav1.ObjectMeta{Name: "db-2"},
				Spec:   etcdv1.EtcdMemberSpec{Storage: etcdv1.StorageSpec{Medium: tc.medium}},
				Status: etcdv1.EtcdMemberStatus{MemberID: "2"}}
			v := decideTerminalPod(pod, m)
			if tc.want == "" {
				if v != nil {
					t.Fatalf("a %s Pod is the kubelet's to run: %+v", tc.phase, v)
				}
				return
			}
			if v == nil {
				t.Fatalf("no verdict for a %s Pod: the kubelet never starts it again", tc.phase)
			}
			if v.ready.Status != metav1.ConditionFalse || v.ready.Reason != tc.want {
				t.Fatalf("Ready %+v, want False/%s", v.ready, tc.want)
			}
			for _, s := range tc.says {
				if !strings.Contains(v.event, s) {
					t.Errorf("event %q does not say %q", v.event, s)
				}
			}
			if how := terminalPod(pod); !strings.Contains(v.ready.Message, how) {
				t.Errorf("condition %q does not say how the Pod ended (%s)", v.ready.Message, how)
			}
		})
	}
}

// A member's Pod its node left Failed (evicted) is deleted and created again on the member's
// data, under its ID; until then the member is not Ready. A tmpfs member's is deleted and
// not created again: its data went with it.
func TestATerminalPodIsReplaced(t *testing.T) {
	for _, medium := range []etcdv1.StorageMedium{"", etcdv1.StorageMediumMemory} {
		t.Run("medium "+string(medium), func(t *testing.T) {
			h := newMemberHarness(t, medium)
			// The member has seen its Pod Ready; then the kubelet evicts it.
			h.readyPod("db-2")
			h.reconcile("db-2")
			if ready := meta.FindStatusCondition(h.member("db-2").Status.Conditions, etcdv1.MemberConditionReady); ready == nil || ready.Status != metav1.ConditionTrue {
				t.Fatalf("Ready %+v before the eviction", ready)
			}
			pod := h.pod("db-2")
			pod.Status.Phase, pod.Status.Reason, pod.Status.Message = corev1.PodFailed, "Evicted", "The node was low on resource: memory."
			if err := h.api.Status().Update(context.Background(), pod); err != nil {
				t.Fatal(err)
			}
			h.reconcile("db-2")
			if h.pod("db-2") != nil {
				t.Fatal("the evicted Pod is still there: the kubelet never starts it again")
			}
			ready := meta.FindStatusCondition(h.member("db-2").Status.Conditions, etcdv1.MemberConditionReady)
			if ready == nil || ready.Status != metav1.ConditionFalse || !strings.Contains(ready.Message, "Evicted") {
				t.Fatalf("Ready %+v after the eviction", ready)
			}
			h.reconcile("db-2")
			if medium == etcdv1.StorageMediumMemory {
				h.expectNotStarted("db-2")
				return
			}
			again := h.pod("db-2")
			if again == nil {
				t.Fatal("no new Pod")
			}
			args := strings.Join(again.Spec.Containers[0].Args, " ")
			if specs.InitialClusterOf(again) != specs.InitialCluster(h.cluster, []string{"db-2"}) ||
				!strings.Contains(args, "--initial-cluster-state=existing") {
				t.Fatalf("args %s, initial cluster %q: the new Pod must start on the member's data under its ID", args, specs.InitialClusterOf(again))
			}
		})
	}
}
