package simnode

import (
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// podState is what the node knows of a Pod it took. Times are whole seconds, as the API
// stores them, so that a status made twice from the same state is the same.
type podState struct {
	uid       types.UID
	startTime metav1.Time // when the node took the Pod: its status.startTime
	// running: its etcd runs (for a Pod without etcd: it has been taken, nothing runs).
	running   bool
	peerURL   string      // the member its etcd started
	startedAt metav1.Time // when the running etcd started
	restarts  int32       // failed starts
	// lastExit is the last failed start; while not running, the container waits out
	// backoff, until retryAt.
	lastExit *corev1.ContainerStateTerminated
	backoff  time.Duration
	retryAt  time.Time
	// written is the node's last status write and the object it produced.
	written struct {
		resourceVersion string
		status          corev1.PodStatus
	}
}

// action is what a sync does with a Pod bound to the node.
type action int

const (
	report action = iota // write the status the Pod has on this node
	start                // start its etcd, then report
	remove               // stop its member and delete the object
	leave                // nothing to run: the Pod ended for good
)

// decide is what the node does with pod, given whether its etcd runs and when it may try to
// start it again.
func decide(pod *corev1.Pod, running bool, retryAt, now time.Time) action {
	switch {
	case pod.DeletionTimestamp != nil:
		return remove
	case pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed:
		return leave // a kubelet never starts a Pod that ended
	case running, now.Before(retryAt):
		return report
	}
	return start
}

// podStatus is the status a kubelet would report for pod in state st: Running (its restart
// policy is Always), init containers completed, etcd running and ready, or waiting out its
// back-off after an exit. Conditions the node does not own are kept.
func podStatus(pod *corev1.Pod, st *podState, ip string) corev1.PodStatus {
	startTime := st.startTime
	status := corev1.PodStatus{
		Phase:      corev1.PodRunning,
		Conditions: podConditions(pod.Status.Conditions, st),
		HostIP:     ip, HostIPs: []corev1.HostIP{{IP: ip}},
		PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
		StartTime: &startTime,
		QOSClass:  pod.Status.QOSClass,
	}
	for _, c := range pod.Spec.InitContainers {
		status.InitContainerStatuses = append(status.InitContainerStatuses, completed(pod, c, st.startTime))
	}
	for _, c := range pod.Spec.Containers {
		status.ContainerStatuses = append(status.ContainerStatuses, containerStatus(pod, c, st))
	}
	return status
}

// completed is an init container that ran and exited 0 when the Pod was taken.
func completed(pod *corev1.Pod, c corev1.Container, at metav1.Time) corev1.ContainerStatus {
	return corev1.ContainerStatus{
		Name: c.Name, Image: c.Image, ImageID: c.Image, ContainerID: containerID(pod, c, 0),
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: 0, Reason: "Completed", StartedAt: at, FinishedAt: at,
		}},
		Ready: true, Started: new(false),
	}
}

// containerStatus is a container of the Pod: etcd as st says, any other running since the
// Pod was taken.
func containerStatus(pod *corev1.Pod, c corev1.Container, st *podState) corev1.ContainerStatus {
	s := corev1.ContainerStatus{Name: c.Name, Image: c.Image, ImageID: c.Image, Started: new(false)}
	since := st.startTime
	if c.Name == specs.ContainerName {
		since, s.RestartCount = st.startedAt, st.restarts
		if st.lastExit != nil {
			s.LastTerminationState.Terminated = st.lastExit.DeepCopy()
		}
	}
	switch {
	case c.Name != specs.ContainerName || st.running:
		s.State.Running = &corev1.ContainerStateRunning{StartedAt: since}
		s.Ready, s.Started, s.ContainerID = true, new(true), containerID(pod, c, s.RestartCount)
	case st.lastExit != nil:
		s.State.Waiting = &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: fmt.Sprintf(
			"back-off %s restarting failed container=%s pod=%s_%s(%s)", st.backoff, c.Name, pod.Name, pod.Namespace, pod.UID)}
		s.ContainerID = containerID(pod, c, s.RestartCount-1)
	default:
		s.State.Waiting = &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}
	}
	return s
}

// containerID names one run of a container, as a runtime would: each restart is a new one.
func containerID(pod *corev1.Pod, c corev1.Container, run int32) string {
	return fmt.Sprintf("simnode://%s-%s-%d", pod.UID, c.Name, run)
}

// podConditions are the conditions a kubelet owns, from st, and the others as they are
// (PodScheduled is the scheduler's; a Pod bound by hand gets it here).
func podConditions(existing []corev1.PodCondition, st *podState) []corev1.PodCondition {
	cond := func(t corev1.PodConditionType, at metav1.Time) corev1.PodCondition {
		return corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: at}
	}
	ready := cond(corev1.PodReady, st.startedAt)
	if !st.running {
		ready.Status, ready.Reason, ready.Message = corev1.ConditionFalse, "ContainersNotReady", "containers with unready status: ["+specs.ContainerName+"]"
		ready.LastTransitionTime = st.startTime
		if st.lastExit != nil {
			ready.LastTransitionTime = st.lastExit.FinishedAt
		}
	}
	containersReady := ready
	containersReady.Type = corev1.ContainersReady
	out := []corev1.PodCondition{
		cond(corev1.PodReadyToStartContainers, st.startTime), cond(corev1.PodInitialized, st.startTime), ready, containersReady,
	}
	for _, c := range existing {
		if !slices.ContainsFunc(out, func(o corev1.PodCondition) bool { return o.Type == c.Type }) {
			out = append(out, c)
		}
	}
	if !slices.ContainsFunc(out, func(o corev1.PodCondition) bool { return o.Type == corev1.PodScheduled }) {
		out = append(out, cond(corev1.PodScheduled, st.startTime))
	}
	return out
}
