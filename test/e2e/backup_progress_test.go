package e2e

import (
	"context"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// A snapshot's agent writes its progress into the EtcdSnapshot's status through the real API
// server, with the Role the operator grants it (patch of that snapshot's status only): once
// as the ServiceAccount the operator makes, once as one the destination names (the one a
// cloud identity would hang on). While it runs the status shows the expected size and a
// percent below 100; once Complete, the whole file at 100 %, and the grant is gone (the
// named ServiceAccount stays). The Job carries the default resources and a scratch volume
// bounded by the cluster's quota.
func TestSnapshotProgressIsWrittenByItsAgent(t *testing.T) {
	t.Parallel()
	ns, bucket := s3Namespace(t)
	create(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "etcd-backup", Namespace: ns}})
	createCluster(t, ns, "source", 3)
	waitSettled(t, ns, "source", 3, 5*time.Minute)
	loadKeys(t, dialClusterWith(t, ns, "source", access{}), "/load", 20000)

	named := s3Location(t, bucket, "named/")
	named.S3.ServiceAccountName = "etcd-backup"
	for name, dest := range map[string]etcdv1.SnapshotLocation{"own": s3Location(t, bucket, "own/"), "named": named} {
		createSnapshot(t, ns, name, "source", dest)
		running := waitProgressWhileStarted(t, ns, name)
		s := waitSnapshotDone(t, ns, name, etcdv1.SnapshotComplete)
		p, size := s.Status.Progress, s.Status.Artifact.SizeBytes
		if p == nil || p.Percent != 100 || p.BytesWritten != size || p.BytesVerified != size {
			t.Errorf("%s: Complete with progress %+v, want the whole %d bytes at 100%%", name, p, size)
		}
		if diff := running.BytesExpected - size; diff*10 > size || -diff*10 > size {
			t.Errorf("%s: expected %d bytes while running, the file has %d", name, running.BytesExpected, size)
		}
		checkSnapshotJob(t, ns, s)
		checkGrantRevoked(t, ns, s)
	}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "etcd-backup"}, &corev1.ServiceAccount{}); err != nil {
		t.Errorf("the named ServiceAccount: %v", err)
	}
}

// waitProgressWhileStarted polls the snapshot quickly until its agent reported while it is
// Started: the expected size and a percent below 100 (the operator alone writes 100).
func waitProgressWhileStarted(t *testing.T, ns, name string) etcdv1.SnapshotProgress {
	t.Helper()
	deadline := time.Now().Add(4 * time.Minute)
	for time.Now().Before(deadline) {
		s := getSnapshot(t, ns, name)
		switch p := s.Status.Progress; {
		case s.Status.Phase == etcdv1.SnapshotStarted && p != nil && p.BytesExpected > 0 && p.Percent < 100 && p.UpdateTime != nil:
			return *p
		case s.Status.Phase == etcdv1.SnapshotComplete || s.Status.Phase == etcdv1.SnapshotFailed:
			t.Fatalf("EtcdSnapshot %s ended %s without a progress report seen while it ran (progress %+v); its agents' logs:\n%s",
				name, s.Status.Phase, p, agentLogs(t, ns, s))
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("EtcdSnapshot %s: no progress while Started within 4m", name)
	return etcdv1.SnapshotProgress{}
}

// checkSnapshotJob: the default resources and a scratch volume bounded by the quota.
func checkSnapshotJob(t *testing.T, ns string, s *etcdv1.EtcdSnapshot) {
	t.Helper()
	job := &batchv1.Job{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: specs.SnapshotJobName(s.Name, specs.ActionSnapshot)}, job); err != nil {
		t.Fatal(err)
	}
	pod := job.Spec.Template.Spec
	if r := pod.Containers[0].Resources; r.Requests.Memory().String() != "64Mi" || r.Limits.Memory().String() != "256Mi" {
		t.Errorf("%s: agent resources %v, want the defaults", s.Name, r)
	}
	for _, v := range pod.Volumes {
		if v.Name == "scratch" && (v.EmptyDir == nil || v.EmptyDir.SizeLimit == nil || v.EmptyDir.SizeLimit.Value() < 512<<20) {
			t.Errorf("%s: scratch volume %+v, want a size limit above the default 512Mi quota", s.Name, v.VolumeSource)
		}
	}
	if pod.ServiceAccountName != specs.SnapshotAgentServiceAccount(s) {
		t.Errorf("%s: the Job runs as %q, want %q", s.Name, pod.ServiceAccountName, specs.SnapshotAgentServiceAccount(s))
	}
}

// checkGrantRevoked: the Role and RoleBinding that let the agent write are gone.
func checkGrantRevoked(t *testing.T, ns string, s *etcdv1.EtcdSnapshot) {
	t.Helper()
	_, role, binding := specs.SnapshotAgentAccess(s, nil)
	for _, obj := range []client.Object{&rbacv1.Role{}, &rbacv1.RoleBinding{}} {
		err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: role.Name}, obj)
		if !apierrors.IsNotFound(err) {
			t.Errorf("%s: %T %s (binding %s) outlived the snapshot's Job: %v", s.Name, obj, role.Name, binding.Name, err)
		}
	}
}

// A destination that names a ServiceAccount that does not exist fails at once, naming it.
func TestSnapshotWithAMissingServiceAccountSaysSo(t *testing.T) {
	t.Parallel()
	ns, bucket := s3Namespace(t)
	createCluster(t, ns, "source", 1)
	waitSettled(t, ns, "source", 1, 4*time.Minute)
	dest := s3Location(t, bucket, "")
	dest.S3.ServiceAccountName = "no-such-account"
	createSnapshot(t, ns, "snap", "source", dest)
	s := waitSnapshotDone(t, ns, "snap", etcdv1.SnapshotFailed)
	if reason := readyReasonOf(s); reason != etcdv1.ReasonServiceAccountNotFound {
		t.Errorf("reason %s, want %s", reason, etcdv1.ReasonServiceAccountNotFound)
	}
	eventually(t, time.Minute, "a Warning event "+etcdv1.ReasonServiceAccountNotFound, func() error {
		return warningAbout(ns, "snap", etcdv1.ReasonServiceAccountNotFound)
	})
}

func readyReasonOf(s *etcdv1.EtcdSnapshot) string {
	if c := meta.FindStatusCondition(s.Status.Conditions, etcdv1.SnapshotConditionReady); c != nil {
		return c.Reason
	}
	return ""
}
