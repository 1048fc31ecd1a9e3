package controller

import (
	"context"
	"errors"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller/kit"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// ensureIdentity records, once, the token every member of this cluster is started with.
func (r *ClusterReconciler) ensureIdentity(ctx context.Context, c *etcdv1.EtcdCluster) error {
	if c.Status.ClusterToken != "" {
		return nil
	}
	patch := client.MergeFrom(c.DeepCopy())
	c.Status.ClusterToken = c.Name + "-" + string(c.UID)[:8]
	c.Status.Selector = specs.Selector(c.Name)
	return r.Status().Patch(ctx, c, patch)
}

func (r *ClusterReconciler) ensureServices(ctx context.Context, c *etcdv1.EtcdCluster) error {
	for _, want := range []*corev1.Service{specs.HeadlessService(c), specs.ClientService(c)} {
		if err := r.ensureService(ctx, c, want); err != nil {
			return err
		}
	}
	return nil
}

// ensureService creates a Service or brings its labels, selector and ports back to what the
// builder says, writing only when something differs.
func (r *ClusterReconciler) ensureService(ctx context.Context, c *etcdv1.EtcdCluster, want *corev1.Service) error {
	have := &corev1.Service{}
	err := kit.GetChild(ctx, r.Client, r.APIReader, types.NamespacedName{Namespace: want.Namespace, Name: want.Name}, have)
	if apierrors.IsNotFound(err) {
		if err := controllerutil.SetControllerReference(c, want, r.Scheme()); err != nil {
			return err
		}
		return kit.RefusedByAPI(client.IgnoreAlreadyExists(r.Create(ctx, want)), "Service", want.Name)
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
	return kit.RefusedByAPI(r.Patch(ctx, have, patch), "Service", have.Name)
}

// getOwned reads the cluster's child object of that name into obj: false when there is none,
// a NameConflict problem when one exists that the cluster does not control.
func (r *ClusterReconciler) getOwned(ctx context.Context, c *etcdv1.EtcdCluster, name string, obj client.Object, kind string) (bool, error) {
	err := kit.GetChild(ctx, r.Client, r.APIReader, types.NamespacedName{Namespace: c.Namespace, Name: name}, obj)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, kit.NotOurs(obj, c, kind, "EtcdCluster")
}

// ignoreNameConflict drops a NameConflict problem, keeping any other error.
func ignoreNameConflict(err error) error {
	var w kit.Waiting
	if errors.As(err, &w) && w.Reason == etcdv1.ReasonNameConflict {
		return nil
	}
	return err
}

// ensurePDB keeps a PodDisruptionBudget over the voters; a paused cluster has none.
func (r *ClusterReconciler) ensurePDB(ctx context.Context, c *etcdv1.EtcdCluster, v *clusterView) error {
	voters, _ := v.voters()
	have := &policyv1.PodDisruptionBudget{}
	exists, err := r.getOwned(ctx, c, specs.PDBName(c.Name), have, "PodDisruptionBudget")
	if err != nil {
		return err
	}
	if ptrOr(c.Spec.Replicas, 3) == 0 || voters == 0 {
		if exists && ptrOr(c.Spec.Replicas, 3) == 0 {
			return client.IgnoreNotFound(r.Delete(ctx, have))
		}
		return nil
	}
	want := specs.PDB(c, int32(voters))
	if !exists {
		if err := controllerutil.SetControllerReference(c, want, r.Scheme()); err != nil {
			return err
		}
		return kit.RefusedByAPI(client.IgnoreAlreadyExists(r.Create(ctx, want)), "PodDisruptionBudget", want.Name)
	}
	if reflect.DeepEqual(have.Spec.MinAvailable, want.Spec.MinAvailable) && reflect.DeepEqual(have.Spec.Selector, want.Spec.Selector) {
		return nil
	}
	patch := client.MergeFrom(have.DeepCopy())
	have.Spec.MinAvailable, have.Spec.Selector = want.Spec.MinAvailable, want.Spec.Selector
	return kit.RefusedByAPI(r.Patch(ctx, have, patch), "PodDisruptionBudget", have.Name)
}

// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;list;watch;create;patch;delete

// ensureNetworkPolicy keeps the NetworkPolicy spec.networkPolicy asks for, or the one that
// keeps clients out while authentication is pending (specs.NetworkPolicyWanted), and removes
// the operator's own when neither is wanted.
func (r *ClusterReconciler) ensureNetworkPolicy(ctx context.Context, c *etcdv1.EtcdCluster) error {
	have := &networkingv1.NetworkPolicy{}
	exists, err := r.getOwned(ctx, c, specs.NetworkPolicyName(c.Name), have, "NetworkPolicy")
	if !specs.NetworkPolicyWanted(c) {
		// Turned off: only the operator's own goes; one of that name that is someone
		// else's is none of the cluster's business (no NameConflict).
		if exists && metav1.IsControlledBy(have, c) {
			return client.IgnoreNotFound(r.Delete(ctx, have))
		}
		return client.IgnoreNotFound(ignoreNameConflict(err))
	}
	if err != nil {
		return err
	}
	want := specs.NetworkPolicy(c, specs.OperatorPeer(r.OperatorNamespace))
	if !exists {
		if err := controllerutil.SetControllerReference(c, want, r.Scheme()); err != nil {
			return err
		}
		return kit.RefusedByAPI(client.IgnoreAlreadyExists(r.Create(ctx, want)), "NetworkPolicy", want.Name)
	}
	if equality.Semantic.DeepEqual(have.Spec, want.Spec) {
		return nil
	}
	patch := client.MergeFrom(have.DeepCopy())
	have.Spec = want.Spec
	return kit.RefusedByAPI(r.Patch(ctx, have, patch), "NetworkPolicy", have.Name)
}
