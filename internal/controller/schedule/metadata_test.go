package schedule

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

// A scheduled EtcdSnapshot carries the spec.additionalMetadata of the cluster it is of.
func TestScheduledSnapshotCarriesTheClustersAdditionalMetadata(t *testing.T) {
	created := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	f := newScheduleFixture(t, pvcSchedule(created, "* * * * *"), created.Add(90*time.Second), nil)
	c := &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "main", Namespace: "ns"}, Spec: etcdv1.EtcdClusterSpec{
		AdditionalMetadata: &etcdv1.AdditionalMetadata{Labels: map[string]string{"team": "storage"}, Annotations: map[string]string{"owner": "team-a"}},
	}}
	if err := f.api.Create(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	f.reconcile() // finalizer
	f.reconcile()
	got := f.snapshots()
	if len(got) != 1 {
		t.Fatalf("%d snapshots", len(got))
	}
	if s := got[0]; s.Labels["team"] != "storage" || s.Annotations["owner"] != "team-a" || s.Labels[etcdv1.LabelSnapshotSchedule] != "nightly" {
		t.Fatalf("snapshot metadata %+v", s.ObjectMeta)
	}
}
