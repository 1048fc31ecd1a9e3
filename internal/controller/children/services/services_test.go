package services

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller/children/childtest"
	"github.com/quorumkeeper/etcd-operator/internal/controller/kit"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

func TestSyncCreatesBothServicesAndRestoresADriftedOne(t *testing.T) {
	t.Parallel()
	ctx, c := context.Background(), childtest.Cluster()
	drifted := childtest.Owned(t, c, specs.ClientService(c))
	drifted.Spec.Selector = map[string]string{"app": "other"}
	cl := childtest.Client(interceptor.Funcs{}, drifted)
	if err := New(childtest.Objects(cl)).Sync(ctx, c, kit.Facts{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []*corev1.Service{specs.HeadlessService(c), specs.ClientService(c)} {
		have := &corev1.Service{}
		if err := childtest.Get(cl, want.Name, have); err != nil {
			t.Fatal(err)
		}
		if !metav1.IsControlledBy(have, c) || have.Spec.Selector["app"] == "other" {
			t.Fatalf("Service %s: owners %v, selector %v", have.Name, have.OwnerReferences, have.Spec.Selector)
		}
	}
}

// A Service of the cluster's name that someone else controls is refused, not taken over:
// members would resolve to the other's Pods.
func TestSyncRefusesSomeoneElsesService(t *testing.T) {
	t.Parallel()
	c := childtest.Cluster()
	foreign := specs.HeadlessService(c)
	cl := childtest.Client(interceptor.Funcs{}, foreign)
	childtest.ExpectProblem(t, New(childtest.Objects(cl)).Sync(context.Background(), c, kit.Facts{}), etcdv1.ReasonNameConflict)
}
