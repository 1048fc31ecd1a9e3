package schedule

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

// A schedule deleted just after it started a snapshot, which its cache has not seen yet:
// the snapshot is released all the same. Left controlled by the schedule, it would go with
// it, and its stored file with it, which the schedule's finalizer is there to prevent.
func TestADeletedScheduleReleasesTheSnapshotItsCacheHasNotSeen(t *testing.T) {
	created := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	sc := pvcSchedule(created, "* * * * *")
	f := newScheduleFixture(t, sc, created.Add(90*time.Second), func(api client.Client) client.Client {
		return interceptor.NewClient(api.(client.WithWatch), interceptor.Funcs{
			List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
				if err := c.List(ctx, list, opts...); err != nil {
					return err
				}
				if snaps, ok := list.(*etcdv1.EtcdSnapshotList); ok {
					snaps.Items = nil // the cache has not seen the snapshot just created
				}
				return nil
			},
		})
	})
	f.r.APIReader = f.api
	f.reconcile() // finalizer
	f.reconcile() // the due run's snapshot
	if n := len(f.snapshots()); n != 1 {
		t.Fatalf("%d snapshots, want the due run's", n)
	}
	live := &etcdv1.EtcdSnapshotSchedule{}
	if err := f.api.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "nightly"}, live); err != nil {
		t.Fatal(err)
	}
	if err := f.api.Delete(context.Background(), live); err != nil {
		t.Fatal(err)
	}
	f.reconcile()
	for _, s := range f.snapshots() {
		if metav1.IsControlledBy(&s, sc) {
			t.Errorf("snapshot %s is still controlled by the deleted schedule: it goes with it, its stored file too", s.Name)
		}
	}
}
