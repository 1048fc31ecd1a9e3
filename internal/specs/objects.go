package specs

import (
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

func objectMeta(c *etcdv1.EtcdCluster, name string, labels map[string]string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:        name,
		Namespace:   c.Namespace,
		Labels:      withMetadata(labels, extraLabels(c)),
		Annotations: withMetadata(nil, extraAnnotations(c)),
	}
}

// PVC is the data volume of a member with medium "": its identity outlives every Pod.
func PVC(c *etcdv1.EtcdCluster, m *etcdv1.EtcdMember) *corev1.PersistentVolumeClaim {
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: objectMeta(c, PVCName(m), MemberLabels(c.Name, m.Name)),
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: m.Spec.Storage.StorageClassName,
		},
	}
	if m.Spec.Storage.Size != nil {
		pvc.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceStorage: *m.Spec.Storage.Size}
	}
	return pvc
}

// HeadlessService gives each member the DNS name <member>.<cluster>.<ns>.svc (under
// MembersServiceName), also before it is ready: members must find each other to become
// ready at all. Every address of it is a member's, learners and members not ready included.
func HeadlessService(c *etcdv1.EtcdCluster) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: objectMeta(c, MembersServiceName(c), ClusterLabels(c.Name)),
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			PublishNotReadyAddresses: true,
			Selector:                 ClusterLabels(c.Name),
			Ports: []corev1.ServicePort{
				servicePort("client", ClientPort),
				servicePort("peer", PeerPort),
				servicePort("metrics", MetricsPort),
			},
		},
	}
}

// servicePort sets every field the apiserver would otherwise default, so that a Service read
// back equals the built one and a cluster at rest rewrites nothing.
func servicePort(name string, port int32) corev1.ServicePort {
	return corev1.ServicePort{Name: name, Protocol: corev1.ProtocolTCP, Port: port, TargetPort: intstr.FromInt32(port)}
}

// AuthPending: the cluster is meant to have authentication and the operator has not enabled
// it yet (status.authEnabled). Until then etcd takes writes from anyone who reaches it, so
// only the operator may: the client Service has no endpoints and the cluster's NetworkPolicy
// admits no other client (NetworkPolicy).
func AuthPending(c *etcdv1.EtcdCluster) bool {
	return c.Spec.Auth != nil && c.Spec.Auth.Enabled && !c.Status.AuthEnabled
}

// ClientService is what applications connect to: ready members only. A cluster meant to have
// auth serves no application before the operator has enabled auth (status.authEnabled): the
// selector then also asks for an empty member label, which no member Pod has (the operator's
// own labels win over spec.additionalMetadata), so the Service has no endpoints.
func ClientService(c *etcdv1.EtcdCluster) *corev1.Service {
	return clientService(c, ClientServiceName(c.Name))
}

// AdoptedClientService is the legacy operator's client Service, named after the cluster,
// kept as a client Service like ClientService for the applications that use that name,
// when every member lives under the legacy headless Service (AdoptedSubdomainEveryMember);
// nil otherwise (the name is then the headless Service's).
func AdoptedClientService(c *etcdv1.EtcdCluster) *corev1.Service {
	if !KeepsLegacyClientService(c) {
		return nil
	}
	return clientService(c, HeadlessServiceName(c.Name))
}

// KeepsLegacyClientService: every member lives under the legacy headless Service, and the
// Service named after the cluster is the legacy client Service (AdoptedClientService).
func KeepsLegacyClientService(c *etcdv1.EtcdCluster) bool {
	return MembersServiceName(c) != HeadlessServiceName(c.Name)
}

func clientService(c *etcdv1.EtcdCluster, name string) *corev1.Service {
	selector := ClusterLabels(c.Name)
	if AuthPending(c) {
		selector[etcdv1.LabelMember] = ""
	}
	return &corev1.Service{
		ObjectMeta: objectMeta(c, name, ClusterLabels(c.Name)),
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: selector,
			Ports: []corev1.ServicePort{
				servicePort("client", ClientPort),
			},
		},
	}
}

// PDB keeps a quorum of the voters: a drain may evict only as many voters as the cluster can
// lose. Learners are not counted: they carry the voter label only once promoted. legacy: a Pod
// of the cluster still carries an old role value (PDBSelector).
func PDB(c *etcdv1.EtcdCluster, voters int32, legacy bool) *policyv1.PodDisruptionBudget {
	minAvailable := intstr.FromInt32(pdbMinAvailable(c.Spec.Storage.Medium, voters))
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: objectMeta(c, PDBName(c.Name), ClusterLabels(c.Name)),
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: &minAvailable,
			Selector:     PDBSelector(c.Name, legacy),
		},
	}
}

// pdbMinAvailable is the quorum of the voters, except for a single voter on a PVC. A quorum of
// one would block `kubectl drain` for good, and protect nothing a drain endangers: one member
// has no redundancy to keep, so its eviction costs availability (until its Pod is back on its
// PVC) and no data. On tmpfs (medium Memory) the eviction would destroy the only copy of the
// data, so a single voter there stays protected, and draining its node takes a decision
// (docs/install.md#draining-a-node-with-a-one-member-cluster).
func pdbMinAvailable(medium etcdv1.StorageMedium, voters int32) int32 {
	if voters == 1 && medium != etcdv1.StorageMediumMemory {
		return 0
	}
	return voters/2 + 1
}
