package node

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// A terminal status whose write meets a conflict (virtual-kubelet's status sync wrote in
// between, perhaps a status from before the containers stopped) is written again on the newer
// object: a Pod a graceful node shutdown stopped must not stay Running in the API, or the
// agent, started again, runs it again.
func TestWriteStatusWritesAgainAfterAConflict(t *testing.T) {
	pod := helperPod("stopped", 30)
	pod.Status.Phase = corev1.PodRunning
	client := fake.NewClientset(pod)
	conflicts := 2
	client.PrependReactor("update", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "status" || conflicts == 0 {
			return false, nil, nil
		}
		conflicts--
		return true, nil, apierrors.NewConflict(corev1.Resource("pods"), pod.Name, errors.New("the object has been modified"))
	})
	p := &provider{cfg: Config{Client: client}}
	gone, err := p.writeStatus(t.Context(), pod, corev1.PodStatus{Phase: corev1.PodFailed, Reason: stoppedForShutdown.reason})
	if gone || err != nil {
		t.Fatalf("writeStatus: gone %v, %v", gone, err)
	}
	got, err := client.CoreV1().Pods(pod.Namespace).Get(t.Context(), pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.Phase != corev1.PodFailed || got.Status.Reason != stoppedForShutdown.reason {
		t.Fatalf("the Pod is %s (%q) in the API after two conflicts, want Failed (%s)", got.Status.Phase, got.Status.Reason, stoppedForShutdown.reason)
	}
}
