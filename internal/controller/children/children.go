// Package children keeps the objects an EtcdCluster owns besides its members, one package a
// kind (services, pdb, networkpolicy), each behind Component, as etcd-druid does with its
// components. The cluster reconciler decides when each runs; a component only brings its
// objects to what internal/specs builds for the cluster, and reads nothing of the cluster's
// state but the Facts it is given.
package children

import (
	"context"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller/children/networkpolicy"
	"github.com/quorumkeeper/etcd-operator/internal/controller/children/pdb"
	"github.com/quorumkeeper/etcd-operator/internal/controller/children/services"
	"github.com/quorumkeeper/etcd-operator/internal/controller/kit"
)

// Component keeps one kind of the cluster's child objects as the cluster wants them: it
// creates, updates and, where the spec turns the kind off, deletes them. An object of the
// kind that the cluster does not control, or that the API server refuses, comes back as a
// degraded kit.Waiting (NameConflict, ObjectRefused); Kubernetes deletes the rest with the
// cluster through their owner references, so there is no Delete.
type Component interface {
	Sync(ctx context.Context, c *etcdv1.EtcdCluster, facts kit.Facts) error
}

// Set is the cluster's components, by the place the reconciler runs them.
type Set struct {
	// Services go before the members are observed: members need their DNS names.
	Services Component
	// Policies (the PodDisruptionBudget, then the NetworkPolicy) follow the observed voters.
	Policies []Component
	// NetworkPolicy also runs alone before members of a cluster waiting for auth are made.
	NetworkPolicy Component
}

// New builds the components over the cluster's child objects. operatorNamespace is where the
// operator runs, which the NetworkPolicy admits.
func New(objects kit.Objects, operatorNamespace string) Set {
	np := networkpolicy.New(objects, operatorNamespace)
	return Set{
		Services:      services.New(objects),
		Policies:      []Component{pdb.New(objects), np},
		NetworkPolicy: np,
	}
}
