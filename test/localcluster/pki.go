package localcluster

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"time"
)

const (
	caValidity   = 10 * 365 * 24 * time.Hour
	leafValidity = 365 * 24 * time.Hour
	// A leaf closer than this to its expiry is issued again instead of reused, so that a
	// cluster started today does not break in the middle of a test run.
	leafRenewBefore = 7 * 24 * time.Hour
	// Certificates are backdated a little so that small clock differences between the
	// moment of issue and the first handshake do not make them "not yet valid".
	backdate = 5 * time.Minute
)

// certSpec describes one leaf certificate the cluster needs.
type certSpec struct {
	name     string // file base name below pki/: <name>.crt and <name>.key
	cn       string
	orgs     []string
	ips      []netip.Addr
	dnsNames []string
	usages   []x509.ExtKeyUsage
}

func serverSpec(name, cn string, ips []netip.Addr, dnsNames []string) certSpec {
	return certSpec{name: name, cn: cn, ips: ips, dnsNames: dnsNames,
		usages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
}

// clientSpec is a client certificate; Kubernetes takes the user from CN and the groups
// from O.
func clientSpec(name, cn string, groups ...string) certSpec {
	return certSpec{name: name, cn: cn, orgs: groups,
		usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
}

// pki is the cluster's certificate authority on disk (Dir/pki) plus the CA key in memory so
// that more leaves can be issued later (IssueServingCert).
type pki struct {
	dir    string
	caCert *x509.Certificate
	caKey  crypto.Signer
}

func (p *pki) path(name, ext string) string { return filepath.Join(p.dir, name+"."+ext) }

func (p *pki) caFile() string { return p.path("ca", "crt") }

// loadOrCreatePKI reuses the CA in dir when present (kubeconfigs embed it, so replacing it
// would invalidate every kubeconfig handed out before) and creates it otherwise.
func loadOrCreatePKI(dir string) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	p := &pki{dir: dir}
	cert, key, err := loadPair(p.path("ca", "crt"), p.path("ca", "key"))
	if err == nil {
		p.caCert, p.caKey = cert, key
		return p, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("existing cluster CA in %s is unusable: %w", dir, err)
	}
	if err := p.createCA(); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *pki) createCA() error {
	key, err := newKey()
	if err != nil {
		return err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          randomSerial(),
		Subject:               pkix.Name{CommonName: "etcd-operator-localcluster-ca"},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return fmt.Errorf("self-signing the cluster CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return err
	}
	if err := writePair(p.path("ca", "crt"), p.path("ca", "key"), der, key); err != nil {
		return err
	}
	p.caCert, p.caKey = cert, key
	return nil
}

// ensureLeaf returns the files of spec's certificate, reusing the existing pair when it is
// signed by this CA, still valid for a while and covers spec's subject and SANs.
func (p *pki) ensureLeaf(spec certSpec) (certFile, keyFile string, err error) {
	certFile, keyFile = p.path(spec.name, "crt"), p.path(spec.name, "key")
	if cert, _, err := loadPair(certFile, keyFile); err == nil && p.leafMatches(cert, spec) {
		return certFile, keyFile, nil
	}
	if err := p.issueLeaf(spec, certFile, keyFile); err != nil {
		return "", "", fmt.Errorf("issuing certificate %s: %w", spec.name, err)
	}
	return certFile, keyFile, nil
}

func (p *pki) leafMatches(cert *x509.Certificate, spec certSpec) bool {
	if err := cert.CheckSignatureFrom(p.caCert); err != nil {
		return false
	}
	if time.Until(cert.NotAfter) < leafRenewBefore || cert.Subject.CommonName != spec.cn {
		return false
	}
	if !slices.Equal(cert.Subject.Organization, spec.orgs) {
		return false
	}
	for _, ip := range spec.ips {
		if !slices.ContainsFunc(cert.IPAddresses, func(have net.IP) bool { return have.Equal(ip.AsSlice()) }) {
			return false
		}
	}
	for _, name := range spec.dnsNames {
		if !slices.Contains(cert.DNSNames, name) {
			return false
		}
	}
	return true
}

func (p *pki) issueLeaf(spec certSpec, certFile, keyFile string) error {
	key, err := newKey()
	if err != nil {
		return err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: randomSerial(),
		Subject:      pkix.Name{CommonName: spec.cn, Organization: spec.orgs},
		NotBefore:    now.Add(-backdate),
		NotAfter:     now.Add(leafValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  spec.usages,
		DNSNames:     spec.dnsNames,
	}
	for _, ip := range spec.ips {
		tmpl.IPAddresses = append(tmpl.IPAddresses, ip.AsSlice())
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCert, key.Public(), p.caKey)
	if err != nil {
		return err
	}
	return writePair(certFile, keyFile, der, key)
}

// ensureServiceAccountKey keeps the token signing key across restarts: replacing it would
// invalidate every ServiceAccount token already handed out to Pods.
func (p *pki) ensureServiceAccountKey() (privateFile, publicFile string, err error) {
	privateFile, publicFile = p.path("sa", "key"), p.path("sa", "pub")
	if _, err := loadKey(privateFile); err == nil {
		if _, err := os.Stat(publicFile); err == nil {
			return privateFile, publicFile, nil
		}
	}
	key, err := newKey()
	if err != nil {
		return "", "", err
	}
	if err := writeKey(privateFile, key); err != nil {
		return "", "", err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return "", "", err
	}
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	if err := writeFileAtomic(publicFile, pubPEM, 0o644); err != nil {
		return "", "", err
	}
	return privateFile, publicFile, nil
}

func newKey() (*ecdsa.PrivateKey, error) {
	return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
}

func randomSerial() *big.Int {
	// 128 random bits; rand.Int only fails when the system's randomness source is broken,
	// and then nothing else in this package could work either.
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		panic(fmt.Sprintf("reading random serial number: %v", err))
	}
	return serial
}

func writePair(certFile, keyFile string, der []byte, key crypto.Signer) error {
	if err := writeKey(keyFile, key); err != nil {
		return err
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	return writeFileAtomic(certFile, certPEM, 0o644)
}

func writeKey(file string, key crypto.Signer) error {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	return writeFileAtomic(file, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600)
}

// writeFileAtomic writes through a temporary file and rename so that a crash never leaves
// a half-written key or certificate that a later Start would refuse.
func writeFileAtomic(file string, data []byte, perm os.FileMode) error {
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, data, perm); err != nil {
		return err
	}
	return os.Rename(tmp, file)
}

func loadPair(certFile, keyFile string) (*x509.Certificate, crypto.Signer, error) {
	cert, err := loadCert(certFile)
	if err != nil {
		return nil, nil, err
	}
	key, err := loadKey(keyFile)
	if err != nil {
		return nil, nil, err
	}
	if !publicKeysEqual(cert.PublicKey, key.Public()) {
		return nil, nil, fmt.Errorf("%s does not belong to %s", keyFile, certFile)
	}
	return cert, key, nil
}

func publicKeysEqual(a, b crypto.PublicKey) bool {
	aDER, errA := x509.MarshalPKIXPublicKey(a)
	bDER, errB := x509.MarshalPKIXPublicKey(b)
	return errA == nil && errB == nil && bytes.Equal(aDER, bDER)
}

func loadCert(file string) (*x509.Certificate, error) {
	block, err := readPEM(file)
	if err != nil {
		return nil, err
	}
	return x509.ParseCertificate(block.Bytes)
}

func loadKey(file string) (crypto.Signer, error) {
	block, err := readPEM(file)
	if err != nil {
		return nil, err
	}
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("%s: key of type %T cannot sign", file, key)
	}
	return signer, nil
}

func readPEM(file string) (*pem.Block, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, fmt.Errorf("%s: no PEM block", file)
	}
	return block, nil
}
