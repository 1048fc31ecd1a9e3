package snapshot

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller/kit"
)

// A snapshot of a cluster another operator claims is left alone: no finalizer, no Job, no
// status; that operator takes it.
func TestSnapshotOfAnotherOperatorsClusterIsLeftAlone(t *testing.T) {
	c := availableCluster()
	c.Annotations = map[string]string{etcdv1.AnnotationOperator: "ops-b/x"}
	r, api := harness(t, pvcSnapshot(), c, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "backups", Namespace: "ns"}})
	r.Claims = &kit.Claims{Me: "ops-a/x"}
	reconcileTimes(t, r, 2)
	if s := get(t, api); len(s.Finalizers) != 0 || s.Status.Phase != "" || len(s.Status.Conditions) != 0 {
		t.Fatalf("snapshot of another operator's cluster: finalizers %v, status %+v", s.Finalizers, s.Status)
	}
	r.Claims.Me = "ops-b/x"
	reconcileTimes(t, r, 2)
	if s := get(t, api); s.Status.Phase != etcdv1.SnapshotStarted {
		t.Fatalf("the claimant did not start the snapshot: %+v", s.Status)
	}
}
