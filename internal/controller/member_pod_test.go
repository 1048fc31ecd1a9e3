package controller

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

func TestPodReadinessNamesAnImageThatCannotBePulled(t *testing.T) {
	pod := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{
		Image: "quay.io/coreos/etcd:v3.5.0",
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull", Message: "not found"}},
	}}}}
	got := podReadiness(pod)
	if got.Reason != ReasonImagePullFailed || !strings.Contains(got.Message, "quay.io/coreos/etcd:v3.5.0") || !strings.Contains(got.Message, "spec.version") {
		t.Fatalf("%+v", got)
	}
}

func TestVolumeProblemNamesAMissingStorageClass(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = etcdv1.AddToScheme(scheme)
	pvc := func(name, class string, phase corev1.PersistentVolumeClaimPhase) client.Object {
		return &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
			Spec:       corev1.PersistentVolumeClaimSpec{StorageClassName: &class},
			Status:     corev1.PersistentVolumeClaimStatus{Phase: phase},
		}
	}
	api := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		pvc("missing-1", "nope", corev1.ClaimPending),
		pvc("present-1", "local", corev1.ClaimPending),
		pvc("bound-1", "nope", corev1.ClaimBound),
		&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "local"}},
	).Build()
	r := &MemberReconciler{Client: api}
	for name, want := range map[string]string{"missing-1": "StorageClassNotFound", "present-1": "", "bound-1": "", "gone-1": ""} {
		m := &etcdv1.EtcdMember{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}}
		why, err := r.volumeProblem(context.Background(), m)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		switch {
		case want == "" && why != nil:
			t.Errorf("%s: unexpected problem %+v", name, why)
		case want != "" && (why == nil || why.Reason != want || !strings.Contains(why.Message, `StorageClass "nope" does not exist`)):
			t.Errorf("%s: %+v, want reason %s naming the class", name, why, want)
		}
	}
}

func TestPodReadinessSaysWhyACrashLoopingMemberExits(t *testing.T) {
	pod := func(reason string, code int32, message string) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
			State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 10s"}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: reason, ExitCode: code, Message: message}},
		}}}}
	}
	for _, tc := range []struct {
		pod  *corev1.Pod
		want string
	}{
		{pod("OOMKilled", 137, ""), "last exit: OOMKilled, code 137"},
		{pod("Error", 1, "{\"level\":\"info\",\"msg\":\"x\"}\n{\"level\":\"fatal\",\"ts\":\"2026\",\"msg\":\"error verifying flags\",\"error\":\"unknown flag\"}\n"),
			"last exit: Error, code 1: error verifying flags: unknown flag"},
		{pod("Error", 2, "panic: boom"), "last exit: Error, code 2: panic: boom"},
	} {
		got := podReadiness(tc.pod)
		if got.Reason != "CrashLoopBackOff" || !strings.HasSuffix(got.Message, tc.want) || strings.Contains(got.Message, "2026") {
			t.Errorf("%+v, want a message ending in %q", got, tc.want)
		}
	}
}
