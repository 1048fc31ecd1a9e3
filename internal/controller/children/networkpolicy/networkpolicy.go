// Package networkpolicy keeps an EtcdCluster's NetworkPolicy: the one spec.networkPolicy asks
// for, or the one that admits only the operator to the client port while authentication is
// pending.
package networkpolicy

import (
	"context"
	"errors"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller/kit"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;list;watch;create;patch;delete

const kind = "NetworkPolicy"

// Component keeps the NetworkPolicy.
type Component struct {
	objects kit.Objects
	// operatorNamespace is where the operator runs, which the policy admits to the client
	// port; "" admits the operator's Pods from any namespace.
	operatorNamespace string
}

// New is the component over the cluster's child objects, admitting the operator in
// operatorNamespace.
func New(objects kit.Objects, operatorNamespace string) *Component {
	return &Component{objects: objects, operatorNamespace: operatorNamespace}
}

// Sync keeps the NetworkPolicy spec.networkPolicy asks for, or the one that keeps clients out
// while authentication is pending (specs.NetworkPolicyWanted), and removes the operator's own
// when neither is wanted. It depends on no fact of the view: the authentication gate runs it
// before any is observed.
func (n *Component) Sync(ctx context.Context, c *etcdv1.EtcdCluster, _ kit.Facts) error {
	have := &networkingv1.NetworkPolicy{}
	exists, err := n.objects.GetOwned(ctx, c, specs.NetworkPolicyName(c.Name), have, kind)
	if !specs.NetworkPolicyWanted(c) {
		// Turned off: only the operator's own goes; one of that name that is someone
		// else's is none of the cluster's business (no NameConflict).
		if exists && metav1.IsControlledBy(have, c) {
			return client.IgnoreNotFound(n.objects.Client.Delete(ctx, have))
		}
		return client.IgnoreNotFound(ignoreNameConflict(err))
	}
	if err != nil {
		return err
	}
	want := specs.NetworkPolicy(c, specs.OperatorPeer(n.operatorNamespace))
	if !exists {
		return n.objects.CreateOwned(ctx, c, want, kind)
	}
	if equality.Semantic.DeepEqual(have.Spec, want.Spec) {
		return nil
	}
	patch := client.MergeFrom(have.DeepCopy())
	have.Spec = want.Spec
	return kit.RefusedByAPI(n.objects.Client.Patch(ctx, have, patch), kind, have.Name)
}

// ignoreNameConflict drops a NameConflict problem, keeping any other error.
func ignoreNameConflict(err error) error {
	var w kit.Waiting
	if errors.As(err, &w) && w.Reason == etcdv1.ReasonNameConflict {
		return nil
	}
	return err
}
