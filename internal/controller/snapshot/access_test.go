package snapshot

import (
	"context"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// s3Snapshot is an EtcdSnapshot to S3 without a credentials Secret (the default chain),
// running as serviceAccount when set.
func s3Snapshot(serviceAccount string) *etcdv1.EtcdSnapshot {
	s := pvcSnapshot()
	s.UID = "uid-1"
	s.Spec.Destination = etcdv1.SnapshotLocation{S3: &etcdv1.S3SnapshotLocation{Endpoint: "https://s3.example", Bucket: "b", ServiceAccountName: serviceAccount}}
	return s
}

// exists says whether obj (by its name and namespace) is on the API server.
func exists(t *testing.T, api client.Client, obj client.Object) bool {
	t.Helper()
	err := api.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}

// The snapshot Job runs as a ServiceAccount that may patch the snapshot's status, made with
// the Job and owned by the snapshot; once it completed, the grant is gone and the progress
// says the whole file.
func TestTheAgentsAccessLastsAsLongAsItsJob(t *testing.T) {
	for _, named := range []string{"", "etcd-backup"} {
		t.Run("named "+named, func(t *testing.T) {
			objs := []client.Object{s3Snapshot(named), availableCluster()}
			if named != "" {
				objs = append(objs, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: named, Namespace: "ns"}})
			}
			r, api := harness(t, objs...)
			reconcileTimes(t, r, 2)
			checkGranted(t, api, get(t, api))
			finishJob(t, api, false, "", `{"uri":"s3://b/ns/main/s1.db","sizeBytes":42,"checksum":"`+goodSum+`","revision":7}`)
			reconcileTimes(t, r, 1)
			s := get(t, api)
			if s.Status.Phase != etcdv1.SnapshotComplete || s.Status.Progress == nil || s.Status.Progress.Percent != 100 || s.Status.Progress.BytesWritten != 42 {
				t.Errorf("completed with %s, progress %+v", s.Status.Phase, s.Status.Progress)
			}
			_, role, binding := specs.SnapshotAgentAccess(s, nil)
			if exists(t, api, &rbacv1.RoleBinding{ObjectMeta: binding.ObjectMeta}) || exists(t, api, &rbacv1.Role{ObjectMeta: role.ObjectMeta}) {
				t.Errorf("the grant outlived the snapshot's Job")
			}
			if named != "" && !exists(t, api, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: named, Namespace: "ns"}}) {
				t.Errorf("the named ServiceAccount was deleted")
			}
		})
	}
}

// checkGranted: the agent's access exists, owned by the snapshot, and the Job runs as the
// ServiceAccount it grants.
func checkGranted(t *testing.T, api client.Client, s *etcdv1.EtcdSnapshot) {
	t.Helper()
	sa, role, binding := specs.SnapshotAgentAccess(s, nil)
	if !exists(t, api, role) || !exists(t, api, binding) || (sa != nil && !exists(t, api, sa)) {
		t.Fatalf("the agent's access was not made")
	}
	if !metav1.IsControlledBy(role, s) || !metav1.IsControlledBy(binding, s) {
		t.Errorf("the access is not owned by the snapshot")
	}
	job := &batchv1.Job{}
	if err := api.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: specs.SnapshotJobName("s1", specs.ActionSnapshot)}, job); err != nil {
		t.Fatal(err)
	}
	if got := job.Spec.Template.Spec.ServiceAccountName; got != binding.Subjects[0].Name {
		t.Errorf("the Job runs as %q, the grant is %q's", got, binding.Subjects[0].Name)
	}
}

// A ServiceAccount named and missing fails the snapshot before any Job, naming it; no
// credentials Secret named is no missing Secret.
func TestAMissingServiceAccountFailsBeforeAnyJob(t *testing.T) {
	r, api := harness(t, s3Snapshot("etcd-backup"), availableCluster())
	reconcileTimes(t, r, 2)
	s := get(t, api)
	if s.Status.Phase != etcdv1.SnapshotFailed || readyReason(s) != etcdv1.ReasonServiceAccountNotFound {
		t.Errorf("phase %s reason %s, want Failed with %s", s.Status.Phase, readyReason(s), etcdv1.ReasonServiceAccountNotFound)
	}
	jobs := &batchv1.JobList{}
	if err := api.List(context.Background(), jobs); err != nil || len(jobs.Items) != 0 {
		t.Errorf("a Job was created for a snapshot that cannot run: %d", len(jobs.Items))
	}
}
