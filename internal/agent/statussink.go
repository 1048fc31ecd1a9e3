package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/snapshotstore"
)

// statusSink writes the progress into the EtcdSnapshot's status.progress with a merge patch
// of that field alone: the operator's own status writes carry the resourceVersion they read,
// so neither undoes the other. The agent's Role allows exactly this patch
// (specs.SnapshotAgentAccess).
type statusSink struct {
	cl              client.Client
	namespace, name string
}

// Report implements ProgressSink.
func (s statusSink) Report(ctx context.Context, p etcdv1.SnapshotProgress) error {
	body, err := json.Marshal(map[string]any{"status": map[string]any{"progress": p}})
	if err != nil {
		return err
	}
	snap := &etcdv1.EtcdSnapshot{ObjectMeta: metav1.ObjectMeta{Namespace: s.namespace, Name: s.name}}
	return s.cl.Status().Patch(ctx, snap, client.RawPatch(types.MergePatchType, body))
}

// progressSink is where the snapshot agent reports: the EtcdSnapshot's status when the
// request asks for it; nil (none) when it does not, or when the Pod has no API access, which
// is said on stderr: the snapshot goes on without its progress.
func progressSink(report bool, owner string) ProgressSink {
	if !report {
		return nil
	}
	cl, err := inClusterClient()
	if err == nil {
		var sink statusSink
		if sink, err = newStatusSink(cl, owner); err == nil {
			return sink
		}
	}
	fmt.Fprintf(os.Stderr, "the progress is not reported: %v\n", err)
	return nil
}

// newStatusSink writes to the status of the EtcdSnapshot owner names (snapshotstore.OwnerOf)
// through cl.
func newStatusSink(cl client.Client, owner string) (statusSink, error) {
	namespace, name, _, ok := snapshotstore.ParseOwner(owner)
	if !ok {
		return statusSink{}, fmt.Errorf("--owner %q names no EtcdSnapshot", owner)
	}
	return statusSink{cl: cl, namespace: namespace, name: name}, nil
}

// apiTimeout bounds each request of the agent's API client.
const apiTimeout = 10 * time.Second

// inClusterClient is a client of the API server with the Pod's ServiceAccount token. Its
// kinds are mapped ahead, so it asks the API server for nothing but the patches (no discovery).
func inClusterClient() (client.Client, error) {
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, err
	}
	cfg.Timeout = apiTimeout
	scheme := runtime.NewScheme()
	if err := etcdv1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{etcdv1.GroupVersion})
	mapper.Add(etcdv1.GroupVersion.WithKind("EtcdSnapshot"), meta.RESTScopeNamespace)
	mapper.Add(etcdv1.GroupVersion.WithKind("EtcdSnapshotSchedule"), meta.RESTScopeNamespace)
	return client.New(cfg, client.Options{Scheme: scheme, Mapper: mapper})
}
