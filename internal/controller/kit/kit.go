// Package kit holds what the operator's reconcilers share: the etcd client factory and its
// cache, events, roll slots and the operator's own namespace; and, for the cluster and member
// reconcilers, what a member's Pod says and the quorum a removal must keep. It is a leaf: it
// imports no other package under internal/controller, so that the reconcilers can use it
// without linking each other.
package kit

import (
	"context"
	"fmt"
	"os"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
	"github.com/quorumkeeper/etcd-operator/internal/metrics"
)

// ClientFactory opens an etcd client for a cluster; tests replace it with a fake.
type ClientFactory func(ctx context.Context, c *etcdv1.EtcdCluster, endpoints []string) (etcd.Client, error)

// Emit records an event about regarding (and related, when not nil) and logs it, so that the
// operator's other controllers (defragmentation, NOSPACE remediation) speak as this one does.
// The line goes through ctx's logger: inside a reconcile it carries the controller, the object
// reconciled and the reconcile ID, so that an event reads in the log next to what led to it.
// rec may be nil in tests.
func Emit(ctx context.Context, rec events.EventRecorder, regarding, related client.Object, eventType, reason, action, format string, args ...any) {
	var rel runtime.Object
	if related != nil {
		rel = related
	}
	if rec != nil {
		rec.Eventf(regarding, rel, eventType, reason, action, format, args...)
	}
	metrics.Event(eventType, reason)
	LogEvent(ctx, regarding, related, eventType, reason, format, args...)
}

// LogEvent writes an event to ctx's logger, as Emit does, for the controllers that record
// their events themselves (EtcdSnapshot, EtcdSnapshotSchedule, which metrics do not count).
// related may be nil. Warning events are logged at Info as well: they are news, not errors
// of the operator.
func LogEvent(ctx context.Context, regarding, related client.Object, eventType, reason, format string, args ...any) {
	kv := []any{"object", klog.KObj(regarding), "kind", KindOf(regarding), "type", eventType, "reason", reason}
	if related != nil {
		kv = append(kv, "related", klog.KObj(related), "relatedKind", KindOf(related))
	}
	log.FromContext(ctx).WithName("events").Info(fmt.Sprintf(format, args...), kv...)
}

// WithCluster names, in ctx's logger, the EtcdCluster a reconciled object (member, snapshot,
// defragmentation) serves, under the key controller-runtime gives a reconciled EtcdCluster:
// one grep on the cluster's name then finds the lines of all the controllers that acted for it.
func WithCluster(ctx context.Context, namespace, cluster string) context.Context {
	return log.IntoContext(ctx, log.FromContext(ctx).WithValues("EtcdCluster", klog.KRef(namespace, cluster)))
}

// kinds knows the API kinds of the objects the operator records events about: those of
// Kubernetes and the operator's own.
var kinds = func() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(etcdv1.AddToScheme(s))
	return s
}()

// KindOf is obj's API kind (EtcdCluster), as kubectl and the events name it; objects read
// through a typed client carry no TypeMeta, so it comes from the scheme. An object of a type
// the scheme does not know is named by its Go type.
func KindOf(obj runtime.Object) string {
	gvk, err := apiutil.GVKForObject(obj, kinds)
	if err != nil {
		return fmt.Sprintf("%T", obj)
	}
	return gvk.Kind
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
	return []client.Object{&corev1.Pod{}, &corev1.PersistentVolumeClaim{}, &corev1.Service{}, &policyv1.PodDisruptionBudget{}, &appsv1.Deployment{}}
}
