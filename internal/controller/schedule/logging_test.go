package schedule

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller/kit/kittest"
)

func TestEachReconcileOfAScheduleLogsWhatItStartsAndWhenItRunsNextAtV1(t *testing.T) {
	created := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	sc := pvcSchedule(created, "*/5 * * * *")
	f := newScheduleFixture(t, sc, created.Add(6*time.Minute), nil)
	logged := kittest.NewLog(t, "etcdsnapshotschedule", "EtcdSnapshotSchedule", types.NamespacedName{Namespace: "ns", Name: "nightly"})
	if line := logged.Reconcile(f.r); line["step"] != "addFinalizer" {
		t.Errorf("want the finalizer added first: %v", line)
	}
	line := logged.Reconcile(f.r)
	if line["msg"] != "step taken" || line["step"] != "startSnapshot" || line["snapshot"] != "nightly-1767261900" ||
		line["due"] != "2026-01-01T10:05:00Z" || line["nextRun"] != "2026-01-01T10:10:00Z" || line["EtcdCluster"] == nil {
		t.Errorf("want the snapshot due at 10:05 started, the next run at 10:10, and the cluster: %v", line)
	}
	f.now = created.Add(11 * time.Minute)
	line = logged.Reconcile(f.r)
	if line["msg"] != "step waits" || line["step"] != "waitForRunningSnapshot" || line["waitReason"] != etcdv1.ReasonWaiting ||
		line["running"] != "nightly-1767261900" || line["due"] != "2026-01-01T10:10:00Z" {
		t.Errorf("want the run due at 10:10 waiting for the running snapshot: %v", line)
	}
}
