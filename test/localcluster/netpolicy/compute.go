// Package netpolicy makes the local cluster enforce NetworkPolicy ingress between Pods: a
// controller in the supervisor watches NetworkPolicies, Pods and Namespaces, computes which
// sources may reach which isolated Pod on which ports (Compute, a pure function) and renders
// that as one nftables table on the host (Apply), in the ip family's forward hook: with
// br_netfilter, the Pod-to-Pod frames the bridge lcbr0 switches pass there, while traffic
// from the host to a Pod (the kubelet's probes, tests, port-forward) and from a Pod to the
// host does not, and so stays allowed, as it is from a node on a real cluster.
package netpolicy

import (
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Port is a destination port range of one protocol that an Allow admits; Port 0 stands for
// every port of the protocol.
type Port struct {
	Protocol      corev1.Protocol
	Port, EndPort int32
}

// Allow admits Sources (every source when AnySource) to Ports of a destination (every port
// and protocol when Ports is empty).
type Allow struct {
	AnySource bool
	Sources   []netip.Addr
	Ports     []Port
}

// Ruleset maps each Pod IP that some policy isolates for ingress to what it admits; a Pod
// IP absent from the map admits everything.
type Ruleset map[netip.Addr][]Allow

// Compute is the NetworkPolicy ingress semantics of the Kubernetes API over the given
// objects. Pods without an IPv4 address, and finished Pods (their IP may already be someone
// else's), neither are isolated nor count as sources. ipBlock peers are not supported: they
// admit nothing (stricter than the API, never looser).
func Compute(policies []*networkingv1.NetworkPolicy, pods []*corev1.Pod, namespaces []*corev1.Namespace) Ruleset {
	nsLabels := map[string]labels.Set{}
	for _, ns := range namespaces {
		nsLabels[ns.Name] = ns.Labels
	}
	live := livePods(pods)
	rules := Ruleset{}
	for _, p := range policies {
		if !hasIngress(p) {
			continue
		}
		for _, dst := range selectPods(live, p.Namespace, &p.Spec.PodSelector) {
			ip := podIP(dst)
			if _, ok := rules[ip]; !ok {
				rules[ip] = []Allow{} // isolated, even with no rule
			}
			for _, r := range p.Spec.Ingress {
				if a, ok := allowOf(r, p.Namespace, dst, live, nsLabels); ok {
					rules[ip] = append(rules[ip], a)
				}
			}
		}
	}
	return rules
}

// Admits tells whether a connection from src to dst's port of protocol may open.
func (r Ruleset) Admits(src, dst netip.Addr, protocol corev1.Protocol, port int32) bool {
	allows, isolated := r[dst]
	if !isolated {
		return true
	}
	for _, a := range allows {
		if (a.AnySource || slices.Contains(a.Sources, src)) && a.admitsPort(protocol, port) {
			return true
		}
	}
	return false
}

func (a Allow) admitsPort(protocol corev1.Protocol, port int32) bool {
	if len(a.Ports) == 0 {
		return true
	}
	for _, p := range a.Ports {
		if p.Protocol == protocol && (p.Port == 0 || port == p.Port || (p.EndPort >= p.Port && port >= p.Port && port <= p.EndPort)) {
			return true
		}
	}
	return false
}

// hasIngress: a policy without policyTypes always restricts ingress.
func hasIngress(p *networkingv1.NetworkPolicy) bool {
	return len(p.Spec.PolicyTypes) == 0 || slices.Contains(p.Spec.PolicyTypes, networkingv1.PolicyTypeIngress)
}

// allowOf turns one ingress rule into an Allow for dst; ok is false when it admits nothing
// (no source matches, or no named port resolves on dst).
func allowOf(r networkingv1.NetworkPolicyIngressRule, namespace string, dst *corev1.Pod, pods []*corev1.Pod, nsLabels map[string]labels.Set) (Allow, bool) {
	a := Allow{AnySource: len(r.From) == 0}
	for _, peer := range r.From {
		for _, src := range peerPods(peer, namespace, pods, nsLabels) {
			if ip := podIP(src); !slices.Contains(a.Sources, ip) {
				a.Sources = append(a.Sources, ip)
			}
		}
	}
	slices.SortFunc(a.Sources, netip.Addr.Compare) // namespaces come from a map: keep the order stable
	for _, p := range r.Ports {
		if port, ok := resolvePort(p, dst); ok {
			a.Ports = append(a.Ports, port)
		}
	}
	if len(r.Ports) > 0 && len(a.Ports) == 0 {
		return a, false
	}
	return a, a.AnySource || len(a.Sources) > 0
}

// peerPods are the Pods a peer selects: by podSelector in the policy's namespace, by
// namespaceSelector in the namespaces it selects (every Pod there, or those podSelector
// selects).
func peerPods(peer networkingv1.NetworkPolicyPeer, namespace string, pods []*corev1.Pod, nsLabels map[string]labels.Set) []*corev1.Pod {
	if peer.IPBlock != nil || (peer.PodSelector == nil && peer.NamespaceSelector == nil) {
		return nil
	}
	podSel := &metav1.LabelSelector{}
	if peer.PodSelector != nil {
		podSel = peer.PodSelector
	}
	if peer.NamespaceSelector == nil {
		return selectPods(pods, namespace, podSel)
	}
	nsSel, err := metav1.LabelSelectorAsSelector(peer.NamespaceSelector)
	if err != nil {
		return nil
	}
	var out []*corev1.Pod
	for name, set := range nsLabels {
		if nsSel.Matches(set) {
			out = append(out, selectPods(pods, name, podSel)...)
		}
	}
	return out
}

// selectPods are the Pods of namespace that sel selects; an invalid selector selects none.
func selectPods(pods []*corev1.Pod, namespace string, sel *metav1.LabelSelector) []*corev1.Pod {
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return nil
	}
	var out []*corev1.Pod
	for _, p := range pods {
		if p.Namespace == namespace && s.Matches(labels.Set(p.Labels)) {
			out = append(out, p)
		}
	}
	return out
}

// resolvePort gives a NetworkPolicyPort's protocol (TCP by default) and port range; a named
// port is looked up among dst's container ports.
func resolvePort(p networkingv1.NetworkPolicyPort, dst *corev1.Pod) (Port, bool) {
	port := Port{Protocol: corev1.ProtocolTCP}
	if p.Protocol != nil {
		port.Protocol = *p.Protocol
	}
	if p.Port == nil {
		return port, true
	}
	if p.Port.Type == intstr.Int {
		port.Port = p.Port.IntVal
		if p.EndPort != nil {
			port.EndPort = *p.EndPort
		}
		return port, port.Port != 0
	}
	for _, c := range dst.Spec.Containers {
		for _, cp := range c.Ports {
			if cp.Name == p.Port.StrVal && protocolOf(cp) == port.Protocol {
				port.Port = cp.ContainerPort
				return port, true
			}
		}
	}
	return port, false
}

func protocolOf(cp corev1.ContainerPort) corev1.Protocol {
	if cp.Protocol == "" {
		return corev1.ProtocolTCP
	}
	return cp.Protocol
}

// livePods are the Pods with an IPv4 address that are not finished.
func livePods(pods []*corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range pods {
		if p.Spec.HostNetwork || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if podIP(p).IsValid() {
			out = append(out, p)
		}
	}
	return out
}

func podIP(p *corev1.Pod) netip.Addr {
	ip, err := netip.ParseAddr(p.Status.PodIP)
	if err != nil || !ip.Is4() {
		return netip.Addr{}
	}
	return ip
}
