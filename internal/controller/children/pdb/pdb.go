// Package pdb keeps an EtcdCluster's PodDisruptionBudget over its voters.
package pdb

import (
	"context"
	"reflect"

	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller/kit"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;patch;delete

const kind = "PodDisruptionBudget"

// Component keeps the PodDisruptionBudget.
type Component struct{ objects kit.Objects }

// New is the component over the cluster's child objects.
func New(objects kit.Objects) *Component { return &Component{objects: objects} }

// Sync keeps a PodDisruptionBudget over facts.Voters; a paused cluster (zero replicas) has
// none, and one without voters yet keeps what it has. Its selector selects the old voter role
// value too while a Pod still carries an old one (facts.LegacyRoleLabels), so that a cluster
// of an older operator moves over with every voter selected throughout: widened first, the
// member controller relabels the Pods only once it is (specs.RoleLabelWaits), narrowed to
// Cozystack's selector once none is left.
func (p *Component) Sync(ctx context.Context, c *etcdv1.EtcdCluster, facts kit.Facts) error {
	have := &policyv1.PodDisruptionBudget{}
	exists, err := p.objects.GetOwned(ctx, c, specs.PDBName(c.Name), have, kind)
	if err != nil {
		return err
	}
	paused := c.Spec.Replicas != nil && *c.Spec.Replicas == 0
	if paused || facts.Voters == 0 {
		if exists && paused {
			return client.IgnoreNotFound(p.objects.Client.Delete(ctx, have))
		}
		return nil
	}
	want := specs.PDB(c, int32(facts.Voters), facts.LegacyRoleLabels)
	if !exists {
		return p.objects.CreateOwned(ctx, c, want, kind)
	}
	if reflect.DeepEqual(have.Spec.MinAvailable, want.Spec.MinAvailable) && reflect.DeepEqual(have.Spec.Selector, want.Spec.Selector) {
		return nil
	}
	patch := client.MergeFrom(have.DeepCopy())
	have.Spec.MinAvailable, have.Spec.Selector = want.Spec.MinAvailable, want.Spec.Selector
	return kit.RefusedByAPI(p.objects.Client.Patch(ctx, have, patch), kind, have.Name)
}
