package main

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

func TestCacheOptions(t *testing.T) {
	all := cacheOptions(options{})
	if all.DefaultNamespaces != nil {
		t.Errorf("no --watch-namespaces: DefaultNamespaces = %v, want all namespaces", all.DefaultNamespaces)
	}
	some := cacheOptions(options{watchNamespaces: "team-a, team-b,"})
	if len(some.DefaultNamespaces) != 2 {
		t.Errorf("--watch-namespaces=team-a,team-b: DefaultNamespaces = %v", some.DefaultNamespaces)
	}
	for _, ns := range []string{"team-a", "team-b"} {
		if _, ok := some.DefaultNamespaces[ns]; !ok {
			t.Errorf("%s not watched", ns)
		}
	}
	var pods labels.Selector
	for obj, by := range all.ByObject {
		if _, ok := obj.(*corev1.Pod); ok {
			pods = by.Label
		}
	}
	if pods == nil {
		t.Fatal("Pods are cached without a label selector")
	}
	if !pods.Matches(labels.Set{"app.kubernetes.io/managed-by": "etcd-operator"}) || pods.Matches(labels.Set{"app": "unrelated"}) {
		t.Errorf("the Pod cache selects %s: want the operator's managed-by label", pods)
	}
	if len(all.ByObject) != 4 {
		t.Errorf("ByObject scopes %d kinds, want Pods, PVCs, Services and PDBs", len(all.ByObject))
	}
}

// Secrets are never served from the cache: it would hold every Secret of the watched
// namespaces, data included.
func TestSecretsAreReadLive(t *testing.T) {
	opts := clientOptions()
	if opts.Cache == nil {
		t.Fatal("no client cache options: Secrets would be cached")
	}
	for _, obj := range opts.Cache.DisableFor {
		if _, ok := obj.(*corev1.Secret); ok {
			return
		}
	}
	t.Errorf("Secrets are not in the client's DisableFor (%v): the cache would hold them all", opts.Cache.DisableFor)
}
