package node

import (
	"context"
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A kubelet stops a Pod for good on its own in two ways: its eviction manager evicts it when
// the node runs short of memory or disk, and its shutdown manager stops every Pod when the
// node is shut down gracefully. Either way the containers are stopped within their grace
// period and the Pod is left Failed, with a reason and message saying which; the Pod object
// stays, and the kubelet never starts it again (a Pod's phase never leaves Failed or
// Succeeded). Whoever owns the Pod must delete it and create another.

// podEnd is how this node stopped a Pod for good.
type podEnd struct {
	reason, message string
}

// The kubelet's words (pkg/kubelet/eviction, pkg/kubelet/nodeshutdown).
var (
	evictedUnderPressure = podEnd{reason: "Evicted", message: "The node was low on resource: memory. "}
	stoppedForShutdown   = podEnd{reason: "Terminated", message: "Pod was terminated in response to imminent node shutdown."}
)

// terminalPhase: a Pod in this phase never runs again.
func terminalPhase(phase corev1.PodPhase) bool {
	return phase == corev1.PodFailed || phase == corev1.PodSucceeded
}

// endStatus is the status of a Pod this node stopped for good: Failed, with the reason and
// message of end and the condition a kubelet adds (DisruptionTarget, TerminationByKubelet),
// over the status of its stopped containers.
func endStatus(status corev1.PodStatus, end podEnd) corev1.PodStatus {
	status.Phase = corev1.PodFailed
	status.Reason, status.Message = end.reason, end.message
	status.Conditions = append(status.Conditions, corev1.PodCondition{
		Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "TerminationByKubelet",
		Message: end.message, LastTransitionTime: metav1.Now(),
	})
	return status
}

// Evict does what a kubelet's eviction manager does to a Pod under node pressure: its
// containers stopped within their grace period, the Pod left Failed with reason Evicted.
func (a *Agent) Evict(ctx context.Context, namespace, name string) error {
	run := a.provider.lookup(namespace, name)
	if run == nil {
		return fmt.Errorf("pod %s/%s is not on node %s", namespace, name, a.provider.cfg.NodeName)
	}
	return a.provider.end(ctx, run, evictedUnderPressure)
}

// Shutdown does what a kubelet's graceful node shutdown does before the machine goes down:
// the Node reports NotReady ("node is shutting down"), and every Pod's containers are stopped
// within their grace period and the Pod left Failed with reason Terminated, its status
// written to the API. The caller then ends Run: the machine is off.
func (a *Agent) Shutdown(ctx context.Context) error {
	if err := a.reportReady(ctx, false, "KubeletNotReady", "node is shutting down"); err != nil {
		return err
	}
	runs := a.provider.runs()
	errs := make([]error, len(runs))
	var wg sync.WaitGroup
	for i, run := range runs {
		if run.ended() {
			continue // evicted before: it keeps what it says
		}
		wg.Go(func() { errs[i] = a.provider.end(ctx, run, stoppedForShutdown) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// end stops the Pod's containers within its grace period, removes its sandbox, and leaves
// it Failed as end says. The status is written to the API at once, as a kubelet's status
// manager does: virtual-kubelet writes no status of a Pod the API has as Failed, and the
// node may go down right after (Shutdown).
func (p *provider) end(ctx context.Context, run *podRun, end podEnd) error {
	run.terminate(ctx, gracePeriod(run.pod))
	run.mu.Lock()
	run.end = &end
	run.mu.Unlock()
	final := run.snapshot()
	run.p.notifyChange(final)
	if _, err := p.writeStatus(ctx, run.pod, final.Status); err != nil {
		return fmt.Errorf("pod %s stopped, but writing its status: %w", key(run.pod), err)
	}
	return nil
}

// ended: the node stopped the Pod for good.
func (r *podRun) ended() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.end != nil
}
