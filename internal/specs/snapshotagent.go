package specs

import (
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

// DefaultAgentResources are an agent container's resources when the EtcdSnapshot sets none.
// The snapshot agent streams through fixed buffers (a 1 MiB gRPC window, parts uploaded from
// the scratch file where they lie): measured with a 140 MiB database its heap peaked at 18
// MiB and its resident set at 62 MiB, whatever the database's size. The limit leaves room
// for the page cache the scratch file's writes are charged with (reclaimed under the limit,
// not counted as the agent's own) and for TLS and retries; no CPU limit, as throttling would
// lengthen the read transaction etcd holds open while it streams.
func DefaultAgentResources() corev1.ResourceRequirements {
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
	}
}

// AgentResources are the agent container's resources: the spec's as a whole when it sets
// any (merging would make a request above a limit the user set lower), else the defaults.
func AgentResources(spec *corev1.ResourceRequirements) corev1.ResourceRequirements {
	if spec == nil {
		return DefaultAgentResources()
	}
	return orDefault(*spec, DefaultAgentResources())
}

// orDefault is r when it sets any request or limit, else def.
func orDefault(r, def corev1.ResourceRequirements) corev1.ResourceRequirements {
	if len(r.Requests) == 0 && len(r.Limits) == 0 {
		return def
	}
	return *r.DeepCopy()
}

// etcdDefaultQuota is etcd's own --quota-backend-bytes, in force when the option is 0.
const etcdDefaultQuota = 2 << 30

// QuotaBackendBytes is the backend quota the cluster's members run with: spec.options'
// (0 meaning etcd's own), else the default from the volume's size (DefaultQuotaBackendBytes).
func QuotaBackendBytes(c *etcdv1.EtcdCluster) int64 {
	if o := c.Spec.Options; o != nil && o.QuotaBackendBytes != nil {
		if o.QuotaBackendBytes.IsZero() {
			return etcdDefaultQuota
		}
		return o.QuotaBackendBytes.Value()
	}
	return DefaultQuotaBackendBytes(c.Spec.Storage.Size)
}

// BackendQuota is the backend quota a member of c runs with, from the quota its status
// reports: etcd 3.5 reports none (0), and 3.6.0 to 3.6.5 report the option as given, 0 when
// etcd's own default (2 GiB) applies; from 3.6.6 on etcd reports the quota in force. A 0 is
// therefore the quota the members are given (QuotaBackendBytes: etcd's default when the
// option is 0), never a quota of 0.
func BackendQuota(c *etcdv1.EtcdCluster, reported int64) int64 {
	if reported > 0 {
		return reported
	}
	return QuotaBackendBytes(c)
}

// scratchMargin is what the scratch volume holds beyond the quota: etcd checks the quota
// before it applies a request, so the last request (up to its --max-request-bytes, 1.5 MiB by
// default) and the bookkeeping of a compaction may pass it, and the stream ends with a
// 32-byte hash.
const scratchMargin = 64 << 20

// ScratchSizeLimit bounds the snapshot agent's scratch volume, which holds the whole snapshot
// (the database file as etcd streams it) while it is stored: the database never grows past
// the backend quota, as etcd refuses writes at it, so the quota, a tenth more and
// scratchMargin hold any snapshot of the cluster. The cluster's status does not record the
// database's current size, and a bound from it would evict the agent of a database that grew
// since. A member whose own volume is larger than the cluster's spec.storage.size may have a
// larger default quota: set spec.options.quotaBackendBytes for such a cluster.
func ScratchSizeLimit(c *etcdv1.EtcdCluster) resource.Quantity {
	quota := QuotaBackendBytes(c)
	return *resource.NewQuantity(quota+quota/10+scratchMargin, resource.BinarySI)
}

// serviceAccountTokenDir is where client-go's in-cluster configuration reads the token and
// the API server's CA.
const serviceAccountTokenDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// agentTokenSeconds is the lifetime of the snapshot agent's API token; the kubelet renews it
// before it runs out, and it dies with the Pod.
const agentTokenSeconds = 600

// apiAccess is the projected volume and mount that give the snapshot agent a short-lived token
// of its ServiceAccount and the API server's CA, where client-go looks for them: the Pod's
// automounted token would live an hour, or a year where the API server extends it.
func apiAccess() (corev1.VolumeMount, corev1.Volume) {
	mount := corev1.VolumeMount{Name: "api-access", MountPath: serviceAccountTokenDir, ReadOnly: true}
	vol := corev1.Volume{Name: "api-access", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr(int64(agentTokenSeconds))}},
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
				Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
		},
	}}}
	return mount, vol
}

// StoreServiceAccount is the ServiceAccount the agents of a snapshot location run as for
// workload identity; "" when it names none.
func StoreServiceAccount(loc etcdv1.SnapshotLocation) string {
	if loc.S3 != nil {
		return loc.S3.ServiceAccountName
	}
	return ""
}

// SnapshotAgentServiceAccount is the ServiceAccount of the Job that takes the snapshot: the
// one the destination names, else the one the operator makes for the snapshot
// (SnapshotAgentAccess).
func SnapshotAgentServiceAccount(s *etcdv1.EtcdSnapshot) string {
	if sa := StoreServiceAccount(s.Spec.Destination); sa != "" {
		return sa
	}
	return snapshotAgentAccessName(s)
}

func snapshotAgentAccessName(s *etcdv1.EtcdSnapshot) string {
	return SnapshotJobName(s.Name, ActionSnapshot)
}

// SnapshotAgentAccess is what lets the snapshot agent write its progress, and nothing else:
// a Role allowing patch of this EtcdSnapshot's status only, bound to the agent's
// ServiceAccount, and that ServiceAccount when the operator makes it (nil when the
// destination names one). The caller makes the EtcdSnapshot their owner, and deletes the
// Role and its binding once the snapshot ended, so that a ServiceAccount the destination
// names keeps the grant no longer than the Job runs. They carry the spec.additionalMetadata of
// c, the cluster the snapshot is of.
func SnapshotAgentAccess(s *etcdv1.EtcdSnapshot, c *etcdv1.EtcdCluster) (*corev1.ServiceAccount, *rbacv1.Role, *rbacv1.RoleBinding) {
	meta := WithAdditionalMetadata(c, metav1.ObjectMeta{Name: snapshotAgentAccessName(s), Namespace: s.Namespace, Labels: map[string]string{
		etcdv1.LabelSnapshot: s.Name, etcdv1.LabelSnapshotUID: string(s.UID), etcdv1.LabelManagedBy: ManagerName,
	}})
	var sa *corev1.ServiceAccount
	if StoreServiceAccount(s.Spec.Destination) == "" {
		// No token of its own: the Job mounts a short-lived one (apiAccess).
		sa = &corev1.ServiceAccount{ObjectMeta: *meta.DeepCopy(), AutomountServiceAccountToken: ptr(false)}
	}
	role := &rbacv1.Role{ObjectMeta: *meta.DeepCopy(), Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{etcdv1.GroupVersion.Group}, Resources: []string{"etcdsnapshots/status"},
		ResourceNames: []string{s.Name}, Verbs: []string{"patch"},
	}}}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: *meta.DeepCopy(),
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: SnapshotAgentServiceAccount(s), Namespace: s.Namespace}},
	}
	return sa, role, binding
}
