package cluster

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

func (h *harness) addCluster(name, uid string) {
	h.t.Helper()
	c := h.cluster.DeepCopy()
	c.ObjectMeta = metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(uid)}
	c.Status = etcdv1.EtcdClusterStatus{}
	if err := h.api.Create(context.Background(), c); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) reconcileNamed(name string) {
	h.t.Helper()
	if _, err := h.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: name}}); err != nil {
		h.t.Fatalf("reconcile %s: %v", name, err)
	}
}

func (h *harness) conditionOf(cluster, condType string) metav1.Condition {
	h.t.Helper()
	c := &etcdv1.EtcdCluster{}
	if err := h.api.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: cluster}, c); err != nil {
		h.t.Fatal(err)
	}
	cond := meta.FindStatusCondition(c.Status.Conditions, condType)
	if cond == nil {
		h.t.Fatalf("%s has no condition %s: %+v", cluster, condType, c.Status.Conditions)
	}
	return *cond
}

func (h *harness) membersOf(cluster string) int {
	h.t.Helper()
	list := &etcdv1.EtcdMemberList{}
	if err := h.api.List(context.Background(), list, client.MatchingLabels{etcdv1.LabelCluster: cluster}); err != nil {
		h.t.Fatal(err)
	}
	return len(list.Items)
}

// Clusters "db" and "db-client" both need the Service "db-client". Whichever comes second is
// refused with a condition naming the Service and its owner, and creates no member whose DNS
// name would resolve to the other cluster's Pods; the first keeps its Service untouched.
func TestClustersWhoseServicesCollideAreRefused(t *testing.T) {
	for _, tc := range []struct{ first, second string }{{"db", "db-client"}, {"db-client", "db"}} {
		t.Run(tc.second+" after "+tc.first, func(t *testing.T) {
			h := newHarness(t)
			if tc.first != "db" {
				if err := h.api.Delete(context.Background(), h.clusterObj()); err != nil {
					t.Fatal(err)
				}
				h.addCluster("db-client", "first-uid")
				h.reconcileNamed("db-client")
				h.addCluster("db", "second-uid")
			} else {
				h.reconcileNamed("db")
				h.addCluster("db-client", "second-uid")
			}
			svc := &corev1.Service{}
			if err := h.api.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "db-client"}, svc); err != nil {
				t.Fatal(err)
			}
			before := svc.DeepCopy()
			h.reconcileNamed(tc.second)

			if n := h.membersOf(tc.second); n != 0 {
				t.Fatalf("%s created %d members although its Service is another cluster's", tc.second, n)
			}
			deg := h.conditionOf(tc.second, etcdv1.ConditionDegraded)
			if deg.Status != metav1.ConditionTrue || deg.Reason != etcdv1.ReasonNameConflict ||
				!strings.Contains(deg.Message, "Service db-client") || !strings.Contains(deg.Message, "EtcdCluster "+tc.first) {
				t.Fatalf("Degraded = %s/%s %q; want NameConflict naming Service db-client and EtcdCluster %s", deg.Status, deg.Reason, deg.Message, tc.first)
			}
			if p := h.conditionOf(tc.second, etcdv1.ConditionProgressing); p.Reason == "Idle" {
				t.Fatalf("Progressing says %q while the cluster cannot be built", p.Message)
			}
			if err := h.api.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "db-client"}, svc); err != nil {
				t.Fatal(err)
			}
			if svc.ResourceVersion != before.ResourceVersion {
				t.Fatalf("the first cluster's Service was changed: %v -> %v", before.Spec.Selector, svc.Spec.Selector)
			}
		})
	}
}

// harnessWith is a harness whose fake API answers through funcs.
func harnessWith(t *testing.T, funcs interceptor.Funcs) *harness {
	h := newHarness(t)
	scheme := h.api.Scheme()
	h.api = fake.NewClientBuilder().WithScheme(scheme).WithObjects(h.cluster).WithInterceptorFuncs(funcs).
		WithStatusSubresource(&etcdv1.EtcdCluster{}, &etcdv1.EtcdMember{}).Build()
	h.r.Client = h.api
	return h
}

// A child object the API server refuses (a quota) or fails to store (its Service CIDR used
// up) holds the cluster back: Degraded says which object and why, rather than a status that
// stays empty or a line in the operator's log.
func TestAChildObjectTheAPIServerRefusesIsReportedInDegraded(t *testing.T) {
	for _, tc := range []struct {
		name, object, cause string
		refuse              func(obj client.Object) error // nil: stored
	}{
		{"quota", "EtcdMember db-1", "exceeded quota", func(obj client.Object) error {
			if _, ok := obj.(*etcdv1.EtcdMember); !ok {
				return nil
			}
			return apierrors.NewForbidden(schema.GroupResource{Group: etcdv1.GroupVersion.Group, Resource: "etcdmembers"}, obj.GetName(),
				errorString("exceeded quota: objects, requested: count/etcdmembers.etcd-operator.cozystack.io=1"))
		}},
		{"service range full", "Service db-client", "range is full", func(obj client.Object) error {
			if obj.GetName() != "db-client" {
				return nil
			}
			return apierrors.NewInternalError(errorString(`failed to allocate a serviceIP for Service "db-client": range is full`))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := harnessWith(t, interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				if err := tc.refuse(obj); err != nil {
					return err
				}
				return c.Create(ctx, obj, opts...)
			}})
			h.reconcile()
			deg := h.conditionOf("db", etcdv1.ConditionDegraded)
			if deg.Status != metav1.ConditionTrue || deg.Reason != etcdv1.ReasonObjectRefused ||
				!strings.Contains(deg.Message, tc.object) || !strings.Contains(deg.Message, tc.cause) {
				t.Fatalf("Degraded = %s/%s %q; want ObjectRefused naming %s and %q", deg.Status, deg.Reason, deg.Message, tc.object, tc.cause)
			}
		})
	}
}

type errorString string

func (e errorString) Error() string { return string(e) }
