package snapshot

import (
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
	job := AgentJob(s, c, "op:1", ActionSnapshot)
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
	envs := map[string]string{}
	for _, e := range ctr.Env {
		if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
			t.Errorf("env %s is not from a Secret", e.Name)
			continue
		}
		envs[e.Name] = e.ValueFrom.SecretKeyRef.Name
	}
	if envs["AWS_ACCESS_KEY_ID"] != "creds" || envs["ETCD_ROOT_PASSWORD"] != "root" || envs["ETCD_ROOT_PASSWORD_APPLIED"] != "main-root-applied" {
		t.Errorf("env from Secrets: %v", envs)
	}
	if n := JobName(strings.Repeat("x", 200), ActionSnapshot); len(n) > 63 {
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
		if got := StoredName(s); got != tc.want {
			t.Errorf("%s: StoredName = %q, want %q", tc.name, got, tc.want)
		}
	}
}
