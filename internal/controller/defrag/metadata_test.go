package defrag

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

// A pass spec.defrag creates carries the cluster's spec.additionalMetadata.
func TestScheduledPassCarriesAdditionalMetadata(t *testing.T) {
	h := newPassHarness(t, nil)
	c := &etcdv1.EtcdCluster{}
	if err := h.api.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "db"}, c); err != nil {
		t.Fatal(err)
	}
	c.Spec.Defrag = &etcdv1.DefragSchedule{Schedule: "@every 1h", Rule: &etcdv1.DefragRule{All: true}}
	c.Spec.AdditionalMetadata = &etcdv1.AdditionalMetadata{Labels: map[string]string{"team": "storage"}, Annotations: map[string]string{"owner": "team-a"}}
	if err := h.api.Update(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	now := c.CreationTimestamp.Add(90 * time.Minute)
	s := &ScheduleReconciler{Client: h.api, Now: func() time.Time { return now }}
	if _, err := s.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "db"}}); err != nil {
		t.Fatal(err)
	}
	list := &etcdv1.EtcdDefragList{}
	if err := h.api.List(context.Background(), list, client.MatchingLabels{etcdv1.LabelDefragSchedule: "db"}); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 {
		t.Fatalf("%d passes", len(list.Items))
	}
	d := list.Items[0]
	if d.Labels["team"] != "storage" || d.Annotations["owner"] != "team-a" || d.Annotations[etcdv1.AnnotationScheduledTime] == "" {
		t.Fatalf("pass metadata %+v", d.ObjectMeta)
	}
}

// A pass an EtcdDefragPolicy creates carries its cluster's spec.additionalMetadata too.
func TestPolicyPassCarriesTheClustersAdditionalMetadata(t *testing.T) {
	f := newPolicyFixture(t, etcdv1.EtcdDefragPolicySpec{Schedule: "*/10 * * * *", Rule: &etcdv1.DefragRule{All: true}})
	c := &etcdv1.EtcdCluster{}
	if err := f.h.api.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "db"}, c); err != nil {
		t.Fatal(err)
	}
	c.Spec.AdditionalMetadata = &etcdv1.AdditionalMetadata{Labels: map[string]string{"team": "storage"}, Annotations: map[string]string{"owner": "team-a"}}
	if err := f.h.api.Update(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	f.at(f.created.Truncate(10 * time.Minute).Add(10*time.Minute + 5*time.Second))
	d := f.wantPasses(1, "at the first time")[0]
	if d.Labels["team"] != "storage" || d.Annotations["owner"] != "team-a" || d.Labels[etcdv1.LabelDefragPolicy] != "nightly" {
		t.Fatalf("pass metadata %+v: want the cluster's additionalMetadata beside the policy's label", d.ObjectMeta)
	}
}
