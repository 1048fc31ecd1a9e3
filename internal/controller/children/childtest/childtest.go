// Package childtest is what the component packages' tests share: a cluster and a fake API
// server that knows the operator's kinds.
package childtest

import (
	"context"
	"errors"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller/kit"
)

// Cluster is the EtcdCluster ns/db with three replicas.
func Cluster() *etcdv1.EtcdCluster {
	replicas := int32(3)
	return &etcdv1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns", UID: "0123456789abcdef"},
		Spec:       etcdv1.EtcdClusterSpec{Replicas: &replicas, Version: "3.6.16"},
	}
}

var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = etcdv1.AddToScheme(s)
	return s
}()

// Client is a fake API server holding objs, its calls passed through funcs. The EtcdCluster's
// status is a subresource, as the components that set conditions write it.
func Client(funcs interceptor.Funcs, objs ...client.Object) client.Client {
	return fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithInterceptorFuncs(funcs).
		WithStatusSubresource(&etcdv1.EtcdCluster{}).Build()
}

// Objects is the child objects of a cluster on cl, with no API reader apart from the cache.
func Objects(cl client.Client) kit.Objects { return kit.Objects{Client: cl} }

// Get reads the object ns/name from cl.
func Get(cl client.Client, name string, obj client.Object) error {
	return cl.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: name}, obj)
}

// Owned makes obj controlled by c, as the components create their objects.
func Owned[T client.Object](t *testing.T, c *etcdv1.EtcdCluster, obj T) T {
	t.Helper()
	if err := controllerutil.SetControllerReference(c, obj, scheme); err != nil {
		t.Fatal(err)
	}
	return obj
}

// ExpectProblem fails unless err is a degraded kit.Waiting for reason.
func ExpectProblem(t *testing.T, err error, reason string) {
	t.Helper()
	expectWaiting(t, err, reason, true)
}

// ExpectWait fails unless err is a kit.Waiting for reason that does not degrade the cluster:
// it holds members back until something is in place.
func ExpectWait(t *testing.T, err error, reason string) {
	t.Helper()
	expectWaiting(t, err, reason, false)
}

func expectWaiting(t *testing.T, err error, reason string, degraded bool) {
	t.Helper()
	var w kit.Waiting
	if !errors.As(err, &w) || w.Degraded != degraded || w.Reason != reason {
		t.Fatalf("error %v, want a wait %s (degraded %v)", err, reason, degraded)
	}
}

// Condition is the condition condType of the cluster ns/db as cl holds it; nil when it has none.
func Condition(t *testing.T, cl client.Client, condType string) *metav1.Condition {
	t.Helper()
	c := &etcdv1.EtcdCluster{}
	if err := Get(cl, "db", c); err != nil {
		t.Fatal(err)
	}
	return meta.FindStatusCondition(c.Status.Conditions, condType)
}

// Events drains what rec recorded, each as "type reason message".
func Events(rec *events.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}
