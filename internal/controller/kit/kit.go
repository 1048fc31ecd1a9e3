// Package kit holds what the operator's reconcilers share: the etcd client factory and its
// cache, events, roll slots and the operator's own namespace. It is a leaf: it imports no
// other package under internal/controller, so that the reconcilers and the kubectl plugin
// can use it without linking each other.
package kit

import (
	"context"
	"fmt"
	"os"
	"strings"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
	"github.com/quorumkeeper/etcd-operator/internal/metrics"
)

// ClientFactory opens an etcd client for a cluster; tests replace it with a fake.
type ClientFactory func(ctx context.Context, c *etcdv1.EtcdCluster, endpoints []string) (etcd.Client, error)

// Emit records an event about regarding (and related, when not nil) and logs it, so that the
// operator's other controllers (defragmentation, NOSPACE remediation) speak as this one does.
// rec may be nil in tests.
func Emit(rec events.EventRecorder, regarding, related client.Object, eventType, reason, action, format string, args ...any) {
	var rel runtime.Object
	kv := []any{"object", regarding.GetNamespace() + "/" + regarding.GetName(), "kind", fmt.Sprintf("%T", regarding), "reason", reason}
	if related != nil {
		rel = related
		kv = append(kv, "related", related.GetName())
	}
	if rec != nil {
		rec.Eventf(regarding, rel, eventType, reason, action, format, args...)
	}
	metrics.Event(eventType, reason)
	log.Log.WithName("events").Info(fmt.Sprintf(format, args...), kv...)
}

// OperatorNamespace is the namespace of the operator's Pod, read from its service account
// mount; "" outside a Pod.
func OperatorNamespace() string {
	b, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// LabelScoped are the kinds the manager caches only with the operator's managed-by label
// (cmd/etcd-operator's cacheOptions): the ones the operator makes for its clusters. Other
// objects of these kinds (other workloads', or one a person made under a name the operator
// needs) are not in the cache.
func LabelScoped() []client.Object {
	return []client.Object{&corev1.Pod{}, &corev1.PersistentVolumeClaim{}, &corev1.Service{}, &policyv1.PodDisruptionBudget{}}
}

// RecoveryKeyPrefix begins the loss statement of a recovery from member source, which
// Progressing carries once the operator took the request up (kubectl etcd recover waits for it).
func RecoveryKeyPrefix(source string) string {
	return "recovering from member " + source + " at revision "
}

// SnapshotRecoveryKeyPrefix begins the loss statement of a recovery from EtcdSnapshot name,
// which Progressing carries once the operator took the request up (kubectl etcd recover
// waits for it).
func SnapshotRecoveryKeyPrefix(name string) string {
	return "restoring EtcdSnapshot " + name + " at revision "
}
