package localcluster

import (
	"context"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// recordSink receives the full set of DNS records each time it changes.
type recordSink interface {
	SetRecords(map[string][]netip.Addr)
}

// ServeRecords keeps the DNS server's records in step with Pods and Services until ctx ends.
// Every Service name resolves to the addresses of its Pods (a ClusterIP is never handed out:
// nothing here translates it), and a Pod with hostname and subdomain gets
// <hostname>.<subdomain>.<ns>.svc.cluster.local while that Service selects it. Pods that are
// not Ready count only for Services with publishNotReadyAddresses, as with real endpoints.
func ServeRecords(ctx context.Context, client kubernetes.Interface, sink recordSink) {
	factory := informers.NewSharedInformerFactory(client, time.Minute)
	pods := factory.Core().V1().Pods()
	services := factory.Core().V1().Services()
	changed := make(chan struct{}, 1)
	poke := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { poke() },
		UpdateFunc: func(any, any) { poke() },
		DeleteFunc: func(any) { poke() },
	}
	_, _ = pods.Informer().AddEventHandler(handler)
	_, _ = services.Informer().AddEventHandler(handler)
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	defer factory.Shutdown()
	for {
		select {
		case <-ctx.Done():
			return
		case <-changed:
			sink.SetRecords(computeRecords(pods.Lister(), services.Lister()))
		}
	}
}

func computeRecords(pods corev1listers.PodLister, services corev1listers.ServiceLister) map[string][]netip.Addr {
	records := map[string][]netip.Addr{}
	svcs, _ := services.List(labels.Everything())
	for _, svc := range svcs {
		if len(svc.Spec.Selector) == 0 {
			continue
		}
		selected, _ := pods.Pods(svc.Namespace).List(labels.SelectorFromSet(svc.Spec.Selector))
		svcName := svc.Name + "." + svc.Namespace + ".svc.cluster.local"
		for _, pod := range selected {
			ip, ok := servingAddress(pod, svc.Spec.PublishNotReadyAddresses)
			if !ok {
				continue
			}
			records[svcName] = append(records[svcName], ip)
			if pod.Spec.Hostname != "" && pod.Spec.Subdomain == svc.Name {
				host := pod.Spec.Hostname + "." + svcName
				records[host] = append(records[host], ip)
			}
		}
	}
	return records
}

// servingAddress is the Pod's address when it should be in its Services' answers.
func servingAddress(pod *corev1.Pod, publishNotReady bool) (netip.Addr, bool) {
	if pod.DeletionTimestamp != nil && !publishNotReady {
		return netip.Addr{}, false
	}
	ip, err := netip.ParseAddr(pod.Status.PodIP)
	if err != nil {
		return netip.Addr{}, false
	}
	return ip, publishNotReady || podReady(pod)
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
