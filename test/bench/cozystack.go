package main

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// cozystackCluster is an EtcdCluster of Cozystack's etcd-operator. It serves the group,
// version and kind ours serves (ours keeps its API), with CRDs of its own that replace ours
// while it runs; the object is unstructured, so that neither operator's Go types shape what
// is sent: it is the manifest Cozystack documents.
type cozystackCluster struct {
	b  *bench
	ns string
}

// cozystackKind is Cozystack's EtcdCluster: its API, written here rather than taken from ours,
// which may move on.
var cozystackKind = schema.GroupVersionKind{Group: "etcd-operator.cozystack.io", Version: "v1alpha2", Kind: "EtcdCluster"}

// errNotCompared: the side-by-side steps never ask a rival for these.
var errNotCompared = errors.New("not a step of the side-by-side comparison")

func (c *cozystackCluster) namespace() string { return c.ns }

func (c *cozystackCluster) start(ctx context.Context, n int, version string) error {
	return c.b.k8s.Create(ctx, cozystackManifest(c.ns, n, version))
}

// grow changes spec.replicas, as its user does (kubectl scale would do the same).
func (c *cozystackCluster) grow(ctx context.Context, n int) error {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(cozystackKind)
	u.SetNamespace(c.ns)
	u.SetName(clusterName)
	return c.b.k8s.Patch(ctx, u, client.RawPatch(types.MergePatchType, replicasPatch(n)))
}

func (c *cozystackCluster) shrink(context.Context, int) error { return errNotCompared }

func (c *cozystackCluster) upgrade(context.Context, string) error { return errNotCompared }

func (c *cozystackCluster) replaceWiped(context.Context, string, uint64) error {
	return errNotCompared
}

func (c *cozystackCluster) losePod(ctx context.Context, name string) error {
	return c.b.losePod(ctx, c.ns, name)
}

func (c *cozystackCluster) settled(ctx context.Context, n int) error {
	return c.b.votersServing(ctx, c.ns, n)
}

// cozystackManifest is a cluster of n members on etcd version as Cozystack's README writes
// one: its CRD requires the storage that ours defaults to the same 1Gi.
func cozystackManifest(ns string, n int, version string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{
			"replicas": int64(n),
			"version":  version,
			"storage":  map[string]any{"size": "1Gi"},
		},
	}}
	u.SetGroupVersionKind(cozystackKind)
	u.SetNamespace(ns)
	u.SetName(clusterName)
	return u
}

// replicasPatch is the merge patch that sets spec.replicas to n.
func replicasPatch(n int) []byte {
	return fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, n)
}
