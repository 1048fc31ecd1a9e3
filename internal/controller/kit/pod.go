package kit

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// What a member's Pod says about it, read alike by the member reconciler (which replaces a Pod
// that cannot start) and the cluster reconciler (which rolls, recovers and replaces members).

// PodReady: the Pod's Ready condition is True.
func PodReady(pod *corev1.Pod) bool {
	for _, cond := range pod.Status.Conditions {
		if cond.Type == corev1.PodReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// PodUnschedulable: no node has taken the Pod and the scheduler said none can.
func PodUnschedulable(pod *corev1.Pod) bool {
	if pod.Spec.NodeName != "" {
		return false
	}
	for _, cond := range pod.Status.Conditions {
		if cond.Type == corev1.PodScheduled {
			return cond.Status == corev1.ConditionFalse && cond.Reason == corev1.PodReasonUnschedulable
		}
	}
	return false
}

// EtcdStopped: the Pod says etcd does not run in it. What the kubelet reports of etcd's
// container comes first, because the Pod's phase sums up all its containers and may lag
// behind it: the container waits (a back-off after an exit, an image being pulled) or has
// terminated while the phase still says Running, or it runs while the phase has not caught
// up. Only a Pod that says nothing of etcd's container yet is read by its phase: not started
// yet (Pending) or over (Succeeded, Failed). A Pod that says neither is not taken for
// stopped: only what the kubelet reported counts.
func EtcdStopped(pod *corev1.Pod) bool {
	if pod == nil {
		return false
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == specs.ContainerName {
			return cs.State.Running == nil
		}
	}
	switch pod.Status.Phase {
	case corev1.PodPending, corev1.PodSucceeded, corev1.PodFailed:
		return true
	}
	return false
}

// StuckWaiting is the reason a container of the Pod waits for, when it is not just being
// created: "" when none does.
func StuckWaiting(pod *corev1.Pod) string {
	for _, cs := range slices.Concat(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses) {
		if w := cs.State.Waiting; w != nil && w.Reason != "" && w.Reason != "ContainerCreating" && w.Reason != "PodInitializing" {
			return w.Reason
		}
	}
	return ""
}

// dataErrorMarks are what etcd says when it exits because of its data: an empty data
// directory for a member that has joined (it is started with only itself in its initial
// cluster, see specs.RequireData and specs.RequireDataInPlace, and so finds no peer to fetch
// the cluster from), a WAL or
// snapshot it cannot read, a backend it cannot recover.
var dataErrorMarks = []string{
	"cannot fetch cluster info from peer urls",
	// A founding member's container restarted in place (same Pod, founding flags) on an
	// empty data directory: etcd finds itself published by its peers and refuses.
	"has already been bootstrapped",
	"wal: crc mismatch", "walpb: crc mismatch", "failed to open wal", "failed to read wal",
	"wal: file not found", "wal: slice bounds out of range", "wal: max entry size limit exceeded",
	"snap: crc mismatch", "snap: empty snapshot", "failed to recover v3 backend",
	"failed to find database snapshot file", "failed to open database", "database file",
	// A panic's message may fall out of the termination message's tail behind the goroutine
	// dump; the frames that read the data stay in it.
	"(*wal).readall", "wal.openforread", "(*snapshotter).load", "recoversnapshotbackend",
}

// DataError reads a member Pod's last container termination: the etcd exit line of a data
// error, "" for anything else (an OOM kill or a bad flag is reported, not taken for lost
// data).
func DataError(pod *corev1.Pod) string {
	if pod == nil {
		return ""
	}
	for _, cs := range pod.Status.ContainerStatuses {
		for _, t := range []*corev1.ContainerStateTerminated{cs.State.Terminated, cs.LastTerminationState.Terminated} {
			if t == nil || t.ExitCode == 0 || t.Reason == "OOMKilled" {
				continue
			}
			if mark := dataErrorMark(t.Message); mark != "" {
				return mark
			}
		}
	}
	return ""
}

func dataErrorMark(message string) string {
	lower := strings.ToLower(message)
	for _, mark := range dataErrorMarks {
		if strings.Contains(lower, mark) {
			return mark
		}
	}
	return ""
}
