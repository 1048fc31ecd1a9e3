package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// podTracker follows a cluster's member Pods through a watch, every change in the order the
// apiserver made it, so that no moment is missed as polling would: the most members that
// were restarting at once (from their Pod's deletion until the Pod that replaces it is
// Ready; a running Pod's readiness that flickers under load is not a restart), and how
// often each member's Pod was replaced by a new one.
type podTracker struct {
	stop context.CancelFunc
	done chan struct{}

	mu         sync.Mutex
	members    []string
	uid        map[string]types.UID
	restarting map[string]bool
	maxDown    int
	restarts   map[string]int
	err        error
}

// trackMemberPods starts following the Pods of members, which must all be up now.
func trackMemberPods(t *testing.T, ns, cluster string, members []string) *podTracker {
	t.Helper()
	wc, err := client.NewWithWatch(restConfig, client.Options{Scheme: k8s.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	list := &corev1.PodList{}
	selector := client.MatchingLabels{specs.LabelCluster: cluster}
	if err := wc.List(context.Background(), list, client.InNamespace(ns), selector); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w, err := wc.Watch(ctx, &corev1.PodList{}, client.InNamespace(ns), selector, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	pt := &podTracker{stop: cancel, done: make(chan struct{}), members: members,
		uid: map[string]types.UID{}, restarting: map[string]bool{}, restarts: map[string]int{}}
	for i := range list.Items {
		p := &list.Items[i]
		pt.uid[p.Name] = p.UID
		if !p.DeletionTimestamp.IsZero() || !podIsReady(p) {
			cancel()
			t.Fatalf("member Pod %s is not up before the tracking began", p.Name)
		}
	}
	for _, m := range members {
		if pt.uid[m] == "" {
			cancel()
			t.Fatalf("member %s has no Pod before the tracking began", m)
		}
	}
	go pt.follow(ctx, w)
	t.Cleanup(cancel)
	return pt
}

func (pt *podTracker) follow(ctx context.Context, w watch.Interface) {
	defer close(pt.done)
	defer w.Stop()
	defer func() {
		if ctx.Err() == nil {
			pt.mu.Lock()
			pt.err = fmt.Errorf("the watch closed early")
			pt.mu.Unlock()
		}
	}()
	for ev := range w.ResultChan() {
		pod, ok := ev.Object.(*corev1.Pod)
		if !ok {
			pt.mu.Lock()
			pt.err = fmt.Errorf("watch ended with %s %v", ev.Type, ev.Object)
			pt.mu.Unlock()
			<-ctx.Done()
			return
		}
		pt.observe(ev.Type, pod)
	}
}

// observe applies one change and counts the members restarting after it.
func (pt *podTracker) observe(kind watch.EventType, pod *corev1.Pod) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	name := pod.Name
	switch {
	case kind == watch.Deleted || !pod.DeletionTimestamp.IsZero():
		pt.restarting[name] = true
	case pod.UID != pt.uid[name]: // the Pod that replaces the deleted one
		pt.uid[name] = pod.UID
		pt.restarts[name]++
		pt.restarting[name] = !podIsReady(pod)
	case podIsReady(pod):
		pt.restarting[name] = false
	}
	down := 0
	for _, m := range pt.members {
		if pt.restarting[m] {
			down++
		}
	}
	pt.maxDown = max(pt.maxDown, down)
}

// finish stops the watch and returns the most members restarting at once and the restarts
// per member; an interrupted watch fails the test, since moments would be missing.
func (pt *podTracker) finish(t *testing.T) (int, map[string]int) {
	t.Helper()
	pt.stop()
	<-pt.done
	pt.mu.Lock()
	defer pt.mu.Unlock()
	if pt.err != nil {
		t.Fatalf("following the member Pods: %v", pt.err)
	}
	return pt.maxDown, pt.restarts
}

func podIsReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
