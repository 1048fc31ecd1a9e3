package member

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller/kit"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// A kubelet that evicts a Pod under node pressure, or stops it for a graceful node shutdown,
// leaves it Failed (reason Evicted, or Terminated with a message naming the shutdown), or
// Succeeded when every container exited 0 on SIGTERM, and never starts its containers again:
// the Pod object stays, and only its deletion brings the member back. Nothing else the
// operator does reaches such a Pod (a roll waits for every member to be up), so without
// this the member stayed down for good, as after rebooting every node of a cluster.

// terminalPod says how the kubelet left a Pod that will never run again ("Failed (Evicted:
// The node was low on resource: memory.)"), or "" while it may run.
func terminalPod(pod *corev1.Pod) string {
	if pod.Status.Phase != corev1.PodFailed && pod.Status.Phase != corev1.PodSucceeded {
		return ""
	}
	how := string(pod.Status.Phase)
	switch {
	case pod.Status.Reason != "" && pod.Status.Message != "":
		how += fmt.Sprintf(" (%s: %s)", pod.Status.Reason, pod.Status.Message)
	case pod.Status.Reason != "":
		how += " (" + pod.Status.Reason + ")"
	case pod.Status.Message != "":
		how += " (" + pod.Status.Message + ")"
	}
	return how
}

// terminalVerdict is what becomes of a member whose Pod is terminal: the Pod is deleted in
// every case; event says what follows, ready is the member's Ready condition meanwhile.
type terminalVerdict struct {
	event string
	ready metav1.Condition
}

// decideTerminalPod decides for a member's Pod; nil when the Pod may still run. A member
// on a PVC starts again on its data under its ID (createPod requires the data of a joined
// member). A tmpfs member's data was in the Pod's memory volume and went with its
// containers: it must not start empty under its ID, so it goes the way of a tmpfs member
// whose Pod was deleted (DataLost, then a replacement under a new ID).
func decideTerminalPod(pod *corev1.Pod, m *etcdv1.EtcdMember) *terminalVerdict {
	how := terminalPod(pod)
	if how == "" {
		return nil
	}
	left := fmt.Sprintf("its node left Pod %s %s", pod.Name, how)
	if m.Spec.Storage.Medium == etcdv1.StorageMediumMemory {
		return &terminalVerdict{
			event: left + ": deleted it; its tmpfs data went with it, so the member is replaced under a new ID",
			ready: dataLostCondition(left + "; its tmpfs data went with it"),
		}
	}
	started := "a new Pod starts on PVC " + specs.PVCName(m)
	if m.Status.MemberID != "" {
		started += " as member " + m.Status.MemberID
	}
	return &terminalVerdict{
		event: left + ": deleted it; " + started,
		ready: readyCondition(metav1.ConditionFalse, etcdv1.ReasonPodTerminal, left+"; the kubelet never starts it again: "+started),
	}
}

// replaceTerminalPod deletes the member's Pod when its kubelet left it terminal; the next
// look creates it again (createPod). The member says so first, so that it never reports
// the Pod's last readiness meanwhile. The UID precondition spares a Pod created since; a
// Pod already gone, or replaced, is one the cache has not caught up with: no event again.
// True when the Pod is terminal: its step is then the reconcile's.
func (r *Reconciler) replaceTerminalPod(ctx context.Context, m *etcdv1.EtcdMember, pod *corev1.Pod) (kit.Step, bool, error) {
	v := decideTerminalPod(pod, m)
	if v == nil {
		return kit.Step{}, false, nil
	}
	replaced := kit.Step{Name: "replaceTerminalPod", Facts: []any{"podReason", pod.Status.Reason, "readyReason", v.ready.Reason}}
	changed, err := r.setStatus(ctx, m, pod.Name, v.ready)
	replaced.Changed = changed
	if err != nil {
		return replaced, true, err
	}
	err = r.Delete(ctx, pod, client.Preconditions{UID: &pod.UID})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return replaced, true, nil
	}
	if err != nil {
		return replaced, true, err
	}
	r.event(ctx, m, corev1.EventTypeWarning, etcdv1.ReasonTerminalPodReplaced, "ReplacePod", "%s", v.event)
	replaced.Changed = true
	return replaced, true, nil
}
