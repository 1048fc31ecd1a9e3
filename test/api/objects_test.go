package api

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

// Builders of valid objects; each test case changes one thing to make it invalid.

func ptr[T any](v T) *T { return &v }

func meta(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name, Namespace: ns} }

func ref(name string) *corev1.LocalObjectReference { return &corev1.LocalObjectReference{Name: name} }

func qty(s string) resource.Quantity { return resource.MustParse(s) }

func qtyPtr(s string) *resource.Quantity { q := resource.MustParse(s); return &q }

func issuer(name string) etcdv1.IssuerReference { return etcdv1.IssuerReference{Name: name} }

type clusterEdit func(*etcdv1.EtcdCluster)

func newCluster(name string, edits ...clusterEdit) *etcdv1.EtcdCluster {
	c := &etcdv1.EtcdCluster{ObjectMeta: meta(name), Spec: etcdv1.EtcdClusterSpec{Version: "3.6.16"}}
	for _, edit := range edits {
		edit(c)
	}
	return c
}

func withVersion(v string) clusterEdit {
	return func(c *etcdv1.EtcdCluster) { c.Spec.Version = v }
}

func withReplicas(n int32) clusterEdit {
	return func(c *etcdv1.EtcdCluster) { c.Spec.Replicas = ptr(n) }
}

func withStorage(size string, medium etcdv1.StorageMedium) clusterEdit {
	return func(c *etcdv1.EtcdCluster) {
		c.Spec.Storage.Size = qtyPtr(size)
		c.Spec.Storage.Medium = medium
	}
}

func withStorageClass(name string) clusterEdit {
	return func(c *etcdv1.EtcdCluster) { c.Spec.Storage.StorageClassName = ptr(name) }
}

func withClientTLS(t etcdv1.ClientTLS) clusterEdit {
	return func(c *etcdv1.EtcdCluster) {
		if c.Spec.TLS == nil {
			c.Spec.TLS = &etcdv1.EtcdClusterTLS{}
		}
		c.Spec.TLS.Client = &t
	}
}

func withPeerTLS(t etcdv1.PeerTLS) clusterEdit {
	return func(c *etcdv1.EtcdCluster) {
		if c.Spec.TLS == nil {
			c.Spec.TLS = &etcdv1.EtcdClusterTLS{}
		}
		c.Spec.TLS.Peer = &t
	}
}

// withIssuedClientTLS is client TLS from cert-manager, the common valid shape.
func withIssuedClientTLS(issuerName string) clusterEdit {
	return withClientTLS(etcdv1.ClientTLS{CertManager: &etcdv1.ClientCertManager{ServerIssuerRef: issuer(issuerName)}})
}

// withLifetime sets spec.tls.validityDuration and renewBefore ("" leaves one out).
func withLifetime(validity, renewBefore string) clusterEdit {
	return func(c *etcdv1.EtcdCluster) {
		if c.Spec.TLS == nil {
			c.Spec.TLS = &etcdv1.EtcdClusterTLS{}
		}
		c.Spec.TLS.ValidityDuration, c.Spec.TLS.RenewBefore = validity, renewBefore
	}
}

func withAuth(a etcdv1.AuthSpec) clusterEdit {
	return func(c *etcdv1.EtcdCluster) { c.Spec.Auth = &a }
}

func withRestore(source etcdv1.RestoreSource) clusterEdit {
	return func(c *etcdv1.EtcdCluster) {
		c.Spec.Bootstrap = &etcdv1.BootstrapSpec{Restore: &etcdv1.RestoreSpec{Source: source}}
	}
}

func withTarget(source etcdv1.RestoreSource, target etcdv1.RestoreTarget) clusterEdit {
	return func(c *etcdv1.EtcdCluster) {
		c.Spec.Bootstrap = &etcdv1.BootstrapSpec{Restore: &etcdv1.RestoreSpec{Source: source, Target: &target}}
	}
}

func withArchive(interval, maxBytes string) scheduleEdit {
	return func(s *etcdv1.EtcdSnapshotSchedule) {
		d, err := time.ParseDuration(interval)
		if err != nil {
			panic(err)
		}
		q := resource.MustParse(maxBytes)
		s.Spec.Archive = &etcdv1.SnapshotArchive{SegmentInterval: &metav1.Duration{Duration: d}, SegmentMaxBytes: &q}
	}
}

func withOptions(o etcdv1.EtcdOptions) clusterEdit {
	return func(c *etcdv1.EtcdCluster) { c.Spec.Options = &o }
}

func s3(key string) *etcdv1.S3SnapshotLocation {
	return &etcdv1.S3SnapshotLocation{
		Endpoint:             "http://minio.storage.svc:9000",
		Bucket:               "etcd-backups",
		Key:                  key,
		CredentialsSecretRef: corev1.LocalObjectReference{Name: "s3-credentials"},
		ForcePathStyle:       true,
	}
}

func pvc(subPath string) *etcdv1.PVCSnapshotLocation {
	return &etcdv1.PVCSnapshotLocation{ClaimName: "backups", SubPath: subPath}
}

type snapshotEdit func(*etcdv1.EtcdSnapshot)

func newSnapshot(name string, edits ...snapshotEdit) *etcdv1.EtcdSnapshot {
	s := &etcdv1.EtcdSnapshot{ObjectMeta: meta(name), Spec: etcdv1.EtcdSnapshotSpec{
		ClusterRef:  corev1.LocalObjectReference{Name: "example"},
		Destination: etcdv1.SnapshotLocation{S3: s3("example/")},
	}}
	for _, edit := range edits {
		edit(s)
	}
	return s
}

type scheduleEdit func(*etcdv1.EtcdSnapshotSchedule)

func newSchedule(name string, edits ...scheduleEdit) *etcdv1.EtcdSnapshotSchedule {
	s := &etcdv1.EtcdSnapshotSchedule{ObjectMeta: meta(name), Spec: etcdv1.EtcdSnapshotScheduleSpec{
		ClusterRef:  corev1.LocalObjectReference{Name: "example"},
		Schedule:    "0 3 * * *",
		Destination: etcdv1.SnapshotLocation{S3: s3("nightly/")},
	}}
	for _, edit := range edits {
		edit(s)
	}
	return s
}

type defragEdit func(*etcdv1.EtcdDefrag)

func newDefrag(name string, edits ...defragEdit) *etcdv1.EtcdDefrag {
	d := &etcdv1.EtcdDefrag{ObjectMeta: meta(name), Spec: etcdv1.EtcdDefragSpec{
		ClusterRef: corev1.LocalObjectReference{Name: "example"},
	}}
	for _, edit := range edits {
		edit(d)
	}
	return d
}

func withRule(r etcdv1.DefragRule) defragEdit {
	return func(d *etcdv1.EtcdDefrag) { d.Spec.Rule = &r }
}

type defragPolicyEdit func(*etcdv1.EtcdDefragPolicy)

func newDefragPolicy(name string, edits ...defragPolicyEdit) *etcdv1.EtcdDefragPolicy {
	p := &etcdv1.EtcdDefragPolicy{ObjectMeta: meta(name), Spec: etcdv1.EtcdDefragPolicySpec{
		ClusterRef: corev1.LocalObjectReference{Name: "example"},
		Schedule:   "0 3 * * *",
	}}
	for _, edit := range edits {
		edit(p)
	}
	return p
}

type memberEdit func(*etcdv1.EtcdMember)

func newMember(name string, edits ...memberEdit) *etcdv1.EtcdMember {
	m := &etcdv1.EtcdMember{ObjectMeta: meta(name), Spec: etcdv1.EtcdMemberSpec{
		ClusterName: "example",
		Version:     "3.6.16",
		Storage:     etcdv1.StorageSpec{Size: qtyPtr("1Gi")},
		Bootstrap: etcdv1.MemberBootstrap{
			InitialCluster:      name + "=http://" + name + ".example.default.svc:2380",
			InitialClusterState: etcdv1.InitialClusterStateNew,
			ClusterToken:        "example-token",
		},
	}}
	for _, edit := range edits {
		edit(m)
	}
	return m
}
