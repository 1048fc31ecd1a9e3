package specs

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

// admitsOnClientPort: a Pod of these labels, in the policy's namespace, may reach the client
// port under the policy's rules.
func admitsOnClientPort(t *testing.T, np *networkingv1.NetworkPolicy, podLabels map[string]string) bool {
	t.Helper()
	for _, rule := range np.Spec.Ingress {
		if len(rule.Ports) != 1 || rule.Ports[0].Port.IntVal != ClientPort {
			continue
		}
		for _, from := range rule.From {
			if from.NamespaceSelector != nil || from.PodSelector == nil {
				continue // another namespace's Pods; the agent runs in the cluster's own
			}
			sel, err := metav1.LabelSelectorAsSelector(from.PodSelector)
			if err != nil {
				t.Fatal(err)
			}
			if sel.Matches(labels.Set(podLabels)) {
				return true
			}
		}
	}
	return false
}

// A cluster with spec.networkPolicy admits its own snapshot agent to etcd's client port:
// before, only the operator and the chosen clients were, and every snapshot failed to connect.
func TestTheNetworkPolicyAdmitsTheClustersSnapshotAgentOnly(t *testing.T) {
	cluster := func(name string) *etcdv1.EtcdCluster {
		return &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
			Spec: etcdv1.EtcdClusterSpec{NetworkPolicy: &etcdv1.NetworkPolicySpec{Enabled: true}}}
	}
	snap := &etcdv1.EtcdSnapshot{ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "ns", UID: "u1"},
		Spec: etcdv1.EtcdSnapshotSpec{ClusterRef: corev1.LocalObjectReference{Name: "main"},
			Destination: etcdv1.SnapshotLocation{PVC: &etcdv1.PVCSnapshotLocation{ClaimName: "backups"}}}}
	main := cluster("main")
	np := NetworkPolicy(main, OperatorPeer("etcd-operator-system"))
	if agent := SnapshotJob(snap, main, "op:1", ActionSnapshot).Spec.Template.Labels; !admitsOnClientPort(t, np, agent) {
		t.Errorf("the snapshot agent's Pod %v is not admitted to port %d", agent, ClientPort)
	}
	if other := SnapshotJob(snap, cluster("other"), "op:1", ActionSnapshot).Spec.Template.Labels; admitsOnClientPort(t, np, other) {
		t.Errorf("another cluster's snapshot agent %v is admitted", other)
	}
	if del := SnapshotJob(snap, nil, "op:1", ActionDelete).Spec.Template.Labels; admitsOnClientPort(t, np, del) {
		t.Errorf("the delete agent %v, which never reads etcd, is admitted", del)
	}
}
