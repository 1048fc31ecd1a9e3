package cluster

import (
	"context"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller/children/childtest"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
	"github.com/quorumkeeper/etcd-operator/internal/etcdaccess"
	"github.com/quorumkeeper/etcd-operator/internal/etcdfake"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
	"github.com/quorumkeeper/etcd-operator/internal/testpki"
)

// secureHarness is a harness whose reconciler opens etcd through the real
// etcdaccess.SecretClientFactory: the fake etcd checks the password the factory logs in with.
type secureHarness struct {
	*harness
	recorder *events.FakeRecorder
	mu       sync.Mutex
	opened   []etcd.Config // every configuration the factory opened a client with
}

// newSecureHarness builds a cluster edited by edit, over an API that knows cert-manager's
// kinds if certManager, holding objs.
func newSecureHarness(t *testing.T, certManager bool, edit func(*etcdv1.EtcdCluster), objs ...client.Object) *secureHarness {
	t.Helper()
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = etcdv1.AddToScheme(scheme)
	replicas := int32(3)
	size := resource.MustParse("1Gi")
	c := &etcdv1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns", UID: "0123456789abcdef"},
		Spec:       etcdv1.EtcdClusterSpec{Replicas: &replicas, Version: "3.6.16", Storage: etcdv1.StorageSpec{Size: &size}},
	}
	edit(c)
	builder := fake.NewClientBuilder().WithScheme(scheme).WithRESTMapper(restMapper(scheme, certManager))
	if !certManager {
		builder = builder.WithInterceptorFuncs(withoutCertManager())
	}
	api := builder.WithObjects(append([]client.Object{c}, objs...)...).
		WithStatusSubresource(&etcdv1.EtcdCluster{}, &etcdv1.EtcdMember{}).Build()
	h := &secureHarness{harness: &harness{t: t, api: api, etcd: etcdfake.New(), cluster: c}, recorder: events.NewFakeRecorder(200)}
	factory := &etcdaccess.SecretClientFactory{Reader: api, Open: h.open}
	h.r = &Reconciler{Client: api, Recorder: h.recorder, NewClient: factory.New}
	return h
}

func (h *secureHarness) open(cfg etcd.Config) (etcd.Client, error) {
	h.mu.Lock()
	h.opened = append(h.opened, cfg)
	h.mu.Unlock()
	if cfg.Username == "" {
		return etcdfake.KeepOpen(h.etcd), nil
	}
	return h.etcd.Login(cfg.Username, cfg.Password)
}

func (h *secureHarness) lastOpened() etcd.Config {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.opened) == 0 {
		h.t.Fatal("no etcd client was opened")
	}
	return h.opened[len(h.opened)-1]
}

// restMapper knows the scheme's kinds and, if certManager, cert-manager's: without them the
// API answers as one without cert-manager's CRDs does.
func restMapper(scheme *runtime.Scheme, certManager bool) meta.RESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	for gvk := range scheme.AllKnownTypes() {
		m.Add(gvk, meta.RESTScopeNamespace)
	}
	if certManager {
		m.Add(specs.CertificateGVK, meta.RESTScopeNamespace)
		m.Add(specs.IssuerGVK, meta.RESTScopeNamespace)
		m.Add(specs.ClusterIssuerGVK, meta.RESTScopeRoot)
	}
	return m
}

// withoutCertManager answers requests for cert-manager's kinds as the real client does when
// their CRDs are not installed: the REST mapper knows no such kind.
func withoutCertManager() interceptor.Funcs {
	noMatch := func(obj runtime.Object) error {
		gvk := obj.GetObjectKind().GroupVersionKind()
		if gvk.Group != specs.CertificateGVK.Group {
			return nil
		}
		return &meta.NoKindMatchError{GroupKind: gvk.GroupKind(), SearchedVersions: []string{gvk.Version}}
	}
	return interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if err := noMatch(obj); err != nil {
				return err
			}
			return c.Get(ctx, key, obj, opts...)
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if err := noMatch(obj); err != nil {
				return err
			}
			return c.Create(ctx, obj, opts...)
		},
	}
}

// events drains the recorded events.
func (h *secureHarness) events() []string { return childtest.Events(h.recorder) }

func (h *secureHarness) condition(condType string) metav1.Condition {
	h.t.Helper()
	cond := meta.FindStatusCondition(h.clusterObj().Status.Conditions, condType)
	if cond == nil {
		h.t.Fatalf("no condition %s in %+v", condType, h.clusterObj().Status.Conditions)
	}
	return *cond
}

// expectCondition checks a condition's status and reason, and that its message contains want.
func (h *secureHarness) expectCondition(condType string, status metav1.ConditionStatus, reason, want string) {
	h.t.Helper()
	cond := h.condition(condType)
	if cond.Status != status || cond.Reason != reason || !strings.Contains(cond.Message, want) {
		h.t.Fatalf("%s = %s/%s %q; want %s/%s containing %q", condType, cond.Status, cond.Reason, cond.Message, status, reason, want)
	}
}

func (h *secureHarness) create(obj client.Object) {
	h.t.Helper()
	if err := h.api.Create(context.Background(), obj); err != nil {
		h.t.Fatal(err)
	}
}

func (h *secureHarness) secret(name string) *corev1.Secret {
	h.t.Helper()
	s := &corev1.Secret{}
	if err := h.api.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: name}, s); err != nil {
		h.t.Fatal(err)
	}
	return s
}

func (h *secureHarness) setSecretData(name string, data map[string][]byte) {
	h.t.Helper()
	s := h.secret(name)
	s.Data = data
	if err := h.api.Update(context.Background(), s); err != nil {
		h.t.Fatal(err)
	}
}

func secret(name string, data map[string][]byte) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Data: data}
}

// caIssuer is the cert-manager Issuer "ca" in namespace ns, which certManagerSpec names,
// Ready or not.
func caIssuer(ready bool) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetGroupVersionKind(specs.IssuerGVK)
	u.SetName("ca")
	u.SetNamespace("ns")
	setReady(u, ready, "KeyPairVerified")
	return u
}

func setReady(u *unstructured.Unstructured, ready bool, reason string) {
	status := "False"
	if ready {
		status = "True"
	}
	_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"type": "Ready", "status": status, "reason": reason, "message": "test says " + status}}, "status", "conditions")
}

// tlsData is a kubernetes.io/tls Secret's data with a fresh certificate named cn.
func tlsData(t *testing.T, ca *testpki.CA, cn string) map[string][]byte {
	t.Helper()
	return ca.SecretData(t, testpki.Request{CommonName: cn})
}

func gvkList(gvk schema.GroupVersionKind) *unstructured.UnstructuredList {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	return l
}
