package alarms

import (
	"context"
	"errors"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller/kit"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// NOSPACE on a cluster another operator claims is that operator's to remediate: no pass.
func TestNoSpaceOfAnotherOperatorsClusterIsLeftAlone(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = etcdv1.AddToScheme(scheme)
	c := &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns", Annotations: map[string]string{etcdv1.AnnotationOperator: "ops-b/x"}},
		Status: etcdv1.EtcdClusterStatus{Conditions: []metav1.Condition{{Type: etcdv1.ConditionAlarm, Status: metav1.ConditionTrue, Reason: etcdv1.ReasonNoSpace, LastTransitionTime: metav1.Now()}}}}
	member := &etcdv1.EtcdMember{ObjectMeta: metav1.ObjectMeta{Name: "db-1", Namespace: "ns", Labels: specs.MemberLabels("db", "db-1")}, Spec: etcdv1.EtcdMemberSpec{ClusterName: "db"}}
	api := fake.NewClientBuilder().WithScheme(scheme).WithObjects(c, member).Build()
	opened := 0
	r := &Reconciler{Client: api, Claims: &kit.Claims{Me: "ops-a/x"}, NewClient: func(context.Context, *etcdv1.EtcdCluster, []string) (etcd.Client, error) {
		opened++
		return nil, errors.New("no etcd in this test")
	}}
	look := func() error {
		_, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "db"}})
		return err
	}
	if err := look(); err != nil || opened != 0 {
		t.Fatalf("another operator's cluster: %v, etcd opened %d times to compact; want left alone", err, opened)
	}
	r.Claims.Me = "ops-b/x"
	if err := look(); err == nil || opened != 1 {
		t.Fatalf("the claimant opened etcd %d times (%v), want once to compact", opened, err)
	}
}
