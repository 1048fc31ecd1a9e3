// Package testpki makes throwaway certificate authorities and certificates for tests: etcd
// processes, Secrets for the controllers, and the end-to-end bring-your-own-certificate case.
package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// CA signs certificates.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
	PEM  []byte // the CA certificate, as ca.crt holds it
}

// Request says what a certificate is for.
type Request struct {
	CommonName string
	DNSNames   []string
	IPs        []string
	// Usages default to server and client auth, what etcd members need on either port.
	Usages []x509.ExtKeyUsage
	// NotAfter ends the certificate's validity; a day from now when zero.
	NotAfter time.Time
}

// Leaf is an issued certificate with its key.
type Leaf struct {
	Cert    *x509.Certificate
	CertPEM []byte
	KeyPEM  []byte
}

// serial makes every certificate of a test run distinct, so a test can tell a renewed
// certificate from the one before.
var serial atomic.Int64

func init() { serial.Store(time.Now().UnixNano()) }

// NewCA makes a CA valid from an hour ago for a day.
func NewCA(t testing.TB) *CA {
	t.Helper()
	return NewCANamed(t, "etcd-operator test CA")
}

// NewCANamed is NewCA with its own subject: a TLS server names the CAs it accepts client
// certificates from by subject, and a client holding certificates of two CAs picks by it.
func NewCANamed(t testing.TB, commonName string) *CA {
	t.Helper()
	key := NewKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial.Add(1)), Subject: pkix.Name{CommonName: commonName},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	cert, der := sign(t, tmpl, tmpl, &key.PublicKey, key)
	return &CA{Cert: cert, Key: key, PEM: pemBlock("CERTIFICATE", der)}
}

// Issue signs a certificate for r with a fresh key.
func (ca *CA) Issue(t testing.TB, r Request) Leaf {
	t.Helper()
	key := NewKey(t)
	usages := r.Usages
	if len(usages) == 0 {
		usages = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	}
	notAfter := r.NotAfter
	if notAfter.IsZero() {
		notAfter = time.Now().Add(24 * time.Hour)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial.Add(1)), Subject: pkix.Name{CommonName: r.CommonName},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: notAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: usages, DNSNames: r.DNSNames,
	}
	for _, ip := range r.IPs {
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.ParseIP(ip))
	}
	cert, der := sign(t, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return Leaf{Cert: cert, CertPEM: pemBlock("CERTIFICATE", der), KeyPEM: pemBlock("EC PRIVATE KEY", keyDER)}
}

// SecretData is a kubernetes.io/tls Secret's data (tls.crt, tls.key, ca.crt) for r.
func (ca *CA) SecretData(t testing.TB, r Request) map[string][]byte {
	t.Helper()
	leaf := ca.Issue(t, r)
	return map[string][]byte{"tls.crt": leaf.CertPEM, "tls.key": leaf.KeyPEM, "ca.crt": ca.PEM}
}

// WriteFiles writes the certificate and key as <name>.crt and <name>.key into dir.
func (l Leaf) WriteFiles(t testing.TB, dir, name string) (certPath, keyPath string) {
	t.Helper()
	return WriteFile(t, dir, name+".crt", l.CertPEM), WriteFile(t, dir, name+".key", l.KeyPEM)
}

// WriteFile writes data into dir/name, readable by its owner only, and returns the path.
func WriteFile(t testing.TB, dir, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// NewKey makes a P-256 key.
func NewKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func sign(t testing.TB, tmpl, parent *x509.Certificate, pub *ecdsa.PublicKey, signer *ecdsa.PrivateKey) (*x509.Certificate, []byte) {
	t.Helper()
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, der
}

func pemBlock(kind string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der})
}
