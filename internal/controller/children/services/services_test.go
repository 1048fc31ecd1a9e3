package services

import (
	"context"
	"reflect"
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

// A cluster adopted with every member under the legacy headless Service keeps both legacy
// Services it was given (now its own): the headless one becomes this operator's headless
// Service (its selector, every member's address), the one named after the cluster a client
// Service of ready members; the cluster's own client Service is made beside them.
func TestSyncKeepsTheAdoptedServices(t *testing.T) {
	t.Parallel()
	ctx, c := context.Background(), childtest.Cluster()
	c.Annotations = map[string]string{etcdv1.AnnotationAdoptedSubdomain: "db-headless=db-0," + etcdv1.AdoptedSubdomainEveryMember}
	legacySelector := map[string]string{"app.kubernetes.io/instance": "db"}
	headless := childtest.Owned(t, c, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "db-headless", Namespace: "ns"},
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: legacySelector}})
	legacyClient := childtest.Owned(t, c, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns"},
		Spec: corev1.ServiceSpec{ClusterIP: "10.0.0.7", Selector: legacySelector}})
	cl := childtest.Client(interceptor.Funcs{}, headless, legacyClient)
	if err := New(childtest.Objects(cl)).Sync(ctx, c, kit.Facts{}); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]*corev1.Service{"db-headless": specs.HeadlessService(c), "db": specs.AdoptedClientService(c), "db-client": specs.ClientService(c)} {
		have := &corev1.Service{}
		if err := childtest.Get(cl, name, have); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(have.Spec.Selector, want.Spec.Selector) || have.Spec.PublishNotReadyAddresses != want.Spec.PublishNotReadyAddresses {
			t.Errorf("Service %s: selector %v, publishNotReady %t; want %v, %t", name, have.Spec.Selector, have.Spec.PublishNotReadyAddresses, want.Spec.Selector, want.Spec.PublishNotReadyAddresses)
		}
	}
	have := &corev1.Service{}
	if err := childtest.Get(cl, "db", have); err != nil || have.Spec.ClusterIP != "10.0.0.7" || have.Spec.PublishNotReadyAddresses {
		t.Errorf("the legacy client Service db: %v, cluster IP %q, publishNotReady %t; want its cluster IP kept, ready members only", err, have.Spec.ClusterIP, have.Spec.PublishNotReadyAddresses)
	}
}
