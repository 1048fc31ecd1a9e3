package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

// Kube is the user's view of the API server, with the user's own credentials.
type Kube struct {
	Config    *rest.Config
	Client    client.Client
	Namespace string
}

// Kube connects with kubectl's rules: --kubeconfig, $KUBECONFIG, ~/.kube/config, --context,
// -n, and kubectl's other connection flags (--as, --token, --request-timeout, ...).
func (o *Options) Kube() (*Kube, error) {
	cfg, err := o.restConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	ns, _, err := o.Kubectl.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig namespace: %w", err)
	}
	scheme, err := NewScheme()
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("client for %s: %w", cfg.Host, err)
	}
	return &Kube{Config: cfg, Client: c, Namespace: ns}, nil
}

// restConfig is kubectl's REST config for the flags, except that where nothing is configured
// (no kubeconfig, no --server, not in a Pod) it is clientcmd's "no configuration" error, as
// before the plugin took kubectl's flags, and not kubectl's guess of http://localhost:8080.
func (o *Options) restConfig() (*rest.Config, error) {
	cfg, err := o.Kubectl.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	rules, ok := o.Kubectl.ToRawKubeConfigLoader().ConfigAccess().(*clientcmd.ClientConfigLoadingRules)
	if ok && rules.IsDefaultConfig(cfg) && (o.Kubectl.APIServer == nil || *o.Kubectl.APIServer == "") {
		return clientcmd.NewDefaultClientConfig(*clientcmdapi.NewConfig(), &clientcmd.ConfigOverrides{}).ClientConfig()
	}
	return cfg, nil
}

// Cluster reads an EtcdCluster of the namespace.
func (k *Kube) Cluster(ctx context.Context, name string) (*etcdv1.EtcdCluster, error) {
	c := &etcdv1.EtcdCluster{}
	err := k.Client.Get(ctx, types.NamespacedName{Namespace: k.Namespace, Name: name}, c)
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("no EtcdCluster %q in namespace %q (kubectl get etcd -n %s lists them)", name, k.Namespace, k.Namespace)
	}
	return c, ExplainForbidden(err, "get etcdclusters.etcd-operator.cozystack.io")
}

// Members are a cluster's EtcdMembers by name.
func (k *Kube) Members(ctx context.Context, cluster string) ([]etcdv1.EtcdMember, error) {
	list := &etcdv1.EtcdMemberList{}
	err := k.Client.List(ctx, list, client.InNamespace(k.Namespace), client.MatchingLabels{etcdv1.LabelCluster: cluster})
	if err != nil {
		return nil, ExplainForbidden(err, "list etcdmembers.etcd-operator.cozystack.io")
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	return list.Items, nil
}

// Observe reads the cluster, its members and their Pods.
func (k *Kube) Observe(ctx context.Context, cluster string) (*etcdv1.EtcdCluster, []etcdv1.EtcdMember, map[string]corev1.Pod, error) {
	c, err := k.Cluster(ctx, cluster)
	if err != nil {
		return nil, nil, nil, err
	}
	members, err := k.Members(ctx, cluster)
	if err != nil {
		return nil, nil, nil, err
	}
	pods, err := k.Pods(ctx, cluster)
	if err != nil {
		return nil, nil, nil, err
	}
	return c, members, pods, nil
}

// Pods are a cluster's member Pods by name.
func (k *Kube) Pods(ctx context.Context, cluster string) (map[string]corev1.Pod, error) {
	list := &corev1.PodList{}
	err := k.Client.List(ctx, list, client.InNamespace(k.Namespace), client.MatchingLabels{etcdv1.LabelCluster: cluster})
	if err != nil {
		return nil, ExplainForbidden(err, "list pods")
	}
	out := make(map[string]corev1.Pod, len(list.Items))
	for _, p := range list.Items {
		out[p.Name] = p
	}
	return out, nil
}

// ExplainForbidden turns the API server's "forbidden" into what the user lacks.
func ExplainForbidden(err error, verb string) error {
	if err == nil || !apierrors.IsForbidden(err) {
		return err
	}
	return fmt.Errorf("your Kubernetes user may not %s in this namespace, which this command needs; "+
		"ask for that permission (kubectl auth can-i %s): %w", verb, verb, err)
}

// explainSecretError says which Secret could not be read and why the command needs it.
func explainSecretError(err error) error {
	if err == nil {
		return nil
	}
	if apierrors.IsForbidden(err) {
		return fmt.Errorf("your Kubernetes user may not read the cluster's Secrets (the CA, the operator's "+
			"client certificate and, with auth, root's password), which the plugin needs to talk to etcd with TLS; "+
			"ask for get on secrets in this namespace (kubectl auth can-i get secrets): %w", err)
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return fmt.Errorf("reading the cluster's TLS and auth Secrets: %w", err)
	}
	return err
}

// Replicas is the cluster's member count as the operator reads spec.replicas (3 when unset).
func Replicas(c *etcdv1.EtcdCluster) int32 {
	if c.Spec.Replicas == nil {
		return 3
	}
	return *c.Spec.Replicas
}

// PodReady is whether the Pod reports itself ready.
func PodReady(p corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// NewScheme knows Kubernetes' own kinds and the operator's.
func NewScheme() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	return scheme, etcdv1.AddToScheme(scheme)
}

// PatchCluster sets annotations (nil deletes one) and spec fields (nil: none) in one merge
// patch that carries the resourceVersion read, so a concurrent change makes it fail instead
// of being overwritten.
func (k *Kube) PatchCluster(ctx context.Context, c *etcdv1.EtcdCluster, annotations, spec map[string]any) error {
	meta := map[string]any{"resourceVersion": c.ResourceVersion}
	if annotations != nil {
		meta["annotations"] = annotations
	}
	patch := map[string]any{"metadata": meta}
	if spec != nil {
		patch["spec"] = spec
	}
	body, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	if err := k.Client.Patch(ctx, c, client.RawPatch("application/merge-patch+json", body)); err != nil {
		return ExplainForbidden(err, "patch etcdclusters.etcd-operator.cozystack.io")
	}
	return nil
}
