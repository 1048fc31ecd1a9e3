package simnode

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	coreinformers "k8s.io/client-go/informers/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/quorumkeeper/etcd-operator/internal/specs"
	"github.com/quorumkeeper/etcd-operator/test/etcdsim"
)

// podRunner runs the Pods bound to one node: an informer on them feeds a queue of
// namespace/name keys, and each sync makes the Sim and the Pod's status what the Pod asks
// for. A key is synced by one worker at a time, so a Pod's state needs no lock of its own.
type podRunner struct {
	cfg      Config
	informer cache.SharedIndexInformer
	lister   corelisters.PodLister
	queue    workqueue.TypedRateLimitingInterface[string]
	// crashes is the etcd container's restart back-off, per Pod; the queue's own limiter
	// retries failed API calls, much sooner.
	crashes workqueue.TypedRateLimiter[string]

	mu     sync.Mutex
	states map[string]*podState // by namespace/name
}

func newPodRunner(cfg Config) *podRunner {
	// The API server filters by node; the handlers filter again, for clients (fakes) that
	// ignore field selectors.
	onNode := func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", cfg.Name).String()
	}
	informer := coreinformers.NewFilteredPodInformer(cfg.Client, metav1.NamespaceAll, 0,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}, onNode)
	return &podRunner{
		cfg:      cfg,
		informer: informer,
		lister:   corelisters.NewPodLister(informer.GetIndexer()),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "simnode-" + cfg.Name}),
		crashes: workqueue.NewTypedItemExponentialFailureRateLimiter[string](cfg.backoffBase, cfg.backoffMax),
		states:  map[string]*podState{},
	}
}

// start runs the informer and the workers until ctx ends; it returns once the informer has
// listed the node's Pods.
func (r *podRunner) start(ctx context.Context, wg *sync.WaitGroup) error {
	enqueue := func(obj any) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		if pod, ok := obj.(*corev1.Pod); ok && pod.Spec.NodeName == r.cfg.Name {
			r.queue.Add(pod.Namespace + "/" + pod.Name)
		}
	}
	if _, err := r.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, UpdateFunc: func(_, obj any) { enqueue(obj) }, DeleteFunc: enqueue,
	}); err != nil {
		return err
	}
	wg.Go(func() { r.informer.RunWithContext(ctx) })
	if !cache.WaitForCacheSync(ctx.Done(), r.informer.HasSynced) {
		r.queue.ShutDown()
		return fmt.Errorf("simnode: node %s: Pods not listed: %w", r.cfg.Name, ctx.Err())
	}
	for range workers {
		wg.Go(func() {
			for r.next(ctx) {
			}
		})
	}
	return nil
}

func (r *podRunner) shutDown() { r.queue.ShutDown() }

// stopAll stops every member the node runs, as switching the machine off would.
func (r *podRunner) stopAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, st := range r.states {
		r.stop(st)
	}
}

func (r *podRunner) next(ctx context.Context) bool {
	key, quit := r.queue.Get()
	if quit {
		return false
	}
	defer r.queue.Done(key)
	switch err := r.sync(ctx, key); {
	case err == nil, apierrors.IsConflict(err):
		// A conflict means a newer Pod is on its way, and its event brings the key back.
		r.queue.Forget(key)
	default:
		r.queue.AddRateLimited(key)
	}
	return true
}

// sync makes the Sim and the API agree with the Pod of key as the informer has it.
func (r *podRunner) sync(ctx context.Context, key string) error {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return err
	}
	pod, err := r.lister.Pods(namespace).Get(name)
	switch {
	case apierrors.IsNotFound(err):
		pod = nil
	case err != nil:
		return err
	case pod.Spec.NodeName != r.cfg.Name:
		pod = nil
	}
	st := r.stateOf(key, pod)
	if pod == nil {
		return nil
	}
	switch decide(pod, st.running, st.retryAt, time.Now()) {
	case remove:
		return r.remove(ctx, pod, st)
	case leave:
		r.stop(st)
		return nil
	case start:
		r.startEtcd(key, pod, st)
	case report:
	}
	if wait := time.Until(st.retryAt); !st.running && wait > 0 {
		// Every sync in a back-off asks again for its end: the queue keeps only the earliest
		// wake-up of a key, so one asked for earlier (an API retry) would otherwise swallow it.
		r.queue.AddAfter(key, wait)
	}
	return r.report(ctx, pod, st)
}

// stateOf is what the node knows of the Pod of key. The state of a Pod that is gone (no Pod,
// or another one of the same name) is dropped and its member stopped: etcd dies with its
// container.
func (r *podRunner) stateOf(key string, pod *corev1.Pod) *podState {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.states[key]
	if st != nil && (pod == nil || st.uid != pod.UID) {
		r.stop(st)
		delete(r.states, key)
		r.crashes.Forget(key)
		st = nil
	}
	if st == nil && pod != nil {
		st = &podState{uid: pod.UID, startTime: metav1.Now().Rfc3339Copy()}
		if pod.Status.StartTime != nil { // an earlier run of this node took it
			st.startTime = *pod.Status.StartTime
		}
		r.states[key] = st
	}
	return st
}

func (r *podRunner) stop(st *podState) {
	if st.running && st.peerURL != "" {
		r.cfg.Sim.StopProcess(st.peerURL)
	}
	st.running = false
}

// startEtcd starts the Pod's etcd: its member in the Sim, with the Pod's flags and its initial
// cluster as it is now. When etcd would exit, the next try waits out the back-off (sync
// asks the queue for it).
func (r *podRunner) startEtcd(key string, pod *corev1.Pod, st *podState) {
	now := metav1.Now().Rfc3339Copy()
	ctr := etcdContainer(pod)
	if ctr == nil { // not an etcd member's Pod: nothing to run, nothing to fail
		st.running, st.startedAt = true, now
		return
	}
	boot, err := etcdsim.ParseArgs(ctr.Args, specs.InitialClusterOf(pod))
	if err == nil {
		_, _, err = r.cfg.Sim.StartProcess(boot)
	}
	if err == nil {
		st.running, st.peerURL, st.startedAt = true, boot.PeerURLs[0], now
		r.crashes.Forget(key)
		return
	}
	st.restarts++
	st.lastExit = &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", Message: err.Error(), StartedAt: now, FinishedAt: now}
	st.backoff = r.crashes.When(key)
	st.retryAt = time.Now().Add(st.backoff)
}

// remove stops the member of a Pod marked for deletion, then deletes the Pod for good. The
// member is found by the Pod's flags, so that one an earlier run of the node started stops
// as well. The UID precondition spares a Pod recreated under the same name.
func (r *podRunner) remove(ctx context.Context, pod *corev1.Pod, st *podState) error {
	if peer := peerURLOf(pod); peer != "" {
		r.cfg.Sim.StopProcess(peer)
	}
	st.running = false
	opts := metav1.DeleteOptions{GracePeriodSeconds: new(int64), Preconditions: metav1.NewUIDPreconditions(string(pod.UID))}
	err := r.cfg.Client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, opts)
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// report writes the Pod's status as the node sees it, unless the stored one says it already:
// either equal, or the very object the node's last write produced (an API server may
// normalise a status; writing it again would only come back the same).
func (r *podRunner) report(ctx context.Context, pod *corev1.Pod, st *podState) error {
	status := podStatus(pod, st, r.cfg.PodIP)
	if apiequality.Semantic.DeepEqual(status, pod.Status) ||
		(pod.ResourceVersion == st.written.resourceVersion && apiequality.Semantic.DeepEqual(status, st.written.status)) {
		return nil
	}
	update := pod.DeepCopy()
	update.Status = status
	got, err := r.cfg.Client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, update, metav1.UpdateOptions{})
	if err != nil {
		return err
	}
	st.written.resourceVersion, st.written.status = got.ResourceVersion, status
	return nil
}

func etcdContainer(pod *corev1.Pod) *corev1.Container {
	i := slices.IndexFunc(pod.Spec.Containers, func(c corev1.Container) bool { return c.Name == specs.ContainerName })
	if i < 0 {
		return nil
	}
	return &pod.Spec.Containers[i]
}

// peerURLOf is the peer URL the Pod's etcd advertises; "" when it has no etcd.
func peerURLOf(pod *corev1.Pod) string {
	ctr := etcdContainer(pod)
	if ctr == nil {
		return ""
	}
	boot, _ := etcdsim.ParseArgs(ctr.Args, "")
	if len(boot.PeerURLs) == 0 {
		return ""
	}
	return boot.PeerURLs[0]
}
