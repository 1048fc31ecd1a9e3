package node

import (
	"context"
	"testing"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// A Pod this node evicted, or stopped for a graceful shutdown, is left as a kubelet leaves
// it: its containers stopped with their grace period (SIGTERM first), Failed with the
// kubelet's reason and message, written to the API, and nothing of it left running to be
// restarted. An agent started again (a new provider) does not start it either.
func TestAPodStoppedForGoodStaysStopped(t *testing.T) {
	for _, end := range []podEnd{evictedUnderPressure, stoppedForShutdown} {
		t.Run(end.reason, func(t *testing.T) {
			pod := helperPod("victim", 600, "sleep=1h")
			client := fake.NewClientset(pod)
			p := newTestProvider(t, client)
			if err := p.CreatePod(t.Context(), pod); err != nil {
				t.Fatal(err)
			}
			waitForContainerRunning(t, p, pod)
			run := p.lookup(pod.Namespace, pod.Name)
			if err := p.end(t.Context(), run, end); err != nil {
				t.Fatal(err)
			}
			select {
			case <-run.done:
			default:
				t.Fatal("the Pod's supervisor still runs: its containers may start again")
			}
			stored, err := client.CoreV1().Pods(pod.Namespace).Get(t.Context(), pod.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			s := stored.Status
			if s.Phase != corev1.PodFailed || s.Reason != end.reason || s.Message != end.message {
				t.Fatalf("status %s/%s/%q, want Failed/%s/%q", s.Phase, s.Reason, s.Message, end.reason, end.message)
			}
			if term := s.ContainerStatuses[0].State.Terminated; term == nil || term.ExitCode != 143 {
				t.Errorf("container %+v, want terminated by SIGTERM (exit 143): stopped within its grace period", s.ContainerStatuses[0].State)
			}
			if !hasCondition(s.Conditions, corev1.DisruptionTarget, corev1.ConditionTrue) || hasCondition(s.Conditions, corev1.PodReady, corev1.ConditionTrue) {
				t.Errorf("conditions %+v, want DisruptionTarget and not Ready", s.Conditions)
			}

			again := newProvider(p.cfg, p.sources, p.declared)
			t.Cleanup(func() { again.stopAll(context.Background(), true) })
			if err := again.CreatePod(t.Context(), stored); err != nil {
				t.Fatal(err)
			}
			if _, err := again.GetPod(t.Context(), pod.Namespace, pod.Name); !errdefs.IsNotFound(err) {
				t.Fatalf("an agent started again took up a Failed Pod (err %v): a kubelet never starts it again", err)
			}
		})
	}
}

func hasCondition(conds []corev1.PodCondition, t corev1.PodConditionType, s corev1.ConditionStatus) bool {
	for _, c := range conds {
		if c.Type == t && c.Status == s {
			return true
		}
	}
	return false
}
