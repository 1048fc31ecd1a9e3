package localcluster

import (
	"bytes"
	"crypto/x509"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
)

func TestPKIReusesCAAndMatchingLeaves(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	first, err := loadOrCreatePKI(dir)
	if err != nil {
		t.Fatal(err)
	}
	spec := serverSpec("apiserver", "kube-apiserver", []netip.Addr{netip.MustParseAddr("127.0.0.1")}, []string{"kubernetes"})
	certFile, _, err := first.ensureLeaf(spec)
	if err != nil {
		t.Fatal(err)
	}
	leafBefore := readFile(t, certFile)

	second, err := loadOrCreatePKI(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !second.caCert.Equal(first.caCert) {
		t.Fatal("second load created a new CA instead of reusing the one on disk")
	}
	if _, _, err := second.ensureLeaf(spec); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(readFile(t, certFile), leafBefore) {
		t.Fatal("a still matching leaf was issued again")
	}

	spec.ips = append(spec.ips, netip.MustParseAddr("10.213.0.1"))
	if _, _, err := second.ensureLeaf(spec); err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(readFile(t, certFile), leafBefore) {
		t.Fatal("leaf lacking a required SAN was reused")
	}
	verifyServing(t, second, certFile, "10.213.0.1")
}

func TestIssueServingCertIsSignedByClusterCA(t *testing.T) {
	p, err := loadOrCreatePKI(filepath.Join(t.TempDir(), "pki"))
	if err != nil {
		t.Fatal(err)
	}
	cp := &ControlPlane{pki: p}
	certFile, keyFile, err := cp.IssueServingCert("node-0", []netip.Addr{netip.MustParseAddr("10.213.0.1")}, []string{"node-0"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := loadPair(certFile, keyFile); err != nil {
		t.Fatalf("issued pair does not load: %v", err)
	}
	verifyServing(t, p, certFile, "10.213.0.1")
	verifyServing(t, p, certFile, "node-0")
	if info, err := os.Stat(keyFile); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode: %v %v", info.Mode(), err)
	}
	if _, _, err := cp.IssueServingCert("../escape", nil, nil); err == nil {
		t.Fatal("a name with a path separator was accepted")
	}
}

func TestClientCertCarriesUserAndGroups(t *testing.T) {
	p, err := loadOrCreatePKI(filepath.Join(t.TempDir(), "pki"))
	if err != nil {
		t.Fatal(err)
	}
	certFile, _, err := p.ensureLeaf(clientSpec("admin", "admin", "system:masters"))
	if err != nil {
		t.Fatal(err)
	}
	cert, err := loadCert(certFile)
	if err != nil {
		t.Fatal(err)
	}
	if cert.Subject.CommonName != "admin" || len(cert.Subject.Organization) != 1 || cert.Subject.Organization[0] != "system:masters" {
		t.Fatalf("subject = %v", cert.Subject)
	}
	roots := x509.NewCertPool()
	roots.AddCert(p.caCert)
	opts := x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if _, err := cert.Verify(opts); err != nil {
		t.Fatalf("client certificate does not verify for client auth: %v", err)
	}
}

func verifyServing(t *testing.T, p *pki, certFile, host string) {
	t.Helper()
	cert, err := loadCert(certFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(p.caCert)
	opts := x509.VerifyOptions{Roots: roots, DNSName: host, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	if _, err := cert.Verify(opts); err != nil {
		t.Fatalf("%s does not verify for %s: %v", certFile, host, err)
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
