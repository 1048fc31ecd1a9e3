package cluster

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller/children"
	"github.com/quorumkeeper/etcd-operator/internal/controller/kit"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// ensureIdentity records, once, the token every member of this cluster is started with.
func (r *Reconciler) ensureIdentity(ctx context.Context, c *etcdv1.EtcdCluster) error {
	if c.Status.ClusterToken != "" {
		return nil
	}
	patch := client.MergeFrom(c.DeepCopy())
	c.Status.ClusterToken = c.Name + "-" + string(c.UID)[:8]
	c.Status.Selector = specs.Selector(c.Name)
	return r.Status().Patch(ctx, c, patch)
}

// children are the components that keep the cluster's objects besides its members, built once
// a reconcile from the reconciler's fields as they are then, so that a field set after
// construction (the operator's namespace or the event recorder, in tests) counts.
func (r *Reconciler) children() children.Set {
	return children.New(children.Options{
		Objects: kit.Objects{Client: r.Client, Live: r.APIReader}, Recorder: r.Recorder,
		OperatorNamespace: r.OperatorNamespace, ClusterDomain: r.ClusterDomain,
	})
}
