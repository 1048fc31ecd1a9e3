// Package specs builds the Kubernetes objects of an etcd cluster from the EtcdCluster and
// EtcdMember that describe it. Every function is pure: no client, no clock, no randomness.
package specs

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/etcdversion"
)

// ManagerName is the value of etcdv1.LabelManagedBy on what the operator makes; the ports and
// the data directory are a member's.
const (
	ManagerName = "etcd-operator"

	ClientPort  = 2379
	PeerPort    = 2380
	MetricsPort = 2381

	// DataDir is where a member keeps its data, on its PVC or tmpfs.
	DataDir = "/var/lib/etcd"
)

// DefaultImageRepository is where etcd images come from unless the operator is told otherwise.
const DefaultImageRepository = "quay.io/coreos/etcd"

// Image is the etcd image of a version, written with or without its leading "v" (3.5.21 and
// v3.5.21 both name quay.io/coreos/etcd:v3.5.21).
func Image(repository, version string) string {
	return fmt.Sprintf("%s:v%s", repository, etcdversion.Canonical(version))
}

// MemberName is the name of a cluster's member with the given ordinal; it names the
// EtcdMember, its Pod (and so its DNS name), its PVC and the member in etcd.
func MemberName(cluster string, ordinal int) string {
	return fmt.Sprintf("%s-%d", cluster, ordinal)
}

// PVCName is the PersistentVolumeClaim of a member: named after the member, unless the member
// was adopted from an operator that named it otherwise.
func PVCName(m *etcdv1.EtcdMember) string {
	if m.Spec.Adopted != nil && m.Spec.Adopted.PVCName != "" {
		return m.Spec.Adopted.PVCName
	}
	return m.Name
}

// MemberDataDir is etcd's --data-dir of a member: DataDir/data, or where the operator that
// created an adopted member put it.
func MemberDataDir(m *etcdv1.EtcdMember) string {
	if m.Spec.Adopted != nil && m.Spec.Adopted.DataDir != "" {
		return m.Spec.Adopted.DataDir
	}
	return DataDir + "/data"
}

// HeadlessServiceName is the Service named after the cluster: the headless one that gives
// members stable DNS names (but see MembersServiceName).
func HeadlessServiceName(cluster string) string { return cluster }

// ClientServiceName is the Service clients connect to.
func ClientServiceName(cluster string) string { return cluster + "-client" }

// PDBName is the cluster's PodDisruptionBudget.
func PDBName(cluster string) string { return cluster }

func scheme(secure bool) string {
	if secure {
		return "https"
	}
	return "http"
}

// MemberSubdomain is the headless Service a member's DNS name lives under: the one
// AnnotationAdoptedSubdomain names it under, else the members' (MembersServiceName).
func MemberSubdomain(c *etcdv1.EtcdCluster, member string) string {
	if service, members, _ := adoptedSubdomain(c); service != "" && slices.Contains(members, member) {
		return service
	}
	return MembersServiceName(c)
}

// MembersServiceName is the headless Service that gives members their DNS names: the one
// named after the cluster, or, for a cluster adopted with every member under the legacy
// headless Service (AdoptedSubdomainEveryMember), that one; the name of the cluster is then
// a client Service (AdoptedClientService).
func MembersServiceName(c *etcdv1.EtcdCluster) string {
	if service, _, every := adoptedSubdomain(c); every {
		return service
	}
	return HeadlessServiceName(c.Name)
}

// AdoptedSubdomain reads AnnotationAdoptedSubdomain: the Service and the adopted members
// under it; "" and nil when the cluster has none.
func AdoptedSubdomain(c *etcdv1.EtcdCluster) (string, []string) {
	service, members, _ := adoptedSubdomain(c)
	return service, members
}

// adoptedSubdomain is AdoptedSubdomain and whether the list ends with
// AdoptedSubdomainEveryMember (left out of the members).
func adoptedSubdomain(c *etcdv1.EtcdCluster) (service string, members []string, every bool) {
	service, list, ok := strings.Cut(c.Annotations[etcdv1.AnnotationAdoptedSubdomain], "=")
	if !ok {
		return "", nil, false
	}
	members = strings.Split(list, ",")
	if n := len(members); members[n-1] == etcdv1.AdoptedSubdomainEveryMember {
		return service, members[:n-1], true
	}
	return service, members, false
}

// AdoptedSubdomainValue is the AnnotationAdoptedSubdomain value for members under service.
func AdoptedSubdomainValue(service string, members []string) string {
	return service + "=" + strings.Join(members, ",")
}

// MemberHost is a member's stable DNS name.
func MemberHost(c *etcdv1.EtcdCluster, member string) string {
	return fmt.Sprintf("%s.%s.%s.svc", member, MemberSubdomain(c, member), c.Namespace)
}

// PeerURL is the URL other members reach a member at.
func PeerURL(c *etcdv1.EtcdCluster, member string) string {
	return fmt.Sprintf("%s://%s:%d", scheme(PeerTLS(c)), MemberHost(c, member), PeerPort)
}

// ClientURL is the URL clients reach a member at.
func ClientURL(c *etcdv1.EtcdCluster, member string) string {
	return fmt.Sprintf("%s://%s:%d", scheme(ClientTLS(c)), MemberHost(c, member), ClientPort)
}

// ClientServiceHost is the client Service's DNS name, which the server certificate must name
// (the operator and kubectl etcd check it).
func ClientServiceHost(c *etcdv1.EtcdCluster) string {
	return fmt.Sprintf("%s.%s.svc", ClientServiceName(c.Name), c.Namespace)
}

// ClientTLS is true when the client port serves TLS.
func ClientTLS(c *etcdv1.EtcdCluster) bool { return c.Spec.TLS != nil && c.Spec.TLS.Client != nil }

// PeerTLS is true when the peer port serves TLS.
func PeerTLS(c *etcdv1.EtcdCluster) bool { return c.Spec.TLS != nil && c.Spec.TLS.Peer != nil }

// PeerAutoTLS is true when the peer port uses etcd's self-signed certificates (no Secret).
func PeerAutoTLS(c *etcdv1.EtcdCluster) bool { return PeerTLS(c) && c.Spec.TLS.Peer.AutoTLS }

// PeerSecretTLS is true when the peer port's certificate comes from a Secret (PeerSecretName)
// that the Pods mount: peer TLS, not etcd's own certificates.
func PeerSecretTLS(c *etcdv1.EtcdCluster) bool { return PeerTLS(c) && !c.Spec.TLS.Peer.AutoTLS }

// InitialCluster is etcd's --initial-cluster for the given members.
func InitialCluster(c *etcdv1.EtcdCluster, members []string) string {
	parts := make([]string, 0, len(members))
	for _, m := range members {
		parts = append(parts, m+"="+PeerURL(c, m))
	}
	return strings.Join(parts, ",")
}

// ClusterLabels select every object of a cluster.
func ClusterLabels(cluster string) map[string]string {
	return map[string]string{
		etcdv1.LabelName:      "etcd",
		etcdv1.LabelInstance:  cluster,
		etcdv1.LabelManagedBy: ManagerName,
		etcdv1.LabelCluster:   cluster,
	}
}

// MemberLabels select one member's objects.
func MemberLabels(cluster, member string) map[string]string {
	labels := ClusterLabels(cluster)
	labels[etcdv1.LabelMember] = member
	return labels
}

// Selector is the label selector of a cluster's Pods, as the /scale subresource reports it.
func Selector(cluster string) string {
	return fmt.Sprintf("%s=%s,%s=%s", etcdv1.LabelCluster, cluster, etcdv1.LabelName, "etcd")
}

// withMetadata merges spec.additionalMetadata under the operator's own keys.
func withMetadata(own map[string]string, extra map[string]string) map[string]string {
	out := make(map[string]string, len(own)+len(extra))
	for k, v := range extra {
		if !strings.HasPrefix(k, etcdv1.KeyPrefix) {
			out[k] = v
		}
	}
	for k, v := range own {
		out[k] = v
	}
	return out
}

func extraLabels(c *etcdv1.EtcdCluster) map[string]string {
	if c == nil || c.Spec.AdditionalMetadata == nil {
		return nil
	}
	return c.Spec.AdditionalMetadata.Labels
}

func extraAnnotations(c *etcdv1.EtcdCluster) map[string]string {
	if c == nil || c.Spec.AdditionalMetadata == nil {
		return nil
	}
	return c.Spec.AdditionalMetadata.Annotations
}

// WithAdditionalMetadata is meta with the cluster's spec.additionalMetadata merged into its
// labels and annotations, the keys meta has (the operator's) winning, and none under
// etcdv1.KeyPrefix taken from the user. c nil (a cluster gone): meta as it is. Every object
// the operator makes for a cluster goes through it or objectMeta; meta is not changed.
func WithAdditionalMetadata(c *etcdv1.EtcdCluster, meta metav1.ObjectMeta) metav1.ObjectMeta {
	out := *meta.DeepCopy()
	out.Labels = orNil(withMetadata(meta.Labels, extraLabels(c)))
	out.Annotations = orNil(withMetadata(meta.Annotations, extraAnnotations(c)))
	return out
}

func orNil(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return m
}

// AdoptionOf is the spec.adopted a PVC records, nil for the PVC of a member this operator
// created.
func AdoptionOf(pvc *corev1.PersistentVolumeClaim) *etcdv1.MemberAdoption {
	from := pvc.Annotations[etcdv1.AnnotationAdoptedFrom]
	if from == "" {
		return nil
	}
	return &etcdv1.MemberAdoption{From: etcdv1.AdoptedFrom(from), PVCName: pvc.Name, DataDir: pvc.Annotations[etcdv1.AnnotationDataDir]}
}
