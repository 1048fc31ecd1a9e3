package controller

import (
	"context"
	"reflect"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumkeeper/etcd-operator/internal/controller/kit"
)

func labelScoped(obj client.Object) bool {
	for _, kind := range kit.LabelScoped() {
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
