package kit

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

// An object read through a typed client has no TypeMeta: its Kind comes from the scheme, and
// only an object the scheme cannot name is logged by its Go type.
func TestKindOfNamesTheAPIKindNotTheGoType(t *testing.T) {
	for want, obj := range map[string]runtime.Object{
		"EtcdCluster": &etcdv1.EtcdCluster{}, "EtcdMember": &etcdv1.EtcdMember{}, "Pod": &corev1.Pod{},
		"*v1.PartialObjectMetadata": &metav1.PartialObjectMetadata{},
	} {
		if got := KindOf(obj); got != want {
			t.Errorf("KindOf(%T) = %q, want %q", obj, got, want)
		}
	}
}
