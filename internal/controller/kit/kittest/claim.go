package kittest

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

// SetClaim writes claim (etcdv1.AnnotationOperator) on the EtcdCluster key, with the spec
// edits given, as the claiming operator (or a person handing the cluster over) would.
func SetClaim(t testing.TB, api client.Client, key types.NamespacedName, claim string, edits ...func(*etcdv1.EtcdCluster)) {
	t.Helper()
	c := &etcdv1.EtcdCluster{}
	if err := api.Get(context.Background(), key, c); err != nil {
		t.Fatal(err)
	}
	c.Annotations = map[string]string{etcdv1.AnnotationOperator: claim}
	for _, edit := range edits {
		edit(c)
	}
	if err := api.Update(context.Background(), c); err != nil {
		t.Fatal(err)
	}
}
