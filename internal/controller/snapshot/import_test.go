package snapshot

import (
	"context"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

// An imported EtcdSnapshot records a file another operator wrote: the operator never runs a
// snapshot Job for it, neither while kubectl etcd migrate has not yet written its status nor
// afterwards, and deleting it (deletionPolicy Retain) leaves the file alone.
func TestAnImportedSnapshotNeverRunsAJob(t *testing.T) {
	s := pvcSnapshot()
	s.Annotations = map[string]string{etcdv1.AnnotationImportedFrom: "EtcdBackup.etcd.aenix.io/nightly"}
	s.Spec.Destination.PVC.SubPath = "d/nightly-rev7.db"
	r, api := harness(t, s, availableCluster(), &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "backups", Namespace: "ns"}})
	reconcileTimes(t, r, 3)
	jobs := &batchv1.JobList{}
	if err := api.List(context.Background(), jobs); err != nil {
		t.Fatal(err)
	}
	if len(jobs.Items) != 0 {
		t.Fatalf("a Job runs for an imported snapshot: %v", jobs.Items[0].Name)
	}
	got := get(t, api)
	if got.Status.Phase != "" {
		t.Fatalf("the operator moved an import pending its status to %q", got.Status.Phase)
	}
	got.Status = etcdv1.EtcdSnapshotStatus{Phase: etcdv1.SnapshotComplete,
		Artifact: &etcdv1.SnapshotArtifact{URI: "pvc://backups/d/nightly-rev7.db", SizeBytes: 42, Checksum: goodSum}}
	if err := api.Status().Update(context.Background(), got); err != nil {
		t.Fatal(err)
	}
	reconcileTimes(t, r, 2)
	if err := api.List(context.Background(), jobs); err != nil || len(jobs.Items) != 0 {
		t.Fatalf("jobs %v, %v", jobs.Items, err)
	}
	if got := get(t, api); got.Status.Phase != etcdv1.SnapshotComplete || got.Status.Artifact.Checksum != goodSum {
		t.Errorf("status %+v", got.Status)
	}
}
