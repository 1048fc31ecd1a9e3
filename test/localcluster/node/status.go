package node

import (
	"cmp"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// snapshot is the Pod as this node sees it now: the spec it runs and a status computed from
// the sandbox and the containers.
func (r *podRun) snapshot() *corev1.Pod {
	r.mu.Lock()
	pod := r.pod.DeepCopy()
	sandboxUp, sandboxErr, initDone, failed, end := r.sandboxUp, r.sandboxErr, r.initDone, r.failed, r.end
	r.mu.Unlock()

	inits := statuses(r.inits)
	ctrs := statuses(r.containers)
	if sandboxErr != "" {
		markWaiting(inits, "ContainerCreating", sandboxErr)
		markWaiting(ctrs, "ContainerCreating", sandboxErr)
	}
	if !initDone {
		markWaiting(ctrs, "PodInitializing", "")
	}
	status := corev1.PodStatus{
		Phase:                 podPhase(pod, ctrs, initDone, failed),
		HostIP:                r.p.hostIP().String(),
		HostIPs:               []corev1.HostIP{{IP: r.p.hostIP().String()}},
		StartTime:             &r.startTime,
		QOSClass:              pod.Status.QOSClass,
		InitContainerStatuses: inits,
		ContainerStatuses:     ctrs,
	}
	if sandboxUp {
		status.PodIP = r.ip.String()
		status.PodIPs = []corev1.PodIP{{IP: r.ip.String()}}
	}
	status.Conditions = r.stableConditions(conditions(sandboxUp, initDone, allReady(ctrs)))
	if end != nil {
		status = endStatus(status, *end)
	}
	pod.Status = status
	return pod
}

// stableConditions keeps a condition's lastTransitionTime while its status stays the same, so
// an unchanged Pod produces an unchanged status (and no API write).
func (r *podRun) stableConditions(conds []corev1.PodCondition) []corev1.PodCondition {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lastConditions == nil {
		r.lastConditions = map[corev1.PodConditionType]corev1.PodCondition{}
	}
	for i, c := range conds {
		if prev, ok := r.lastConditions[c.Type]; ok && prev.Status == c.Status {
			conds[i].LastTransitionTime = prev.LastTransitionTime
		}
		r.lastConditions[c.Type] = conds[i]
	}
	return conds
}

func statuses(runs []*containerRun) []corev1.ContainerStatus {
	out := make([]corev1.ContainerStatus, 0, len(runs))
	for _, c := range runs {
		out = append(out, c.status())
	}
	return out
}

func (c *containerRun) status() corev1.ContainerStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	running := c.state.Running != nil
	started := running && c.started
	s := corev1.ContainerStatus{
		Name:                 c.spec.Name,
		Image:                c.spec.Image,
		ImageID:              cmp.Or(c.imageID, c.spec.Image),
		State:                c.state,
		LastTerminationState: c.last,
		Ready:                running && c.ready,
		RestartCount:         c.restarts,
		Started:              &started,
	}
	if running || c.state.Terminated != nil {
		s.ContainerID = c.containerID()
	}
	if s.State.Terminated != nil {
		// The current state already says it; kubectl shows last state only across restarts.
		s.LastTerminationState = corev1.ContainerState{}
	}
	return s
}

func markWaiting(statuses []corev1.ContainerStatus, reason, message string) {
	for i := range statuses {
		if statuses[i].State.Running == nil && statuses[i].State.Terminated == nil {
			statuses[i].State = waiting(reason, message)
		}
	}
}

func allReady(statuses []corev1.ContainerStatus) bool {
	for _, s := range statuses {
		if !s.Ready {
			return false
		}
	}
	return len(statuses) > 0
}

// podPhase follows the kubelet: Pending until every container has started, Running while any
// runs or will restart, Succeeded/Failed once all ended for good.
func podPhase(pod *corev1.Pod, ctrs []corev1.ContainerStatus, initDone, initFailed bool) corev1.PodPhase {
	if initFailed {
		return corev1.PodFailed
	}
	if !initDone {
		return corev1.PodPending
	}
	running, waitingCount, succeeded, failed := 0, 0, 0, 0
	for _, s := range ctrs {
		switch {
		case s.State.Running != nil:
			running++
		case s.State.Terminated != nil && s.State.Terminated.ExitCode == 0:
			succeeded++
		case s.State.Terminated != nil:
			failed++
		default:
			if s.RestartCount > 0 {
				running++ // in back-off between restarts: still a running Pod
			} else {
				waitingCount++
			}
		}
	}
	switch {
	case waitingCount > 0:
		return corev1.PodPending
	case running > 0:
		return corev1.PodRunning
	case pod.Spec.RestartPolicy == corev1.RestartPolicyAlways:
		return corev1.PodRunning // about to restart
	case failed > 0:
		return corev1.PodFailed
	}
	return corev1.PodSucceeded
}

func conditions(sandboxUp, initDone, ready bool) []corev1.PodCondition {
	now := metav1.Now()
	cond := func(t corev1.PodConditionType, ok bool) corev1.PodCondition {
		status := corev1.ConditionFalse
		if ok {
			status = corev1.ConditionTrue
		}
		return corev1.PodCondition{Type: t, Status: status, LastTransitionTime: now}
	}
	return []corev1.PodCondition{
		cond(corev1.PodScheduled, true),
		cond(corev1.PodReadyToStartContainers, sandboxUp),
		cond(corev1.PodInitialized, initDone),
		cond(corev1.ContainersReady, ready),
		cond(corev1.PodReady, ready),
	}
}
