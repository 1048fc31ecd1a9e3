package etcdaccess

import (
	"context"
	"crypto/x509"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
	"github.com/quorumkeeper/etcd-operator/internal/testpki"
)

// While a CA rotation is under way the operator's client trusts the bundle's server CAs
// beside the server Secret's ca.crt (a member whose Secret volume is not updated yet serves
// the old certificate); before and after, the Secret's alone.
func TestClientTrustsTheBundlesServerCAsDuringARotation(t *testing.T) {
	oldCA, newCA := testpki.NewCA(t), testpki.NewCA(t)
	c := &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns"}, Spec: etcdv1.EtcdClusterSpec{
		TLS: &etcdv1.EtcdClusterTLS{Client: &etcdv1.ClientTLS{CertManager: &etcdv1.ClientCertManager{ServerIssuerRef: etcdv1.IssuerReference{Name: "ca-2"}}}},
	}}
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	server := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db-server-tls", Namespace: "ns"}, Data: newCA.SecretData(t, testpki.Request{CommonName: "s"})}
	bundle := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: specs.CABundleSecretName("db"), Namespace: "ns"},
		Data: map[string][]byte{specs.CABundleKeyServer: append(append([]byte{}, oldCA.PEM...), newCA.PEM...)}}
	api := fake.NewClientBuilder().WithScheme(scheme).WithObjects(server, bundle).Build()
	var opened etcd.Config
	f := &SecretClientFactory{Reader: api, Open: func(cfg etcd.Config) (etcd.Client, error) { opened = cfg; return nil, nil }}
	trusts := func(ca *testpki.CA) bool {
		leaf := ca.Issue(t, testpki.Request{CommonName: "member", DNSNames: []string{"db-1.db.ns.svc"}})
		_, err := leaf.Cert.Verify(x509.VerifyOptions{Roots: opened.TLS.RootCAs, DNSName: "db-1.db.ns.svc"})
		return err == nil
	}
	for _, tc := range []struct {
		stage string
		old   bool
	}{{"", false}, {etcdv1.ReasonTrustingBoth, true}, {etcdv1.ReasonReissuingOnNewCA, true}, {etcdv1.ReasonCARotated, false}} {
		c.Status.CARotation = nil
		if tc.stage != "" {
			c.Status.CARotation = &etcdv1.CARotationStatus{Stage: tc.stage}
		}
		if _, err := f.New(context.Background(), c, []string{"https://db-1.db.ns.svc:2379"}); err != nil {
			t.Fatal(err)
		}
		if got := []bool{trusts(oldCA), trusts(newCA)}; !slices.Equal(got, []bool{tc.old, true}) {
			t.Errorf("stage %q: trusts old, new = %v; want %v, true", tc.stage, got, tc.old)
		}
	}
}
