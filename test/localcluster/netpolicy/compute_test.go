package netpolicy

import (
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func pod(ns, name, ip string, labels map[string]string, ports ...corev1.ContainerPort) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Ports: ports}}},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip},
	}
}

func namespace(name string, labels map[string]string) *corev1.Namespace {
	l := map[string]string{"kubernetes.io/metadata.name": name}
	for k, v := range labels {
		l[k] = v
	}
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}
}

func sel(kv ...string) *metav1.LabelSelector {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return &metav1.LabelSelector{MatchLabels: m}
}

func tcp(port int32) networkingv1.NetworkPolicyPort {
	p := intstr.FromInt32(port)
	return networkingv1.NetworkPolicyPort{Port: &p}
}

// policy is a NetworkPolicy of namespace a.
func policy(selected *metav1.LabelSelector, types []networkingv1.PolicyType, rules ...networkingv1.NetworkPolicyIngressRule) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "p"},
		Spec:       networkingv1.NetworkPolicySpec{PodSelector: *selected, PolicyTypes: types, Ingress: rules},
	}
}

type conn struct {
	src, dst string
	protocol corev1.Protocol
	port     int32
	admitted bool
}

func TestCompute(t *testing.T) {
	udp := corev1.ProtocolUDP
	named := intstr.FromString("client")
	endPort := int32(2390)
	namespaces := []*corev1.Namespace{namespace("a", nil), namespace("b", map[string]string{"team": "x"}), namespace("c", nil)}
	pods := []*corev1.Pod{
		pod("a", "member", "10.213.1.2", map[string]string{"app": "etcd"}, corev1.ContainerPort{Name: "client", ContainerPort: 2379}),
		pod("a", "client", "10.213.1.3", map[string]string{"role": "client"}),
		pod("a", "other", "10.213.1.4", nil),
		pod("b", "client", "10.213.2.2", map[string]string{"role": "client"}),
		pod("c", "client", "10.213.3.2", map[string]string{"role": "client"}),
		pod("b", "other", "10.213.2.3", nil),
	}
	finished := pod("a", "done", "10.213.1.9", map[string]string{"role": "client"})
	finished.Status.Phase = corev1.PodSucceeded
	noIP := pod("a", "pending", "", map[string]string{"app": "etcd"})
	ingress := []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
	from := func(ports []networkingv1.NetworkPolicyPort, peers ...networkingv1.NetworkPolicyPeer) networkingv1.NetworkPolicyIngressRule {
		return networkingv1.NetworkPolicyIngressRule{From: peers, Ports: ports}
	}
	cases := []struct {
		name     string
		policies []*networkingv1.NetworkPolicy
		extra    []*corev1.Pod
		conns    []conn
	}{
		{name: "no policy admits all", conns: []conn{{"10.213.1.4", "10.213.1.2", "TCP", 2379, true}}},
		{
			name:     "selected pod with no rule admits nothing; others stay open",
			policies: []*networkingv1.NetworkPolicy{policy(sel("app", "etcd"), ingress)},
			conns: []conn{
				{"10.213.1.3", "10.213.1.2", "TCP", 2379, false},
				{"10.213.1.2", "10.213.1.3", "TCP", 80, true},
			},
		},
		{
			name:     "egress-only policy does not isolate ingress",
			policies: []*networkingv1.NetworkPolicy{policy(sel("app", "etcd"), []networkingv1.PolicyType{networkingv1.PolicyTypeEgress})},
			conns:    []conn{{"10.213.1.4", "10.213.1.2", "TCP", 2379, true}},
		},
		{
			name:     "podSelector peer: same namespace only, on the port named",
			policies: []*networkingv1.NetworkPolicy{policy(sel("app", "etcd"), nil, from([]networkingv1.NetworkPolicyPort{tcp(2379)}, networkingv1.NetworkPolicyPeer{PodSelector: sel("role", "client")}))},
			conns: []conn{
				{"10.213.1.3", "10.213.1.2", "TCP", 2379, true},
				{"10.213.1.3", "10.213.1.2", "TCP", 2380, false},
				{"10.213.1.3", "10.213.1.2", "UDP", 2379, false},
				{"10.213.1.4", "10.213.1.2", "TCP", 2379, false},
				{"10.213.2.2", "10.213.1.2", "TCP", 2379, false},
				{"10.213.1.9", "10.213.1.2", "TCP", 2379, false}, // finished: its IP is no client's
			},
			extra: []*corev1.Pod{finished, noIP},
		},
		{
			name: "namespaceSelector alone, and with a podSelector",
			policies: []*networkingv1.NetworkPolicy{policy(sel("app", "etcd"), ingress,
				from(nil, networkingv1.NetworkPolicyPeer{NamespaceSelector: sel("team", "x")}),
				from([]networkingv1.NetworkPolicyPort{tcp(2379)}, networkingv1.NetworkPolicyPeer{NamespaceSelector: sel("kubernetes.io/metadata.name", "c"), PodSelector: sel("role", "client")}))},
			conns: []conn{
				{"10.213.2.3", "10.213.1.2", "TCP", 1234, true},
				{"10.213.2.2", "10.213.1.2", "UDP", 53, true},
				{"10.213.3.2", "10.213.1.2", "TCP", 2379, true},
				{"10.213.3.2", "10.213.1.2", "TCP", 2380, false},
				{"10.213.1.3", "10.213.1.2", "TCP", 2379, false},
			},
		},
		{
			name: "empty from admits every source; ranges, protocols and named ports",
			policies: []*networkingv1.NetworkPolicy{policy(sel("app", "etcd"), ingress,
				from([]networkingv1.NetworkPolicyPort{{Protocol: &udp, Port: ptrPort(53)}, {Port: ptrPort(2381), EndPort: &endPort}}),
				from([]networkingv1.NetworkPolicyPort{{Port: &named}}, networkingv1.NetworkPolicyPeer{PodSelector: sel("role", "client")}))},
			conns: []conn{
				{"10.213.3.2", "10.213.1.2", "UDP", 53, true},
				{"10.213.3.2", "10.213.1.2", "TCP", 53, false},
				{"10.213.3.2", "10.213.1.2", "TCP", 2385, true},
				{"10.213.3.2", "10.213.1.2", "TCP", 2391, false},
				{"10.213.1.3", "10.213.1.2", "TCP", 2379, true},
				{"10.213.1.4", "10.213.1.2", "TCP", 2379, false},
			},
		},
		{
			name: "ipBlock admits nothing; policies add up",
			policies: []*networkingv1.NetworkPolicy{
				policy(sel("app", "etcd"), ingress, from(nil, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "10.213.0.0/16"}})),
				policy(sel("app", "etcd"), ingress, from([]networkingv1.NetworkPolicyPort{tcp(2380)}, networkingv1.NetworkPolicyPeer{PodSelector: sel("app", "etcd")})),
			},
			conns: []conn{
				{"10.213.1.3", "10.213.1.2", "TCP", 2379, false},
				{"10.213.1.2", "10.213.1.2", "TCP", 2380, true},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rules := Compute(tc.policies, append(append([]*corev1.Pod{}, pods...), tc.extra...), namespaces)
			for _, c := range tc.conns {
				got := rules.Admits(netip.MustParseAddr(c.src), netip.MustParseAddr(c.dst), c.protocol, c.port)
				if got != c.admitted {
					t.Errorf("%s -> %s %s/%d: admitted %v, want %v (rules %+v)", c.src, c.dst, c.protocol, c.port, got, c.admitted, rules)
				}
			}
			if _, isolated := rules[netip.Addr{}]; isolated {
				t.Errorf("a Pod without an IP is isolated: %+v", rules)
			}
		})
	}
}

func ptrPort(p int32) *intstr.IntOrString {
	v := intstr.FromInt32(p)
	return &v
}

// TestRenderIsStable: equal rulesets render the same rules, so the controller rewrites the
// table only on a change; every isolated destination ends with its drop.
func TestRenderIsStable(t *testing.T) {
	rules := Ruleset{
		netip.MustParseAddr("10.213.1.3"): {{AnySource: true}},
		netip.MustParseAddr("10.213.1.2"): {{Sources: []netip.Addr{netip.MustParseAddr("10.213.1.4"), netip.MustParseAddr("10.213.1.5")}, Ports: []Port{{Protocol: "TCP", Port: 2379}, {Protocol: "TCP", Port: 2380}}}},
	}
	a, b := render(rules), render(rules)
	// established + (2 sources x 2 ports) + drop + 1 accept + drop
	if len(a) != 1+4+1+1+1 || len(a) != len(b) {
		t.Fatalf("rendered %d and %d rules, want 8", len(a), len(b))
	}
}
