package specs

import (
	"reflect"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

func TestAdoptedMemberKeepsItsDataWhereItWas(t *testing.T) {
	c := cluster()
	m := member(c, "example-x7k2p")
	m.Spec.Adopted = &etcdv1.MemberAdoption{From: etcdv1.AdoptedFromCozystack, PVCName: "data-example-x7k2p", DataDir: "/var/lib/etcd"}
	pod := Pod(c, m, PodOptions{})
	if claim := pod.Spec.Volumes[0].PersistentVolumeClaim.ClaimName; claim != "data-example-x7k2p" {
		t.Errorf("claim %s", claim)
	}
	if !slices.Contains(pod.Spec.Containers[0].Args, "--data-dir=/var/lib/etcd") {
		t.Errorf("args %v", pod.Spec.Containers[0].Args)
	}
	if pvc := PVC(c, m); pvc.Name != "data-example-x7k2p" || pvc.Labels[etcdv1.LabelMember] != "example-x7k2p" {
		t.Errorf("pvc %s %v", pvc.Name, pvc.Labels)
	}
	native := member(c, "example-1")
	if PVCName(native) != "example-1" || MemberDataDir(native) != "/var/lib/etcd/data" {
		t.Errorf("native member: %s %s", PVCName(native), MemberDataDir(native))
	}
}

func TestAdoptionOfReadsThePVCAnnotations(t *testing.T) {
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-a-x", Annotations: map[string]string{
		etcdv1.AnnotationAdoptedFrom: "cozystack-v1alpha2", etcdv1.AnnotationDataDir: "/var/lib/etcd"}}}
	got := AdoptionOf(pvc)
	if got == nil || *got != (etcdv1.MemberAdoption{From: etcdv1.AdoptedFromCozystack, PVCName: "data-a-x", DataDir: "/var/lib/etcd"}) {
		t.Errorf("got %+v", got)
	}
	if AdoptionOf(&corev1.PersistentVolumeClaim{}) != nil {
		t.Error("a PVC of this operator's member is no adoption")
	}
}

// A member adopted from the legacy operator keeps the DNS name its peers know it by
// (<member>.<cluster>-headless): its Pods are built under that Service and the operator
// reaches it there; members the operator adds get the cluster's own Service.
func TestAdoptedSubdomainNamesTheLegacyMembersOnly(t *testing.T) {
	c := cluster()
	c.Annotations = map[string]string{etcdv1.AnnotationAdoptedSubdomain: AdoptedSubdomainValue("db-headless", []string{"db-0", "db-1"})}
	for member, want := range map[string]string{"db-0": "db-headless", "db-1": "db-headless", "db-2": "db", "db-10": "db"} {
		if got := MemberSubdomain(c, member); got != want {
			t.Errorf("member %s: subdomain %s, want %s", member, got, want)
		}
	}
	if got, want := ClientURL(c, "db-1"), "http://db-1.db-headless."+c.Namespace+".svc:2379"; got != want {
		t.Errorf("client URL %s, want %s", got, want)
	}
	if pod := Pod(c, member(c, "db-0"), PodOptions{}); pod.Spec.Subdomain != "db-headless" ||
		!slices.Contains(pod.Spec.Containers[0].Args, "--initial-advertise-peer-urls=http://db-0.db-headless."+c.Namespace+".svc:2380") {
		t.Errorf("adopted member's Pod: subdomain %s, args %v", pod.Spec.Subdomain, pod.Spec.Containers[0].Args)
	}
	if pod := Pod(c, member(c, "db-2"), PodOptions{}); pod.Spec.Subdomain != "db" {
		t.Errorf("new member's Pod: subdomain %s", pod.Spec.Subdomain)
	}
	if service, members := AdoptedSubdomain(cluster()); service != "" || members != nil {
		t.Errorf("a cluster without the annotation: %q %v", service, members)
	}
}

// An adoption that puts every member under the legacy headless Service (the list ends with
// AdoptedSubdomainEveryMember): the members the operator adds live there too.
func TestEveryMemberUnderTheAdoptedSubdomain(t *testing.T) {
	c := cluster()
	c.Annotations = map[string]string{etcdv1.AnnotationAdoptedSubdomain: AdoptedSubdomainValue("db-headless", []string{"db-0", etcdv1.AdoptedSubdomainEveryMember})}
	for _, member := range []string{"db-0", "db-3", "db-10"} {
		if got := MemberSubdomain(c, member); got != "db-headless" {
			t.Errorf("member %s: subdomain %s, want db-headless", member, got)
		}
	}
	if service, members := AdoptedSubdomain(c); service != "db-headless" || !slices.Equal(members, []string{"db-0"}) {
		t.Errorf("adopted: %q %v, want db-headless [db-0]", service, members)
	}
}

// With every member under the legacy headless Service, that Service is the one the operator
// keeps headless, and the name of the cluster stays a client Service of ready members, so that
// the legacy clients of that name never reach a learner; otherwise the name is the headless
// Service's and there is no adopted client Service.
func TestTheAdoptedClientServiceKeepsTheClusterName(t *testing.T) {
	c := withAnnotation(cluster(), "db-headless=db-0,"+etcdv1.AdoptedSubdomainEveryMember)
	if h := HeadlessService(c); h.Name != "db-headless" || h.Spec.ClusterIP != corev1.ClusterIPNone || !h.Spec.PublishNotReadyAddresses {
		t.Errorf("headless Service %s: clusterIP %q, publishNotReady %t", h.Name, h.Spec.ClusterIP, h.Spec.PublishNotReadyAddresses)
	}
	adopted, own := AdoptedClientService(c), ClientService(c)
	if adopted == nil || adopted.Name != "db" || adopted.Spec.ClusterIP != "" || adopted.Spec.PublishNotReadyAddresses ||
		!reflect.DeepEqual(adopted.Spec, own.Spec) {
		t.Fatalf("adopted client Service %+v, want db with the spec of %s", adopted, own.Name)
	}
	if got := PeerAllowedHostname(c); got != "" {
		t.Errorf("peer allowed hostname %q without cert-manager", got)
	}
	for _, other := range []*etcdv1.EtcdCluster{cluster(), withAnnotation(cluster(), "db-headless=db-0,db-1")} {
		if got := AdoptedClientService(other); got != nil || HeadlessService(other).Name != "db" {
			t.Errorf("annotation %q: adopted client Service %v, headless %s; want none and db", other.Annotations[etcdv1.AnnotationAdoptedSubdomain], got, HeadlessService(other).Name)
		}
	}
}

func withAnnotation(c *etcdv1.EtcdCluster, subdomain string) *etcdv1.EtcdCluster {
	c.Annotations = map[string]string{etcdv1.AnnotationAdoptedSubdomain: subdomain}
	return c
}

// Peer auto TLS: https between peers with etcd's own certificates, no Secret mounted.
func TestPeerAutoTLS(t *testing.T) {
	c := cluster()
	c.Spec.TLS = &etcdv1.EtcdClusterTLS{Peer: &etcdv1.PeerTLS{AutoTLS: true}}
	pod := Pod(c, member(c, "db-0"), PodOptions{})
	args := pod.Spec.Containers[0].Args
	if !slices.Contains(args, "--peer-auto-tls=true") || !slices.Contains(args, "--listen-peer-urls=https://0.0.0.0:2380") ||
		slices.ContainsFunc(args, func(a string) bool {
			return len(a) > 11 && a[:11] == "--peer-cert" || a == "--peer-client-cert-auth=true"
		}) {
		t.Errorf("args %v", args)
	}
	for _, vm := range pod.Spec.Containers[0].VolumeMounts {
		if vm.Name == "peer-tls" {
			t.Errorf("peer-tls mounted with auto TLS")
		}
	}
	if got := PeerURL(c, "db-0"); got[:8] != "https://" {
		t.Errorf("peer URL %s", got)
	}
	if PeerSecretTLS(c) {
		t.Error("auto TLS counts as a peer Secret")
	}
}

func TestAdoptedPodIsCurrentUntilStamped(t *testing.T) {
	adopted := &etcdv1.EtcdMember{Spec: etcdv1.EtcdMemberSpec{Adopted: &etcdv1.MemberAdoption{From: etcdv1.AdoptedFromCozystack}}}
	native := &etcdv1.EtcdMember{}
	bare := &corev1.Pod{}
	stamped := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{etcdv1.AnnotationPodTemplateHash: "x"}}}
	for _, tc := range []struct {
		m    *etcdv1.EtcdMember
		pod  *corev1.Pod
		want bool
	}{{adopted, bare, true}, {adopted, stamped, false}, {native, bare, false}, {native, stamped, false}} {
		if got := AdoptedPodIsCurrent(tc.m, tc.pod); got != tc.want {
			t.Errorf("adopted=%t stamped=%t: got %t", tc.m.Spec.Adopted != nil, tc.pod.Annotations != nil, got)
		}
	}
}
