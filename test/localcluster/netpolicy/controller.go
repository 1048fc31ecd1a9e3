package netpolicy

import (
	"context"
	"reflect"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// retryInterval paces the retries of a table that could not be written.
const retryInterval = 2 * time.Second

// Run keeps table in step with the cluster's NetworkPolicies, Pods and Namespaces until ctx
// ends, then deletes it. Every change recomputes the whole ruleset (the local cluster has
// tens of Pods) and rewrites the table only when the ruleset differs.
func Run(ctx context.Context, client kubernetes.Interface, table string) {
	factory := informers.NewSharedInformerFactory(client, 0)
	policies := factory.Networking().V1().NetworkPolicies()
	pods := factory.Core().V1().Pods()
	namespaces := factory.Core().V1().Namespaces()
	changed := make(chan struct{}, 1)
	notify := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { notify() }, UpdateFunc: func(any, any) { notify() }, DeleteFunc: func(any) { notify() },
	}
	for _, inf := range []cache.SharedIndexInformer{policies.Informer(), pods.Informer(), namespaces.Informer()} {
		if _, err := inf.AddEventHandler(handler); err != nil {
			klog.ErrorS(err, "netpolicy: watching")
			return
		}
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	defer func() {
		if err := Remove(table); err != nil {
			klog.ErrorS(err, "netpolicy: removing the table")
		}
	}()
	factory.WaitForCacheSync(ctx.Done())
	var applied Ruleset
	for {
		rules, err := current(policies.Lister().List, pods.Lister().List, namespaces.Lister().List)
		if err == nil && (applied == nil || !reflect.DeepEqual(rules, applied)) {
			if err = Apply(table, rules); err == nil {
				applied = rules
				klog.V(2).InfoS("netpolicy: table written", "isolatedPods", len(rules))
			}
		}
		if err != nil {
			klog.ErrorS(err, "netpolicy: enforcing NetworkPolicies")
			notifyAfter(ctx, retryInterval, notify)
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
	}
}

func notifyAfter(ctx context.Context, d time.Duration, notify func()) {
	go func() {
		select {
		case <-ctx.Done():
		case <-time.After(d):
			notify()
		}
	}()
}

func current(
	listPolicies func(labels.Selector) ([]*networkingv1.NetworkPolicy, error),
	listPods func(labels.Selector) ([]*corev1.Pod, error),
	listNamespaces func(labels.Selector) ([]*corev1.Namespace, error),
) (Ruleset, error) {
	p, err := listPolicies(labels.Everything())
	if err != nil {
		return nil, err
	}
	pods, err := listPods(labels.Everything())
	if err != nil {
		return nil, err
	}
	ns, err := listNamespaces(labels.Everything())
	if err != nil {
		return nil, err
	}
	return Compute(p, pods, ns), nil
}
