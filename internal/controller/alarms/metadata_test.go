package alarms

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller/kit"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
	"github.com/quorumkeeper/etcd-operator/internal/etcdfake"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// The pass a NOSPACE remediation creates carries the cluster's spec.additionalMetadata.
func TestRemediationPassCarriesAdditionalMetadata(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = etcdv1.AddToScheme(scheme)
	c := &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns", UID: "db-uid"},
		Spec:   etcdv1.EtcdClusterSpec{AdditionalMetadata: &etcdv1.AdditionalMetadata{Labels: map[string]string{"team": "storage"}, Annotations: map[string]string{"owner": "team-a"}}},
		Status: etcdv1.EtcdClusterStatus{Conditions: []metav1.Condition{{Type: etcdv1.ConditionAlarm, Status: metav1.ConditionTrue, Reason: etcdv1.ReasonNoSpace, LastTransitionTime: metav1.Now()}}}}
	member := &etcdv1.EtcdMember{ObjectMeta: metav1.ObjectMeta{Name: "db-1", Namespace: "ns", Labels: specs.MemberLabels("db", "db-1")}, Spec: etcdv1.EtcdMemberSpec{ClusterName: "db"}}
	api := fake.NewClientBuilder().WithScheme(scheme).WithObjects(c, member).Build()
	e := etcdfake.New()
	e.SeedMember("db-1", specs.PeerURL(c, "db-1"), specs.ClientURL(c, "db-1"))
	r := &Reconciler{Client: api, Claims: &kit.Claims{}, NewClient: func(context.Context, *etcdv1.EtcdCluster, []string) (etcd.Client, error) {
		return etcdfake.KeepOpen(e), nil
	}}
	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "db"}}); err != nil {
		t.Fatal(err)
	}
	passes := &etcdv1.EtcdDefragList{}
	if err := api.List(context.Background(), passes, client.MatchingLabels{etcdv1.LabelNoSpaceRemediation: "db"}); err != nil {
		t.Fatal(err)
	}
	if len(passes.Items) != 1 {
		t.Fatalf("%d remediation passes", len(passes.Items))
	}
	if d := passes.Items[0]; d.Labels["team"] != "storage" || d.Annotations["owner"] != "team-a" {
		t.Fatalf("pass metadata %+v", d.ObjectMeta)
	}
}
