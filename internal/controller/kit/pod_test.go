package kit

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestDataErrorTellsDataFromOtherCrashes(t *testing.T) {
	pod := func(reason, message string, code int32) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
			State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: reason, Message: message, ExitCode: code}},
		}}}}
	}
	cases := []struct {
		pod  *corev1.Pod
		want bool
	}{
		{pod("Error", `{"level":"fatal","msg":"discovery failed","error":"cannot fetch cluster info from peer urls: could not retrieve cluster information from the given URLs"}`, 1), true},
		{pod("Error", `{"level":"fatal","msg":"failed to open WAL","error":"wal: crc mismatch"}`, 1), true},
		{pod("Error", `{"level":"fatal","msg":"discovery failed","error":"member 8e9e05c52164694d has already been bootstrapped"}`, 1), true},
		{pod("Error", `{"level":"panic","msg":"failed to recover v3 backend from snapshot","error":"failed to find database snapshot file (snap: snapshot file doesn't exist)"}`, 2), true},
		{pod("Error", "\tgo.etcd.io/etcd/server/v3/storage/wal.(*WAL).ReadAll(0xc000)\n\tgo.etcd.io/etcd/server/v3/etcdserver.bootstrapWALFromSnapshot(...)", 2), true},
		{pod("OOMKilled", "wal: crc mismatch", 137), false},
		{pod("Error", `{"level":"fatal","msg":"error verifying flags","error":"unknown flag: --quota-backend"}`, 1), false},
		{pod("Completed", "cannot fetch cluster info from peer urls", 0), false},
		{nil, false},
	}
	for i, tc := range cases {
		if got := DataError(tc.pod) != ""; got != tc.want {
			t.Errorf("case %d: data error %v, want %v", i, got, tc.want)
		}
	}
}

func TestEtcdStoppedIsWhatTheKubeletReported(t *testing.T) {
	etcdIn := func(phase corev1.PodPhase, state corev1.ContainerState) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{Phase: phase, ContainerStatuses: []corev1.ContainerStatus{{Name: "etcd", State: state}}}}
	}
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	backOff := corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}
	exited := corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1}}
	cases := []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{"no Pod: nothing reported", nil, false},
		{"nothing reported yet", &corev1.Pod{}, false},
		{"not started yet", &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending}}, true},
		{"over", &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed}}, true},
		{"runs", etcdIn(corev1.PodRunning, running), false},
		{"in a back-off after an exit", etcdIn(corev1.PodRunning, backOff), true},
		{"just exited", etcdIn(corev1.PodRunning, exited), true},
		{"etcd's container waits while the phase still says Running", etcdIn(corev1.PodRunning, corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull"}}), true},
		{"etcd runs while the phase still says Pending", etcdIn(corev1.PodPending, running), false},
		{"etcd runs while the phase already says Failed", etcdIn(corev1.PodFailed, running), false},
		{"etcd's container not created yet in a Pending Pod", etcdIn(corev1.PodPending, corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}), true},
		{"running, nothing reported of etcd's container yet", &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{
			{Name: "sidecar", State: running},
		}}}, false},
		{"pending, only another container reported", &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{
			{Name: "sidecar", State: running},
		}}}, true},
		{"another container stopped", &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{
			{Name: "sidecar", State: exited}, {Name: "etcd", State: running},
		}}}, false},
	}
	for _, tc := range cases {
		if got := EtcdStopped(tc.pod); got != tc.want {
			t.Errorf("%s: stopped %v, want %v", tc.name, got, tc.want)
		}
	}
}
