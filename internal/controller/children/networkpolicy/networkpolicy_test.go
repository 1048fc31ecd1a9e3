package networkpolicy

import (
	"context"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller/children/childtest"
	"github.com/quorumkeeper/etcd-operator/internal/controller/kit"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// The policy is there while spec.networkPolicy asks for it, admitting the operator's
// namespace, and goes when it is turned off.
func TestSyncFollowsTheSpec(t *testing.T) {
	t.Parallel()
	ctx, c := context.Background(), childtest.Cluster()
	cl := childtest.Client(interceptor.Funcs{})
	n := New(childtest.Objects(cl), "ops")
	c.Spec.NetworkPolicy = &etcdv1.NetworkPolicySpec{Enabled: true}
	if err := n.Sync(ctx, c, kit.Facts{}); err != nil {
		t.Fatal(err)
	}
	have := &networkingv1.NetworkPolicy{}
	err := childtest.Get(cl, specs.NetworkPolicyName("db"), have)
	want := specs.NetworkPolicy(c, specs.OperatorPeer("ops"))
	if err != nil || !metav1.IsControlledBy(have, c) || len(have.Spec.Ingress) != len(want.Spec.Ingress) {
		t.Fatalf("NetworkPolicy %+v, %v", have, err)
	}
	c.Spec.NetworkPolicy = nil
	if err := n.Sync(ctx, c, kit.Facts{}); err != nil {
		t.Fatal(err)
	}
	if err := childtest.Get(cl, specs.NetworkPolicyName("db"), &networkingv1.NetworkPolicy{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a NetworkPolicy turned off: %v", err)
	}
}

// Someone else's policy of that name is a NameConflict while the cluster wants one, and none
// of its business (left alone, no error) while it does not.
func TestSomeoneElsesPolicy(t *testing.T) {
	t.Parallel()
	ctx, c := context.Background(), childtest.Cluster()
	foreign := specs.NetworkPolicy(c, specs.OperatorPeer(""))
	cl := childtest.Client(interceptor.Funcs{}, foreign)
	if err := New(childtest.Objects(cl), "").Sync(ctx, c, kit.Facts{}); err != nil {
		t.Fatalf("someone else's NetworkPolicy while ours is off: %v", err)
	}
	if err := childtest.Get(cl, specs.NetworkPolicyName("db"), &networkingv1.NetworkPolicy{}); err != nil {
		t.Fatalf("someone else's NetworkPolicy was removed: %v", err)
	}
	c.Spec.NetworkPolicy = &etcdv1.NetworkPolicySpec{Enabled: true}
	childtest.ExpectProblem(t, New(childtest.Objects(cl), "").Sync(ctx, c, kit.Facts{}), etcdv1.ReasonNameConflict)
}
