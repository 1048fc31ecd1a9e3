package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumkeeper/etcd-operator/internal/specs"
	"github.com/quorumkeeper/etcd-operator/test/robustness"
)

// podTracker follows a cluster's member Pods through a watch, every change in the order the
// apiserver made it, so that no moment is missed as polling would (robustness.Restarts
// counts the restarts).
type podTracker struct {
	stop context.CancelFunc
	done chan struct{}

	mu       sync.Mutex
	restarts *robustness.Restarts
	err      error
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
	restarts, err := robustness.NewRestarts(members, list.Items)
	if err != nil {
		t.Fatalf("before the tracking began: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := wc.Watch(ctx, &corev1.PodList{}, client.InNamespace(ns), selector,
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}})
	if err != nil {
		t.Fatal(err)
	}
	pt := &podTracker{stop: cancel, done: make(chan struct{}), restarts: restarts}
	go pt.follow(ctx, w)
	return pt
}

func (pt *podTracker) follow(ctx context.Context, w watch.Interface) {
	defer close(pt.done)
	defer w.Stop()
	for ev := range w.ResultChan() {
		pod, ok := ev.Object.(*corev1.Pod)
		pt.mu.Lock()
		switch {
		case ok:
			pt.restarts.Observe(pod, ev.Type == watch.Deleted)
		case ctx.Err() == nil:
			pt.err = fmt.Errorf("watch ended with %s %v", ev.Type, ev.Object)
		}
		// else: finish stopped the watch, and the client reported its own cancellation as an
		// error event; nothing was missed.
		pt.mu.Unlock()
		if !ok {
			return
		}
	}
	if ctx.Err() == nil {
		pt.mu.Lock()
		pt.err = fmt.Errorf("the watch closed early")
		pt.mu.Unlock()
	}
}

// finish stops the watch and returns what it counted; an interrupted watch fails the test,
// since moments would be missing.
func (pt *podTracker) finish(t *testing.T) *robustness.Restarts {
	t.Helper()
	pt.stop()
	<-pt.done
	pt.mu.Lock()
	defer pt.mu.Unlock()
	if pt.err != nil {
		t.Fatalf("following the member Pods: %v", pt.err)
	}
	return pt.restarts
}
