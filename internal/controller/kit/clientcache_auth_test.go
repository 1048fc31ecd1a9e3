package kit

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
	"github.com/quorumkeeper/etcd-operator/internal/etcdaccess"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
	"github.com/quorumkeeper/etcd-operator/internal/testetcd"
	"github.com/quorumkeeper/etcd-operator/internal/testpki"
)

// TestCachedClientReachesEtcdAsRootOnceSomeoneElseTurnsAuthOn is the Cozystack takeover as the
// operator's client cache lived it, against a real etcd with mutual TLS: the operator looks at
// a cluster with spec.auth while Cozystack's operator has not turned auth on yet (root's
// password goes unused: no token), then Cozystack's operator turns it on with that password.
// The next look must reach etcd as root; a kept tokenless client got "etcd auth status: user
// name not found", etcd taking it for its certificate's common name, and nothing that client
// depends on changed to have it rebuilt.
func TestCachedClientReachesEtcdAsRootOnceSomeoneElseTurnsAuthOn(t *testing.T) {
	const password = "cozystack-root-password"
	ca := testpki.NewCA(t)
	endpoint := startTLSEtcd(t, ca)
	c := &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "cz", Namespace: "ns", UID: "uid-cz"}}
	c.Spec.TLS = &etcdv1.EtcdClusterTLS{Client: &etcdv1.ClientTLS{
		ServerSecretRef:         &corev1.LocalObjectReference{Name: "cz-server-tls"},
		OperatorClientSecretRef: &corev1.LocalObjectReference{Name: "cz-operator-tls"},
	}}
	c.Spec.Auth = &etcdv1.AuthSpec{Enabled: true, RootCredentialsSecretRef: &corev1.LocalObjectReference{Name: "cz-root"}}
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	api := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		cacheSecret("cz-server-tls", map[string][]byte{specs.SecretKeyCA: ca.PEM}),
		cacheSecret("cz-operator-tls", ca.SecretData(t, testpki.Request{CommonName: specs.OperatorClientCommonName})),
		cacheSecret("cz-root", map[string][]byte{etcdaccess.RootUsernameKey: []byte(etcd.RootUser), etcdaccess.RootPasswordKey: []byte(password)}),
	).Build()
	cache := NewClientCache(api, etcdaccess.NewSecretClientFactory(api))
	t.Cleanup(func() { cache.Forget(client.ObjectKeyFromObject(c)) })
	look := func() (bool, error) {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		cli, err := cache.Client(ctx, c, []string{endpoint})
		if err != nil {
			return false, err
		}
		defer func() { _ = cli.Close() }()
		return cli.AuthStatus(ctx)
	}
	legacy := etcdClientAs(t, ca, endpoint, "cozystack")
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if _, err := legacy.Get(ctx, "ready"); err != nil { // waits for etcd to serve
		t.Fatal(err)
	}
	if on, err := look(); err != nil || on {
		t.Fatalf("auth status before auth is on: %v, %v", on, err)
	}

	// Cozystack's operator turns auth on, root with the password of cz-root.
	for _, step := range []func() error{
		func() error { _, err := legacy.UserAdd(ctx, etcd.RootUser, password); return err },
		func() error { _, err := legacy.UserGrantRole(ctx, etcd.RootUser, etcd.RootRole); return err },
		func() error { _, err := legacy.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}

	if on, err := look(); err != nil || !on {
		t.Fatalf("auth status at the first look after auth came on: %v, %v; want on, asked as root", on, err)
	}
	if on, err := look(); err != nil || !on {
		t.Fatalf("auth status through the kept client: %v, %v", on, err)
	}
}

// startTLSEtcd runs a one-member etcd of the test bed's release, serving clients over TLS
// with --client-cert-auth, and returns its client URL.
func startTLSEtcd(t *testing.T, ca *testpki.CA) string {
	t.Helper()
	dir := t.TempDir()
	caFile := testpki.WriteFile(t, dir, "ca.crt", ca.PEM)
	certFile, keyFile := ca.Issue(t, testpki.Request{CommonName: "server", IPs: []string{"127.0.0.1"}}).WriteFiles(t, dir, "server")
	clientURL := fmt.Sprintf("https://127.0.0.1:%d", testetcd.FreePort(t))
	testetcd.Run(t, "m", filepath.Join(dir, "data"), clientURL, fmt.Sprintf("http://127.0.0.1:%d", testetcd.FreePort(t)),
		"--cert-file="+certFile, "--key-file="+keyFile, "--trusted-ca-file="+caFile, "--client-cert-auth")
	return clientURL
}

// etcdClientAs is a client with a certificate of common name cn, which waits for etcd to serve.
func etcdClientAs(t *testing.T, ca *testpki.CA, endpoint, cn string) *clientv3.Client {
	t.Helper()
	dir := t.TempDir()
	certFile, keyFile := ca.Issue(t, testpki.Request{CommonName: cn}).WriteFiles(t, dir, cn)
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		TLS: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}})
	if err != nil {
		t.Fatal(fmt.Errorf("client as %s: %w", cn, err))
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}
