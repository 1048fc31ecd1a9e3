// Package children keeps the objects an EtcdCluster owns besides its members, one package a
// kind (services, pdb, networkpolicy, certificates, auth, and the members' PVCs: retention,
// volumes), each a component with a Sync, as etcd-druid has them: a Component, or its own
// type where the reconciler asks more of it (Set). The cluster reconciler decides when each
// runs; a component only brings its objects to what the cluster asks for, and reads nothing
// of the cluster's state but what it is given (the Facts; auth, whether etcd refused root's
// login).
package children

import (
	"context"

	"k8s.io/client-go/tools/events"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller/children/auth"
	"github.com/quorumkeeper/etcd-operator/internal/controller/children/certificates"
	"github.com/quorumkeeper/etcd-operator/internal/controller/children/networkpolicy"
	"github.com/quorumkeeper/etcd-operator/internal/controller/children/pdb"
	"github.com/quorumkeeper/etcd-operator/internal/controller/children/retention"
	"github.com/quorumkeeper/etcd-operator/internal/controller/children/services"
	"github.com/quorumkeeper/etcd-operator/internal/controller/children/volumes"
	"github.com/quorumkeeper/etcd-operator/internal/controller/kit"
)

// Component keeps one kind of the cluster's child objects as the cluster wants them: it
// creates, updates and, where the spec turns the kind off, deletes them. An object of the
// kind that the cluster does not control, or that the API server refuses, comes back as a
// degraded kit.Waiting (NameConflict, ObjectRefused); Kubernetes deletes the rest with the
// cluster through their owner references, so there is no Delete (the PVCs, which may have to
// outlive the cluster, are the exception: retention's Mark and Finalize).
type Component interface {
	Sync(ctx context.Context, c *etcdv1.EtcdCluster, facts kit.Facts) error
}

// Set is the cluster's components, by the place the reconciler runs them. Those the
// reconciler asks more of than Sync are held by their type.
type Set struct {
	// Retention keeps the members' PVCs' ownership. They are the one child object that must
	// outlive the cluster (whenDeleted Retain), so besides Sync, which follows the observed
	// PVCs before any step and sets their owners per the policy, it keeps the cluster's
	// retention finalizer in line with the policy before any look at it (Mark) and releases
	// the PVCs as the cluster goes (Finalize): the Delete the other kinds leave to garbage
	// collection.
	Retention *retention.Component
	// Services go before the members are observed: members need their DNS names.
	Services Component
	// Certificates go first among the gates before the step list: no member is created
	// before its certificate Secrets are usable. They record TLSReady themselves.
	Certificates *certificates.Component
	// NetworkPolicy also runs alone before members of a cluster waiting for auth are made.
	NetworkPolicy Component
	// Auth is the gate after the NetworkPolicy's. Turning auth on and changing root's
	// password in etcd need the observed view's etcd client and stay with the reconciler,
	// which reads and records the passwords through it; it records AuthReady itself.
	Auth *auth.Component
	// Policies (the PodDisruptionBudget, then the NetworkPolicy) follow the observed voters.
	Policies []Component
	// Volumes run after the step, whatever it did (growing changes no membership and needs
	// no quorum), and like it not while a Service is blocked. Their Sync hands the
	// VolumesResized condition back (nil leaves it as it is), and the reconciler sets it in
	// its status write with the conditions it decides itself.
	Volumes *volumes.Component
}

// Options are what the components are built over.
type Options struct {
	// Objects reads and writes the cluster's child objects.
	Objects kit.Objects
	// Recorder records the certificates', auth's, retention's and the volumes' events; nil in
	// tests.
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
		Retention:     retention.New(o.Objects, o.Recorder),
		Services:      services.New(o.Objects),
		Certificates:  certificates.New(o.Objects, o.Recorder, o.ClusterDomain),
		NetworkPolicy: np,
		Auth:          auth.New(o.Objects, o.Recorder),
		Policies:      []Component{pdb.New(o.Objects), np},
		Volumes:       volumes.New(o.Objects, o.Recorder),
	}
}
