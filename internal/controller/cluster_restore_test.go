package controller

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

func TestARestoredClusterBootstrapsFromOneSeed(t *testing.T) {
	plain := &etcdv1.EtcdCluster{}
	restored := &etcdv1.EtcdCluster{Spec: etcdv1.EtcdClusterSpec{Bootstrap: &etcdv1.BootstrapSpec{Restore: &etcdv1.RestoreSpec{}}}}
	if foundingCount(plain, 3) != 3 || foundingCount(restored, 3) != 1 || foundingCount(restored, 0) != 0 {
		t.Error("a restore must bootstrap one seed; a plain cluster all its members")
	}
}

func TestRestoreContainerFailureReadsTheAgentsResult(t *testing.T) {
	status := func(state, last *corev1.ContainerStateTerminated) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{InitContainerStatuses: []corev1.ContainerStatus{{
			Name: "restore", State: corev1.ContainerState{Terminated: state},
			LastTerminationState: corev1.ContainerState{Terminated: last},
		}}}}
	}
	failed := &corev1.ContainerStateTerminated{ExitCode: 1, Message: `{"reason":"CredentialsRejected","message":"access key refused"}`}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want string
	}{
		{"failing now", status(failed, nil), "CredentialsRejected: access key refused"},
		{"waiting after a failure", status(nil, failed), "CredentialsRejected"},
		{"succeeded after a failure", status(&corev1.ContainerStateTerminated{ExitCode: 0}, failed), ""},
		{"no result", status(&corev1.ContainerStateTerminated{ExitCode: 2, Reason: "Error"}, nil), "exited with code 2"},
		{"not started", &corev1.Pod{}, ""},
	} {
		got := restoreContainerFailure(tc.pod)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
