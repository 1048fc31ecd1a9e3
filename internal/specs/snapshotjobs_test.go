package specs

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

func TestAgentJobIsLockedDownAndCarriesNoSecretInItsArguments(t *testing.T) {
	s := &etcdv1.EtcdSnapshot{ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "ns", UID: "u1"},
		Spec: etcdv1.EtcdSnapshotSpec{ClusterRef: corev1.LocalObjectReference{Name: "main"}, Destination: etcdv1.SnapshotLocation{S3: &etcdv1.S3SnapshotLocation{
			Endpoint: "https://s3.example", Bucket: "b", Key: "etcd/", CredentialsSecretRef: corev1.LocalObjectReference{Name: "creds"}}}}}
	c := &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "main", Namespace: "ns"}, Spec: etcdv1.EtcdClusterSpec{
		TLS:  &etcdv1.EtcdClusterTLS{Client: &etcdv1.ClientTLS{}},
		Auth: &etcdv1.AuthSpec{Enabled: true, RootCredentialsSecretRef: &corev1.LocalObjectReference{Name: "root"}}}}
	job := SnapshotJob(s, c, "op:1", ActionSnapshot)
	pod := job.Spec.Template.Spec
	ctr := pod.Containers[0]
	if *pod.AutomountServiceAccountToken || !*pod.SecurityContext.RunAsNonRoot || !*ctr.SecurityContext.ReadOnlyRootFilesystem {
		t.Error("the agent Pod must be non-root, read-only, without a token")
	}
	if job.Spec.ActiveDeadlineSeconds == nil || *job.Spec.BackoffLimit != 0 {
		t.Error("the Job must be bounded and run once")
	}
	args := strings.Join(ctr.Args, " ")
	for _, want := range []string{"snapshot-agent", "--name=etcd/ns/main/nightly.db", "--uri=s3://b/etcd/ns/main/nightly.db", "--endpoints=https://main-client.ns.svc:2379", "--ca-file="} {
		if !strings.Contains(args, want) {
			t.Errorf("args %q lack %q", args, want)
		}
	}
	envs := secretEnvs(t, ctr)
	if envs["AWS_ACCESS_KEY_ID"] != "creds" || envs["ETCD_ROOT_PASSWORD"] != "root" || envs["ETCD_ROOT_PASSWORD_APPLIED"] != "main-root-applied" {
		t.Errorf("env from Secrets: %v", envs)
	}
	if n := SnapshotJobName(strings.Repeat("x", 200), ActionSnapshot); len(n) > 63 {
		t.Errorf("job name %q is too long", n)
	}
}

// A snapshot's file is found where its status.artifact says it was stored: a snapshot
// completed under the earlier key layout (no namespace and cluster in the key) is deleted by
// that key; one without an artifact, or with one naming no file of it, by this layout's key.
func TestStoredFileFollowsTheArtifact(t *testing.T) {
	s := &etcdv1.EtcdSnapshot{ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "ns"},
		Spec: etcdv1.EtcdSnapshotSpec{ClusterRef: corev1.LocalObjectReference{Name: "main"},
			Destination: etcdv1.SnapshotLocation{S3: &etcdv1.S3SnapshotLocation{Bucket: "b", Key: "etcd/"}}}}
	for _, tc := range []struct {
		name, artifact, want string
	}{
		{"no artifact", "", "etcd/ns/main/nightly.db"},
		{"stored under this layout", "s3://b/etcd/ns/main/nightly.db", "etcd/ns/main/nightly.db"},
		{"stored under the earlier layout", "s3://b/etcd/nightly.db", "etcd/nightly.db"},
		{"an artifact naming another file", "s3://b/etcd/other.db", "etcd/ns/main/nightly.db"},
	} {
		s.Status.Artifact = nil
		if tc.artifact != "" {
			s.Status.Artifact = &etcdv1.SnapshotArtifact{URI: tc.artifact}
		}
		if got := StoredSnapshotName(s); got != tc.want {
			t.Errorf("%s: StoredSnapshotName = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// The agents' argv, to the byte, as the operator has always given them: a running
// cluster's Jobs and its restored members' Pods must not change with an upgrade (a Pod whose
// init container's args change is rolled). One change, made on purpose: the snapshot Job
// reports its progress (--report-progress) since this release; a snapshot Job is made once,
// by the operator whose own image it runs, so no Job made earlier changes.
func TestTheAgentsArgvStayAsEarlierReleasesWroteThem(t *testing.T) {
	s3 := etcdv1.SnapshotLocation{S3: &etcdv1.S3SnapshotLocation{Endpoint: "https://s3.example", Bucket: "b", Key: "etcd/", Region: "eu-1",
		ForcePathStyle: true, CredentialsSecretRef: corev1.LocalObjectReference{Name: "creds"}}}
	minio := etcdv1.SnapshotLocation{S3: &etcdv1.S3SnapshotLocation{Endpoint: "http://minio:9000", Bucket: "b", Key: "p/nightly.db",
		CredentialsSecretRef: corev1.LocalObjectReference{Name: "creds"}}}
	s := &etcdv1.EtcdSnapshot{ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "ns", UID: "u1"},
		Spec: etcdv1.EtcdSnapshotSpec{ClusterRef: corev1.LocalObjectReference{Name: "main"}, Destination: s3}}
	mtls := &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "main", Namespace: "ns"}, Spec: etcdv1.EtcdClusterSpec{
		TLS: &etcdv1.EtcdClusterTLS{Client: &etcdv1.ClientTLS{OperatorClientSecretRef: &corev1.LocalObjectReference{Name: "opcli"}}}}}
	deleted := s.DeepCopy()
	deleted.Spec.Destination = etcdv1.SnapshotLocation{PVC: &etcdv1.PVCSnapshotLocation{ClaimName: "backups", SubPath: "snaps"}}
	deleted.Status.Artifact = &etcdv1.SnapshotArtifact{URI: "pvc://backups/snaps/ns/main/nightly.db", Checksum: "sha256:abc"}
	seed := &etcdv1.EtcdMember{ObjectMeta: metav1.ObjectMeta{Name: "r-1", Namespace: "ns"}, Spec: etcdv1.EtcdMemberSpec{
		Version: "3.6.16", Bootstrap: etcdv1.MemberBootstrap{InitialClusterState: etcdv1.InitialClusterStateNew, InitialCluster: "r-1=http://x:2380", ClusterToken: "t",
			Restore: &etcdv1.MemberRestore{Checksum: "sha256:abc", Source: minio}}}}
	restored := &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "ns"}, Spec: etcdv1.EtcdClusterSpec{Version: "3.6.16"}}
	seedPod := Pod(restored, seed, PodOptions{AgentImage: "op:1"}).Spec
	for _, tc := range []struct {
		name       string
		got, wants []string
	}{
		{"snapshot with mutual TLS to S3", SnapshotJob(s, mtls, "op:1", ActionSnapshot).Spec.Template.Spec.Containers[0].Args,
			[]string{"snapshot-agent", "--name=etcd/ns/main/nightly.db", "--uri=s3://b/etcd/ns/main/nightly.db", "--timeout=1790s", "--owner=ns/nightly/u1", "--endpoints=https://main-client.ns.svc:2379", "--ca-file=/etc/etcd/server-ca/ca.crt", "--cert-file=/etc/etcd/client-tls/tls.crt", "--key-file=/etc/etcd/client-tls/tls.key", "--scratch-dir=/scratch", "--report-progress", "--s3-endpoint=https://s3.example", "--s3-bucket=b", "--s3-region=eu-1", "--s3-path-style"}},
		{"delete from a PVC", SnapshotJob(deleted, nil, "op:1", ActionDelete).Spec.Template.Spec.Containers[0].Args,
			[]string{"snapshot-agent", "--name=snaps/nightly.db", "--uri=pvc://backups/snaps/nightly.db", "--timeout=1790s", "--owner=ns/nightly/u1", "--delete", "--checksum=sha256:abc", "--dir=/snapshots"}},
		{"verify", VerifyJob(mtls, s, etcdv1.MemberRestore{Checksum: "sha256:abc", Source: minio}, "op:1").Spec.Template.Spec.Containers[0].Args,
			[]string{"verify-agent", "--name=p/nightly.db", "--uri=s3://b/p/nightly.db", "--checksum=sha256:abc", "--timeout=1790s", "--s3-endpoint=http://minio:9000", "--s3-bucket=b"}},
		{"copy the agent", seedPod.InitContainers[0].Args, []string{"copy-self", "/agent/etcd-operator"}},
		{"restore", seedPod.InitContainers[1].Args,
			[]string{"restore-agent", "--uri=s3://b/p/nightly.db", "--data-dir=/var/lib/etcd/data", "--staging-dir=/var/lib/etcd/restore", "--etcdutl=/usr/local/bin/etcdutl", "--member-name=r-1", "--initial-cluster=r-1=http://x:2380", "--initial-cluster-token=t", "--initial-advertise-peer-urls=http://r-1.r.ns.svc:2380", "--checksum=sha256:abc", "--s3-endpoint=http://minio:9000", "--s3-bucket=b", "--name=p/nightly.db"}},
	} {
		if !slices.Equal(tc.got, tc.wants) {
			t.Errorf("%s:\n %q\nwant\n %q", tc.name, tc.got, tc.wants)
		}
	}
}
