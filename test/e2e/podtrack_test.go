package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/test/robustness"
)

// changeWatch follows objects through a watch, every change in the order the apiserver made
// it and when the test saw it, so that no moment is missed as polling would.
type changeWatch struct {
	stop context.CancelFunc
	done chan struct{}

	mu  sync.Mutex // held while observe runs
	err error
}

// watchChanges lists list (with opts), hands it to begin, then watches from the list's
// resource version and calls observe for every change (deleted: the object is gone), at the
// time it was seen.
func watchChanges(t *testing.T, list client.ObjectList, opts []client.ListOption, begin func(client.ObjectList) error,
	observe func(obj client.Object, deleted bool, at time.Time)) *changeWatch {
	t.Helper()
	wc, err := client.NewWithWatch(restConfig, client.Options{Scheme: k8s.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	if err := wc.List(context.Background(), list, opts...); err != nil {
		t.Fatal(err)
	}
	if err := begin(list); err != nil {
		t.Fatalf("before the watch began: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	from := &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.GetResourceVersion()}}
	w, err := wc.Watch(ctx, list, append(append([]client.ListOption(nil), opts...), from)...)
	if err != nil {
		t.Fatal(err)
	}
	cw := &changeWatch{stop: cancel, done: make(chan struct{})}
	go cw.follow(ctx, w, observe)
	return cw
}

func (cw *changeWatch) follow(ctx context.Context, w watch.Interface, observe func(client.Object, bool, time.Time)) {
	defer close(cw.done)
	defer w.Stop()
	for ev := range w.ResultChan() {
		obj, ok := ev.Object.(client.Object)
		ok = ok && ev.Type != watch.Error
		cw.mu.Lock()
		switch {
		case ok:
			observe(obj, ev.Type == watch.Deleted, time.Now())
		case !ok && ctx.Err() == nil:
			cw.err = fmt.Errorf("watch ended with %s %v", ev.Type, ev.Object)
		}
		// else: finish stopped the watch, and the client reported its own cancellation as an
		// error event; nothing was missed.
		cw.mu.Unlock()
		if !ok {
			return
		}
	}
	if ctx.Err() == nil {
		cw.mu.Lock()
		cw.err = fmt.Errorf("the watch closed early")
		cw.mu.Unlock()
	}
}

// finish stops the watch; an interrupted watch fails the test, since moments would be
// missing. Once it returns, observe is not called again.
func (cw *changeWatch) finish(t *testing.T) {
	t.Helper()
	cw.stop()
	<-cw.done
	if cw.err != nil {
		t.Fatalf("following through a watch: %v", cw.err)
	}
}

// podTracker follows a cluster's member Pods through a watch (robustness.Restarts counts
// the restarts).
type podTracker struct {
	watch    *changeWatch
	restarts *robustness.Restarts
}

// trackMemberPods starts following the Pods of members, which must all be up now.
func trackMemberPods(t *testing.T, ns, cluster string, members []string) *podTracker {
	t.Helper()
	pt := &podTracker{}
	opts := []client.ListOption{client.InNamespace(ns), client.MatchingLabels{etcdv1.LabelCluster: cluster}}
	begin := func(list client.ObjectList) (err error) {
		pt.restarts, err = robustness.NewRestarts(members, list.(*corev1.PodList).Items)
		return err
	}
	pt.watch = watchChanges(t, &corev1.PodList{}, opts, begin, func(obj client.Object, deleted bool, at time.Time) {
		if pod, ok := obj.(*corev1.Pod); ok {
			pt.restarts.Observe(pod, deleted, at)
		}
	})
	return pt
}

// finish stops the watch and returns what it counted.
func (pt *podTracker) finish(t *testing.T) *robustness.Restarts {
	t.Helper()
	pt.watch.finish(t)
	return pt.restarts
}
