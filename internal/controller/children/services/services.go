// Package services keeps an EtcdCluster's Services: the headless one that gives members
// their DNS names and the client one (and, for a cluster adopted from the legacy operator,
// that operator's client Service).
package services

import (
	"context"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller/kit"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// Services are deleted by their owner reference, not by the operator; delete stays granted
// because the admission plugin OwnerReferencesPermissionEnforcement lets only who may delete
// an object set its owner references.
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;patch;delete

// Component keeps the Services.
type Component struct{ objects kit.Objects }

// New is the component over the cluster's child objects.
func New(objects kit.Objects) *Component { return &Component{objects: objects} }

// Sync keeps the headless and the client Service, in that order, then an adopted cluster's
// legacy client Service (specs.AdoptedClientService), stopping at the first error.
func (s *Component) Sync(ctx context.Context, c *etcdv1.EtcdCluster, _ kit.Facts) error {
	for _, want := range wanted(c) {
		if err := s.ensure(ctx, c, want); err != nil {
			return err
		}
	}
	return nil
}

// wanted are the cluster's Services.
func wanted(c *etcdv1.EtcdCluster) []*corev1.Service {
	services := []*corev1.Service{specs.HeadlessService(c), specs.ClientService(c)}
	if adopted := specs.AdoptedClientService(c); adopted != nil {
		services = append(services, adopted)
	}
	return services
}

// ensure creates a Service or brings its labels, selector and ports back to what the builder
// says, writing only when something differs.
func (s *Component) ensure(ctx context.Context, c *etcdv1.EtcdCluster, want *corev1.Service) error {
	have := &corev1.Service{}
	err := s.objects.Get(ctx, types.NamespacedName{Namespace: want.Namespace, Name: want.Name}, have)
	if apierrors.IsNotFound(err) {
		return s.objects.CreateOwned(ctx, c, want, "Service")
	}
	if err != nil {
		return err
	}
	// Clusters "db" and "db-client" would share the Service "db-client" (the first's client
	// Service, the second's headless one): whichever comes second is refused here, before it
	// creates members whose DNS names would resolve to the other's Pods.
	if err := kit.NotOurs(have, c, "Service", "EtcdCluster"); err != nil {
		return err
	}
	if reflect.DeepEqual(have.Labels, want.Labels) && reflect.DeepEqual(have.Spec.Selector, want.Spec.Selector) &&
		reflect.DeepEqual(have.Spec.Ports, want.Spec.Ports) && have.Spec.PublishNotReadyAddresses == want.Spec.PublishNotReadyAddresses {
		return nil
	}
	patch := client.MergeFrom(have.DeepCopy())
	have.Labels, have.Spec.Selector, have.Spec.Ports = want.Labels, want.Spec.Selector, want.Spec.Ports
	have.Spec.PublishNotReadyAddresses = want.Spec.PublishNotReadyAddresses
	return kit.RefusedByAPI(s.objects.Client.Patch(ctx, have, patch), "Service", have.Name)
}
