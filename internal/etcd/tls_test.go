package etcd

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"testing"
	"time"

	"github.com/quorumkeeper/etcd-operator/internal/testpki"
)

func TestTLSClientCertificates(t *testing.T) {
	t.Parallel()
	pki := newTestPKI(t)
	proc := newMemberSpec(t, "tls0", "https",
		"--cert-file", pki.serverCert,
		"--key-file", pki.serverKey,
		"--trusted-ca-file", pki.caCert,
		"--client-cert-auth")
	proc.start(t, initialCluster([]*etcdMember{proc}), "new", "token-"+t.Name())

	withCert := newTestClient(t, Config{Endpoints: []string{proc.clientURL}, TLS: pki.clientTLS(t, true)})
	waitForLeader(t, withCert, proc.clientURL)
	_, members, err := withCert.MemberList(shortContext(t))
	if err != nil || len(members) != 1 || members[0].Name != "tls0" {
		t.Fatalf("MemberList with a client certificate = %+v, %v; want the one member", members, err)
	}
	if err := withCert.Healthy(shortContext(t), proc.clientURL); err != nil {
		t.Fatalf("Healthy with a client certificate: %v", err)
	}

	withoutCert := newTestClient(t, Config{Endpoints: []string{proc.clientURL}, TLS: pki.clientTLS(t, false)})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	if _, _, err := withoutCert.MemberList(ctx); err == nil {
		t.Fatal("MemberList without a client certificate succeeded against --client-cert-auth")
	}
}

// testPKI is a throwaway CA with a server certificate for 127.0.0.1 and a
// client certificate, written as PEM files for etcd's flags; rootCert is a client
// certificate with common name root (root itself once auth is on, as the legacy operator
// reaches etcd).
type testPKI struct {
	caCert, serverCert, serverKey, clientCert, clientKey string
	rootCert, rootKey                                    string
}

func newTestPKI(t *testing.T) testPKI {
	t.Helper()
	dir := t.TempDir()
	ca := testpki.NewCA(t)
	pki := testPKI{caCert: testpki.WriteFile(t, dir, "ca.crt", ca.PEM)}
	pki.serverCert, pki.serverKey = ca.Issue(t, testpki.Request{
		CommonName: "server", IPs: []string{"127.0.0.1"}, Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}).WriteFiles(t, dir, "server")
	pki.clientCert, pki.clientKey = ca.Issue(t, testpki.Request{
		CommonName: "client", Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}).WriteFiles(t, dir, "client")
	pki.rootCert, pki.rootKey = ca.Issue(t, testpki.Request{
		CommonName: RootUser, Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}).WriteFiles(t, dir, "root")
	return pki
}

// clientTLS trusts the test CA and, if withCert, presents the client certificate.
func (p testPKI) clientTLS(t *testing.T, withCert bool) *tls.Config {
	t.Helper()
	caPEM, err := os.ReadFile(p.caCert)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		t.Fatal("test CA does not parse")
	}
	cfg := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	if withCert {
		return p.clientTLSWith(t, p.clientCert, p.clientKey)
	}
	return cfg
}

// clientTLSWith trusts the test CA and presents the given certificate.
func (p testPKI) clientTLSWith(t *testing.T, certFile, keyFile string) *tls.Config {
	t.Helper()
	cfg := p.clientTLS(t, false)
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Certificates = []tls.Certificate{pair}
	return cfg
}
