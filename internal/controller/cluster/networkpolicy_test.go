package cluster

import (
	"context"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

func (h *harness) setNetworkPolicy(np *etcdv1.NetworkPolicySpec) {
	h.t.Helper()
	h.editSpec(func(s *etcdv1.EtcdClusterSpec) { s.NetworkPolicy = np })
}

func (h *harness) networkPolicy() (*networkingv1.NetworkPolicy, error) {
	np := &networkingv1.NetworkPolicy{}
	return np, h.api.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "db"}, np)
}

func TestNetworkPolicyFollowsTheSpec(t *testing.T) {
	h := runningHarness(t)
	h.r.OperatorNamespace = "ops"
	if _, err := h.networkPolicy(); !apierrors.IsNotFound(err) {
		t.Fatalf("a NetworkPolicy without spec.networkPolicy: %v", err)
	}
	h.setNetworkPolicy(&etcdv1.NetworkPolicySpec{Enabled: true, ClientSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "orders"}}})
	h.reconcile()
	np, err := h.networkPolicy()
	if err != nil {
		t.Fatal(err)
	}
	if !metav1.IsControlledBy(np, h.clusterObj()) || len(np.Spec.Ingress) != 3 {
		t.Fatalf("NetworkPolicy owners %v, %d rules", np.OwnerReferences, len(np.Spec.Ingress))
	}
	rv := np.ResourceVersion
	h.reconcile()
	if np, _ = h.networkPolicy(); np.ResourceVersion != rv {
		t.Fatal("an unchanged NetworkPolicy was written again")
	}
	h.setNetworkPolicy(&etcdv1.NetworkPolicySpec{Enabled: false})
	h.reconcile()
	if _, err := h.networkPolicy(); !apierrors.IsNotFound(err) {
		t.Fatalf("the NetworkPolicy stays after it was turned off: %v", err)
	}
}

func TestSomeoneElsesNetworkPolicyIsReportedNotTaken(t *testing.T) {
	h := runningHarness(t)
	theirs := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns"}}
	if err := h.api.Create(context.Background(), theirs); err != nil {
		t.Fatal(err)
	}
	h.setNetworkPolicy(&etcdv1.NetworkPolicySpec{Enabled: true})
	h.reconcile()
	if deg := h.conditionOf("db", etcdv1.ConditionDegraded); deg.Reason != etcdv1.ReasonNameConflict {
		t.Fatalf("Degraded %s %q, want NameConflict", deg.Reason, deg.Message)
	}
	if np, _ := h.networkPolicy(); len(np.Spec.Ingress) != 0 || len(np.OwnerReferences) != 0 {
		t.Fatalf("someone else's NetworkPolicy was changed: %+v", np)
	}
}

// With spec.networkPolicy off, a NetworkPolicy of that name that someone else made is none
// of the cluster's business: no NameConflict, and it is neither changed nor deleted.
func TestSomeoneElsesNetworkPolicyIsIgnoredWhileOurIsOff(t *testing.T) {
	h := runningHarness(t)
	theirs := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns"}}
	if err := h.api.Create(context.Background(), theirs); err != nil {
		t.Fatal(err)
	}
	h.reconcile()
	if deg := h.conditionOf("db", etcdv1.ConditionDegraded); deg.Status != metav1.ConditionFalse {
		t.Fatalf("Degraded %s %s %q with spec.networkPolicy off", deg.Status, deg.Reason, deg.Message)
	}
	if _, err := h.networkPolicy(); err != nil {
		t.Fatalf("someone else's NetworkPolicy went: %v", err)
	}
}
