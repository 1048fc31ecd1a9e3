package node

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"sync"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/util/retry"

	"github.com/quorumkeeper/etcd-operator/test/localcluster/netsetup"
)

// provider runs the Pods bound to one Node as local processes. It implements virtual-kubelet's
// PodLifecycleHandler, PodNotifier and the streaming calls behind kubectl logs/exec/port-forward.
type provider struct {
	cfg     Config
	sources volumeSources
	ipam    *netsetup.IPAM
	// declared are the node's Pods as their owners wrote them (virtual-kubelet's informer
	// cache); nil in tests that hand CreatePod the Pod as declared.
	declared corev1listers.PodLister

	mu     sync.Mutex
	pods   map[types.NamespacedName]*podRun
	notify func(*corev1.Pod)
}

func newProvider(cfg Config, sources volumeSources, declared corev1listers.PodLister) *provider {
	return &provider{
		cfg:      cfg,
		sources:  sources,
		declared: declared,
		ipam:     netsetup.NewIPAM(cfg.PodCIDR),
		pods:     map[types.NamespacedName]*podRun{},
		notify:   func(*corev1.Pod) {},
	}
}

func key(pod *corev1.Pod) types.NamespacedName {
	return types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
}

// CreatePod starts the Pod's sandbox and containers in the background; progress reaches the
// API through NotifyPods. A Pod in a terminal phase is never started, as under a kubelet:
// one this node evicted or stopped for a shutdown stays stopped, also after the agent
// restarts (virtual-kubelet skips such Pods too, but only on some of its paths).
func (p *provider) CreatePod(_ context.Context, pod *corev1.Pod) error {
	if terminalPhase(pod.Status.Phase) {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	k := key(pod)
	if existing, ok := p.pods[k]; ok {
		if existing.pod.UID == pod.UID {
			return nil
		}
		if existing.ended() {
			p.ipam.Release(string(existing.pod.UID)) // its deletion will not find it here
		}
	}
	ip, err := p.ipam.Allocate(string(pod.UID))
	if err != nil {
		return fmt.Errorf("no address for pod %s: %w", k, err)
	}
	run := newPodRun(p, pod.DeepCopy(), p.declaredPod(pod), ip)
	p.pods[k] = run
	go run.run()
	return nil
}

// declaredPod is pod as its owner wrote it, from the node's informer cache: virtual-kubelet
// hands CreatePod a copy whose environment it has resolved (valueFrom replaced by values),
// which would freeze the variables a kubelet works out afresh at every container start. pod
// itself when the cache does not hold it (gone meanwhile) or holds another Pod of its name.
// Only read: the cache's objects are shared.
func (p *provider) declaredPod(pod *corev1.Pod) *corev1.Pod {
	if p.declared == nil {
		return pod
	}
	declared, err := p.declared.Pods(pod.Namespace).Get(pod.Name)
	if err != nil || declared.UID != pod.UID {
		return pod
	}
	return declared
}

// UpdatePod accepts the changes the API allows on a running Pod (labels, annotations, image
// of a container); only the metadata is taken over here.
func (p *provider) UpdatePod(_ context.Context, pod *corev1.Pod) error {
	run := p.lookup(pod.Namespace, pod.Name)
	if run == nil {
		return errdefs.NotFoundf("pod %s/%s is not on this node", pod.Namespace, pod.Name)
	}
	run.updateMetadata(pod)
	return nil
}

// DeletePod stops the containers (SIGTERM, then SIGKILL after the grace period), removes the
// sandbox, reports the terminal status and, for a Pod marked for deletion, removes its object.
func (p *provider) DeletePod(ctx context.Context, pod *corev1.Pod) error {
	run := p.lookup(pod.Namespace, pod.Name)
	if run == nil || (pod.UID != "" && run.pod.UID != pod.UID) {
		// Not this Pod: a stopped Pod deleted at once (a terminal one needs no grace) may be
		// followed by a new Pod of its name before its deletion reaches this node.
		return errdefs.NotFoundf("pod %s/%s is not on this node", pod.Namespace, pod.Name)
	}
	finished := run.terminate(ctx, gracePeriod(pod))
	p.mu.Lock()
	if p.pods[key(pod)] == run {
		delete(p.pods, key(pod))
	}
	p.mu.Unlock()
	p.ipam.Release(string(run.pod.UID))
	if !finished || pod.DeletionTimestamp == nil {
		return nil // virtual-kubelet removes the object once the grace period is over
	}
	if err := p.removeFromAPI(ctx, pod, run.snapshot().Status); err != nil {
		return fmt.Errorf("pod %s stopped, but removing it from the API: %w", key(pod), err)
	}
	return nil
}

// removeFromAPI does what a kubelet's status manager does once a Pod marked for deletion has
// nothing left running: it writes the final status, then deletes the object with grace 0.
// virtual-kubelet v1.14 does not: after DeletePod returns it queues that deletion for a whole
// grace period later (syncPodInProvider), however fast the containers exited, and the terminal
// status it writes changes no field that would make it look again. Without this, deleting a
// Pod took its full grace period (30 s by default) even when the container exited at SIGTERM.
// The UID precondition spares a Pod recreated under the same name (a StatefulSet's).
func (p *provider) removeFromAPI(ctx context.Context, pod *corev1.Pod, final corev1.PodStatus) error {
	if gone, err := p.writeStatus(ctx, pod, final); gone || err != nil {
		return err
	}
	pods := p.cfg.Client.CoreV1().Pods(pod.Namespace)
	opts := metav1.DeleteOptions{GracePeriodSeconds: new(int64), Preconditions: metav1.NewUIDPreconditions(string(pod.UID))}
	if err := pods.Delete(ctx, pod.Name, opts); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return err
	}
	return nil
}

// writeStatus writes the Pod's status to the API; gone when the object is no longer this
// Pod. A conflict means someone (virtual-kubelet's status sync) wrote in between, perhaps a
// status from before the containers stopped (Running, not Ready): the write is made again on
// the newer object, or a Pod the node stopped for good (a shutdown, an eviction) would stay
// Running in the API, and the agent, started again, would run it again (CreatePod starts any
// Pod that is not terminal), which no kubelet does.
func (p *provider) writeStatus(ctx context.Context, pod *corev1.Pod, status corev1.PodStatus) (gone bool, err error) {
	pods := p.cfg.Client.CoreV1().Pods(pod.Namespace)
	err = retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		current, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && current.UID != pod.UID) {
			gone = true // already gone, or gone and recreated
			return nil
		}
		if err != nil {
			return err
		}
		current.Status = status
		_, err = pods.UpdateStatus(ctx, current, metav1.UpdateOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	return gone, err
}

func (p *provider) GetPod(_ context.Context, namespace, name string) (*corev1.Pod, error) {
	run := p.lookup(namespace, name)
	if run == nil {
		return nil, errdefs.NotFoundf("pod %s/%s is not on this node", namespace, name)
	}
	return run.snapshot(), nil
}

func (p *provider) GetPodStatus(ctx context.Context, namespace, name string) (*corev1.PodStatus, error) {
	pod, err := p.GetPod(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	return &pod.Status, nil
}

func (p *provider) GetPods(context.Context) ([]*corev1.Pod, error) {
	runs := p.runs()
	pods := make([]*corev1.Pod, 0, len(runs))
	for _, run := range runs {
		pods = append(pods, run.snapshot())
	}
	return pods, nil
}

// NotifyPods registers the callback through which status changes reach the API.
func (p *provider) NotifyPods(_ context.Context, notify func(*corev1.Pod)) {
	p.mu.Lock()
	p.notify = notify
	p.mu.Unlock()
}

func (p *provider) notifyChange(pod *corev1.Pod) {
	p.mu.Lock()
	notify := p.notify
	p.mu.Unlock()
	notify(pod)
}

// runs are the node's Pods.
func (p *provider) runs() []*podRun {
	p.mu.Lock()
	defer p.mu.Unlock()
	runs := make([]*podRun, 0, len(p.pods))
	for _, run := range p.pods {
		runs = append(runs, run)
	}
	return runs
}

func (p *provider) lookup(namespace, name string) *podRun {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pods[types.NamespacedName{Namespace: namespace, Name: name}]
}

// stopAll stops every Pod, for the agent's shutdown: within each Pod's grace period, or at
// once when abrupt.
func (p *provider) stopAll(ctx context.Context, abrupt bool) {
	var wg sync.WaitGroup
	for _, run := range p.runs() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			grace := gracePeriod(run.pod)
			if abrupt {
				grace = 0
			}
			run.terminate(ctx, grace)
		}()
	}
	wg.Wait()
}

func (p *provider) podDir(pod *corev1.Pod) string {
	return filepath.Join(p.cfg.Dir, "pods", string(pod.UID))
}

func (p *provider) netnsName(pod *corev1.Pod) string {
	// netsetup limits names to 11 characters so that interface names fit; a UID prefix is
	// unique enough among the Pods of one machine.
	return string(pod.UID)[:8]
}

func (p *provider) hostIP() netip.Addr { return p.cfg.HostIP }
