package snapshot

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller/kit/kittest"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

func snapshotLog(t *testing.T) *kittest.Log {
	return kittest.NewLog(t, "etcdsnapshot", "EtcdSnapshot", types.NamespacedName{Namespace: "ns", Name: "s1"})
}

func TestEachReconcileOfASnapshotLogsItsPhaseAndWhyAtV1(t *testing.T) {
	r, _ := harness(t, pvcSnapshot(), availableCluster(), &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "backups", Namespace: "ns"}})
	logged := snapshotLog(t)
	if line := logged.Reconcile(r); line["msg"] != "step taken" || line["step"] != "addFinalizer" {
		t.Errorf("want the finalizer added first: %v", line)
	}
	line := logged.Reconcile(r)
	if line["step"] != "startJob" || line["job"] != specs.SnapshotJobName("s1", specs.ActionSnapshot) ||
		line["fromPhase"] != "" || line["phase"] != string(etcdv1.SnapshotStarted) || line["EtcdCluster"] == nil {
		t.Errorf("want the snapshot Started by its Job, with the cluster it serves: %v", line)
	}
}

func TestASnapshotThatWaitsForItsClusterLogsWhyAtV1(t *testing.T) {
	c := availableCluster()
	c.Status.Conditions[0].Status, c.Status.Conditions[0].Reason = metav1.ConditionFalse, "QuorumLost"
	r, _ := harness(t, pvcSnapshot(), c, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "backups", Namespace: "ns"}})
	logged := snapshotLog(t)
	logged.Reconcile(r)
	line := logged.Reconcile(r)
	if line["msg"] != "step waits" || line["step"] != "waitForCluster" || line["waitReason"] != etcdv1.ReasonWaitingForCluster ||
		line["phase"] != string(etcdv1.SnapshotPending) || line["deadline"] == nil {
		t.Errorf("want the snapshot Pending for its cluster, and why: %v", line)
	}
}
