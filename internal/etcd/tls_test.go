package etcd

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
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
// client certificate, written as PEM files for etcd's flags.
type testPKI struct {
	caCert, serverCert, serverKey, clientCert, clientKey string
}

func newTestPKI(t *testing.T) testPKI {
	t.Helper()
	dir := t.TempDir()
	caKey := newKey(t)
	caTemplate := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "etcd-operator test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER := signCert(t, caTemplate, caTemplate, caKey, caKey)
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	pki := testPKI{caCert: writePEM(t, dir, "ca.crt", "CERTIFICATE", caDER)}
	pki.serverCert, pki.serverKey = issueLeaf(t, dir, "server", ca, caKey, x509.ExtKeyUsageServerAuth)
	pki.clientCert, pki.clientKey = issueLeaf(t, dir, "client", ca, caKey, x509.ExtKeyUsageClientAuth)
	return pki
}

func issueLeaf(t *testing.T, dir, name string, ca *x509.Certificate, caKey *ecdsa.PrivateKey, usage x509.ExtKeyUsage) (certPath, keyPath string) {
	t.Helper()
	key := newKey(t)
	template := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
	}
	der := signCert(t, template, ca, key, caKey)
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return writePEM(t, dir, name+".crt", "CERTIFICATE", der), writePEM(t, dir, name+".key", "EC PRIVATE KEY", keyDER)
}

func newKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func signCert(t *testing.T, template, parent *x509.Certificate, key, parentKey *ecdsa.PrivateKey) []byte {
	t.Helper()
	der, err := x509.CreateCertificate(rand.Reader, template, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func writePEM(t *testing.T, dir, name, blockType string, der []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: blockType, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
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
		pair, err := tls.LoadX509KeyPair(p.clientCert, p.clientKey)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg
}
