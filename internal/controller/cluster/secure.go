package cluster

import (
	"context"
	"errors"
	"slices"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller/children"
	"github.com/quorumkeeper/etcd-operator/internal/controller/children/auth"
	"github.com/quorumkeeper/etcd-operator/internal/controller/kit"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// secureStep is step behind the gates of TLS and auth: no member is created before its
// certificates and the root password are readable (a Pod without its Secrets cannot start,
// and a cluster meant to have auth must not serve without it), auth is enabled as soon as a
// quorum of voters is healthy, and root's password is rotated once the cluster is at rest.
func (r *Reconciler) secureStep(ctx context.Context, c *etcdv1.EtcdCluster, v *clusterView, set children.Set) (bool, error) {
	if err := secureGates(ctx, c, v, set); err != nil {
		return false, err
	}
	// Auth goes on as soon as a quorum answers, before any other step: until then members
	// serve without it (the client Service has no endpoints meanwhile, see ClientService).
	if authPendingHere(c, v) && v.reachable {
		if err := r.ensureAuth(ctx, c, v, set.Auth); err != nil {
			return false, err
		}
		if c.Status.AuthEnabled {
			return true, nil
		}
	}
	progressed, err := r.step(ctx, c, v)
	if err != nil || progressed {
		return progressed, err
	}
	return false, r.ensureAuth(ctx, c, v, set.Auth)
}

// secureGates run, in this order, the components that hold members back: the certificates;
// for a cluster whose auth is pending, the NetworkPolicy that keeps other clients away from
// the members until auth is on (a member serves as soon as it starts, and the operator
// enables auth only once a quorum answers), so no member before it is in place; then auth,
// which waits for root's password and reports a login etcd refused.
func secureGates(ctx context.Context, c *etcdv1.EtcdCluster, v *clusterView, set children.Set) error {
	if err := set.Certificates.Sync(ctx, c, kit.Facts{}); err != nil {
		return err
	}
	if auth.Pending(c) {
		if err := set.NetworkPolicy.Sync(ctx, c, kit.Facts{}); err != nil {
			return err
		}
	}
	return set.Auth.Sync(ctx, c, errors.Is(v.clientErr, etcd.ErrAuthFailed))
}

// clustersForSecret maps a Secret to the clusters that use it, so that a Secret created or
// renewed (by the user or cert-manager) lets a waiting cluster proceed at once.
func (r *Reconciler) clustersForSecret(ctx context.Context, obj client.Object) []reconcile.Request {
	return r.clustersUsing(ctx, obj, usesSecret)
}

func usesSecret(c *etcdv1.EtcdCluster, name string) bool {
	names := kit.ClientSecretNames(c)
	if specs.PeerSecretTLS(c) {
		names = append(names, specs.PeerSecretName(c))
	}
	if rot := c.Status.CARotation; rot != nil {
		// A probe issued or a bundle changed moves a CA rotation on.
		names = append(names, specs.CABundleSecretName(c.Name))
		for _, t := range rot.To {
			names = append(names, specs.CAProbeName(t.Certificate))
		}
	}
	return slices.Contains(names, name)
}
