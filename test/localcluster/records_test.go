package localcluster

import (
	"net/netip"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

func TestRecordsFollowServicesAndReadiness(t *testing.T) {
	podIndex := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	svcIndex := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	member := func(name, ip string, ready bool) *corev1.Pod {
		status := corev1.ConditionFalse
		if ready {
			status = corev1.ConditionTrue
		}
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: map[string]string{"app": "etcd"}},
			Spec:       corev1.PodSpec{Hostname: name, Subdomain: "etcd"},
			Status:     corev1.PodStatus{PodIP: ip, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}},
		}
	}
	for _, p := range []*corev1.Pod{member("etcd-0", "10.213.1.2", true), member("etcd-1", "10.213.1.3", false)} {
		_ = podIndex.Add(p)
	}
	_ = svcIndex.Add(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "etcd", Namespace: "ns"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "etcd"}, PublishNotReadyAddresses: true, ClusterIP: "None"}})
	_ = svcIndex.Add(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "etcd-client", Namespace: "ns"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "etcd"}, ClusterIP: "10.214.0.7"}})

	got := computeRecords(corev1listers.NewPodLister(podIndex), corev1listers.NewServiceLister(svcIndex))
	a := netip.MustParseAddr
	want := map[string][]netip.Addr{
		"etcd.ns.svc.cluster.local":        {a("10.213.1.2"), a("10.213.1.3")},
		"etcd-0.etcd.ns.svc.cluster.local": {a("10.213.1.2")},
		"etcd-1.etcd.ns.svc.cluster.local": {a("10.213.1.3")},
		"etcd-client.ns.svc.cluster.local": {a("10.213.1.2")}, // not-ready etcd-1 left out, ClusterIP never used
	}
	for name := range want {
		sortAddrs(got[name])
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("records:\n got %v\nwant %v", got, want)
	}
}

func sortAddrs(addrs []netip.Addr) {
	for i := range addrs {
		for j := i + 1; j < len(addrs); j++ {
			if addrs[j].Less(addrs[i]) {
				addrs[i], addrs[j] = addrs[j], addrs[i]
			}
		}
	}
}
