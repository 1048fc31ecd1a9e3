// Package children keeps the objects an EtcdCluster owns besides its members, one package a
// kind (services, pdb, networkpolicy, certificates, auth), each behind Component, as etcd-druid
// does with its components. The cluster reconciler decides when each runs; a component only brings its
// objects to what internal/specs builds for the cluster, and reads nothing of the cluster's
// state but the Facts it is given.
package children

import (
	"context"

	"k8s.io/client-go/tools/events"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller/children/auth"
	"github.com/quorumkeeper/etcd-operator/internal/controller/children/certificates"
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
	// Certificates go first among the gates before the step list: no member is created
	// before its certificate Secrets are usable.
	Certificates Component
	// NetworkPolicy also runs alone before members of a cluster waiting for auth are made.
	NetworkPolicy Component
	// Auth is the gate after the NetworkPolicy's. It is the concrete component, not a
	// Component: turning auth on and changing root's password in etcd need the observed
	// view's etcd client and stay with the reconciler, which reads and records the passwords
	// and AuthReady through it.
	Auth *auth.Component
	// Policies (the PodDisruptionBudget, then the NetworkPolicy) follow the observed voters.
	Policies []Component
}

// Options are what the components are built over.
type Options struct {
	// Objects reads and writes the cluster's child objects.
	Objects kit.Objects
	// Recorder records the certificates' and auth's events; nil in tests.
	Recorder events.EventRecorder
	// OperatorNamespace is where the operator runs, which the NetworkPolicy admits.
	OperatorNamespace string
	// ClusterDomain is the Kubernetes cluster's DNS domain, for the names in certificates.
	ClusterDomain string
}

// New builds the components.
func New(o Options) Set {
	np := networkpolicy.New(o.Objects, o.OperatorNamespace)
	return Set{
		Services:      services.New(o.Objects),
		Certificates:  certificates.New(o.Objects, o.Recorder, o.ClusterDomain),
		NetworkPolicy: np,
		Auth:          auth.New(o.Objects, o.Recorder),
		Policies:      []Component{pdb.New(o.Objects), np},
	}
}

// The auth component is a Component too, although the Set holds it by its type.
var _ Component = (*auth.Component)(nil)
