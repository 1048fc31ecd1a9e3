package snapshot

import (
	"context"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// The snapshot agent's Job, its Pod template and its access (ServiceAccount, Role,
// RoleBinding) carry the spec.additionalMetadata of the cluster the snapshot is of.
func TestTheAgentCarriesTheClustersAdditionalMetadata(t *testing.T) {
	c := availableCluster()
	c.Spec.AdditionalMetadata = &etcdv1.AdditionalMetadata{Labels: map[string]string{"team": "storage"}, Annotations: map[string]string{"owner": "team-a"}}
	r, api := harness(t, pvcSnapshot(), c, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "backups", Namespace: "ns"}})
	reconcileTimes(t, r, 2)
	name := specs.SnapshotJobName("s1", specs.ActionSnapshot)
	job := &batchv1.Job{}
	objs := map[string]client.Object{"Job": job, "ServiceAccount": &corev1.ServiceAccount{}, "Role": &rbacv1.Role{}, "RoleBinding": &rbacv1.RoleBinding{}}
	for kind, obj := range objs {
		if err := api.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: name}, obj); err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		if obj.GetLabels()["team"] != "storage" || obj.GetAnnotations()["owner"] != "team-a" {
			t.Errorf("%s: labels %v, annotations %v", kind, obj.GetLabels(), obj.GetAnnotations())
		}
	}
	if tm := job.Spec.Template.ObjectMeta; tm.Labels["team"] != "storage" || tm.Annotations["owner"] != "team-a" {
		t.Errorf("the Job's Pod template: %+v", tm)
	}
}
