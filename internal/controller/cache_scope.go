package controller

import (
	"context"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// LabelScoped are the kinds the manager caches only with the operator's managed-by label
// (cmd/etcd-operator's cacheOptions): the ones the operator makes for its clusters. Other
// objects of these kinds (other workloads', or one a person made under a name the operator
// needs) are not in the cache.
func LabelScoped() []client.Object {
	return []client.Object{&corev1.Pod{}, &corev1.PersistentVolumeClaim{}, &corev1.Service{}, &policyv1.PodDisruptionBudget{}}
}

func labelScoped(obj client.Object) bool {
	for _, kind := range LabelScoped() {
		if reflect.TypeOf(kind) == reflect.TypeOf(obj) {
			return true
		}
	}
	return false
}

// getChild reads a child object by name from the cache and, when the cache has none of a
// label-scoped kind, from the API server: an object of that name without the operator's label
// must be seen (and refused as a NameConflict), not taken for absent and "created" over. The
// operator's own objects are in the cache, so a cluster at rest costs no read.
func getChild(ctx context.Context, cached, live client.Reader, key types.NamespacedName, obj client.Object) error {
	err := cached.Get(ctx, key, obj)
	if apierrors.IsNotFound(err) && live != nil && labelScoped(obj) {
		return live.Get(ctx, key, obj)
	}
	return err
}
