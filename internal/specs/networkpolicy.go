package specs

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

// NetworkPolicyName is the cluster's NetworkPolicy (spec.networkPolicy).
func NetworkPolicyName(cluster string) string { return cluster }

// OperatorLabels select the operator's own Pods (config/manager).
var OperatorLabels = map[string]string{etcdv1.LabelName: ManagerName}

// OperatorPeer is who may reach every member as the operator: Pods labelled as the operator in
// its namespace, or in any namespace when that is not known ("").
func OperatorPeer(namespace string) networkingv1.NetworkPolicyPeer {
	ns := &metav1.LabelSelector{}
	if namespace != "" {
		ns.MatchLabels = map[string]string{"kubernetes.io/metadata.name": namespace}
	}
	return networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{MatchLabels: OperatorLabels}, NamespaceSelector: ns}
}

// NetworkPolicyWanted: the cluster has a NetworkPolicy when spec.networkPolicy asks for one,
// and also while its authentication is pending (AuthPending). The headless Service publishes
// every member's address before it is ready (peers need it to form the cluster), so without
// a policy any Pod could write through a member's name before authentication is on; the
// policy keeps that window to the operator alone. It is enforced only where the network
// plugin enforces NetworkPolicies (docs/tls.md says what holds without one).
func NetworkPolicyWanted(c *etcdv1.EtcdCluster) bool {
	return (c.Spec.NetworkPolicy != nil && c.Spec.NetworkPolicy.Enabled) || AuthPending(c)
}

// NetworkPolicy admits to the member Pods only: peer traffic (2380) from members of this
// cluster, client traffic (2379) from the operator, from the snapshot agents of this cluster
// (SnapshotAgentPeer: without them every snapshot of a cluster with a policy fails to connect)
// and from the Pods spec.networkPolicy's clientSelector chooses (in the cluster's namespace, or in those clientNamespaceSelector
// chooses), and metrics and health (2381) from anywhere, for Prometheus and the kubelet's
// probes. An empty clientSelector admits no application. While authentication is pending
// (AuthPending), 2379 admits the operator alone: it enables authentication, and nothing
// else has any business with a cluster that takes writes from anyone.
func NetworkPolicy(c *etcdv1.EtcdCluster, operator networkingv1.NetworkPolicyPeer) *networkingv1.NetworkPolicy {
	clients := []networkingv1.NetworkPolicyPeer{operator}
	if !AuthPending(c) {
		clients = append(clients, SnapshotAgentPeer(c.Name))
		if np := c.Spec.NetworkPolicy; np != nil && np.ClientSelector != nil {
			clients = append(clients, networkingv1.NetworkPolicyPeer{
				PodSelector: np.ClientSelector.DeepCopy(), NamespaceSelector: np.ClientNamespaceSelector.DeepCopy(),
			})
		}
	}
	return &networkingv1.NetworkPolicy{
		ObjectMeta: objectMeta(c, NetworkPolicyName(c.Name), ClusterLabels(c.Name)),
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: ClusterLabels(c.Name)},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{
				{Ports: tcpPorts(PeerPort), From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: ClusterLabels(c.Name)}}}},
				{Ports: tcpPorts(ClientPort), From: clients},
				{Ports: tcpPorts(MetricsPort)},
			},
		},
	}
}

// SnapshotAgentPeer selects the snapshot agents' Pods of a cluster, in its namespace (an
// EtcdSnapshot names a cluster of its own namespace, and its Job runs there).
func SnapshotAgentPeer(cluster string) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{MatchLabels: SnapshotAgentLabels(cluster)}}
}

// SnapshotAgentLabels mark the Pod of an agent that takes a snapshot of the cluster.
func SnapshotAgentLabels(cluster string) map[string]string {
	return map[string]string{etcdv1.LabelManagedBy: ManagerName, etcdv1.LabelSnapshotOf: cluster}
}

func tcpPorts(port int32) []networkingv1.NetworkPolicyPort {
	protocol := corev1.ProtocolTCP
	p := intstr.FromInt32(port)
	return []networkingv1.NetworkPolicyPort{{Protocol: &protocol, Port: &p}}
}
