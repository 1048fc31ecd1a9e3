package schedule

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller/kit"
)

// The schedule of a cluster another operator claims is left alone: no finalizer, no
// snapshot, no status.
func TestScheduleOfAnotherOperatorsClusterIsLeftAlone(t *testing.T) {
	created := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	sc := pvcSchedule(created, "* * * * *")
	f := newScheduleFixture(t, sc, created.Add(10*time.Minute), nil)
	cluster := &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "main", Namespace: "ns", Annotations: map[string]string{etcdv1.AnnotationOperator: "ops-b/x"}}}
	if err := f.api.Create(context.Background(), cluster); err != nil {
		t.Fatal(err)
	}
	f.r.Claims = &kit.Claims{Me: "ops-a/x"}
	f.reconcile()
	f.reconcile()
	got := &etcdv1.EtcdSnapshotSchedule{}
	if err := f.api.Get(context.Background(), client.ObjectKeyFromObject(sc), got); err != nil {
		t.Fatal(err)
	}
	if len(got.Finalizers) != 0 || len(f.snapshots()) != 0 || got.Status.LastScheduleTime != nil {
		t.Fatalf("schedule of another operator's cluster: finalizers %v, %d snapshots, status %+v", got.Finalizers, len(f.snapshots()), got.Status)
	}
	f.r.Claims.Me = "ops-b/x"
	f.reconcile()
	f.reconcile()
	if len(f.snapshots()) != 1 {
		t.Fatalf("the claimant's schedule made %d snapshots, want 1", len(f.snapshots()))
	}
}
