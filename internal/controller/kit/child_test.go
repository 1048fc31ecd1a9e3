package kit

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

// A PVC or Service someone made under a name the operator needs has no managed-by label, so
// the label-scoped cache lacks it: GetChild must find it on the API server instead of
// reporting it absent (the operator would then "create" it and use someone else's object).
func TestGetChildSeesWhatTheLabelScopedCacheCannot(t *testing.T) {
	t.Parallel()
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = etcdv1.AddToScheme(scheme)
	meta := metav1.ObjectMeta{Namespace: "ns", Name: "db-1"}
	cached := fake.NewClientBuilder().WithScheme(scheme).Build()
	live := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		&corev1.PersistentVolumeClaim{ObjectMeta: meta},
		&corev1.Service{ObjectMeta: meta},
		&etcdv1.EtcdMember{ObjectMeta: meta},
	).Build()
	key := types.NamespacedName{Namespace: "ns", Name: "db-1"}
	ctx := context.Background()
	for _, obj := range []client.Object{&corev1.PersistentVolumeClaim{}, &corev1.Service{}} {
		if err := GetChild(ctx, cached, live, key, obj); err != nil {
			t.Errorf("%T made by someone else: %v, want it found on the API server", obj, err)
		}
	}
	// EtcdMembers are cached whole: the cache's answer stands, no API read.
	if err := GetChild(ctx, cached, live, key, &etcdv1.EtcdMember{}); !apierrors.IsNotFound(err) {
		t.Errorf("an EtcdMember absent from the whole-kind cache: %v, want NotFound from the cache", err)
	}
	// Without an API reader (unit tests on a plain client) the cache's answer stands.
	if err := GetChild(ctx, cached, nil, key, &corev1.PersistentVolumeClaim{}); !apierrors.IsNotFound(err) {
		t.Errorf("no API reader: %v, want NotFound", err)
	}
}
