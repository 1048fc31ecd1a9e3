package etcd

// What a running etcd reads again and what only at start, when its certificate files change:
// the facts CA rotation (api/v1alpha2 CARotation*) is built on. Each runs on every release of
// ETCD_TEST_DIRS, so a release that behaves otherwise fails here first.

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/quorumkeeper/etcd-operator/internal/testpki"
)

// tlsMember is one member's certificate files on disk: one pair and one trusted-CA file for
// both ports, as a member Pod mounts them from its Secrets.
type tlsMember struct {
	*etcdMember
	dir, cert, key, trusted string
}

func localLeaf(t *testing.T, ca *testpki.CA) testpki.Leaf {
	t.Helper()
	return ca.Issue(t, testpki.Request{CommonName: "member", IPs: []string{"127.0.0.1"}})
}

// replaceFile swaps path's content in one rename, as the kubelet updates a Secret volume.
func replaceFile(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// newTLSMember is a member of release r whose client and peer ports both serve leaf and trust
// the CAs in trusted, requiring client certificates on both.
func newTLSMember(t *testing.T, r release, name string, leaf testpki.Leaf, trusted []byte) *tlsMember {
	t.Helper()
	m := &tlsMember{etcdMember: newMemberSpecOn(t, r, name, "https")}
	m.peerURL = fmt.Sprintf("https://127.0.0.1:%d", freePort(t))
	m.dir = t.TempDir()
	m.cert, m.key = leaf.WriteFiles(t, m.dir, "tls")
	m.trusted = testpki.WriteFile(t, m.dir, "ca.crt", trusted)
	m.extraArgs = []string{
		"--cert-file", m.cert, "--key-file", m.key, "--trusted-ca-file", m.trusted, "--client-cert-auth",
		"--peer-cert-file", m.cert, "--peer-key-file", m.key, "--peer-trusted-ca-file", m.trusted,
		"--peer-client-cert-auth",
	}
	return m
}

func (m *tlsMember) setLeaf(t *testing.T, leaf testpki.Leaf) {
	t.Helper()
	// The key first: a handshake between the two renames fails to load a mismatched pair
	// (and is retried by the client); it never serves a certificate with the wrong key.
	replaceFile(t, m.key, leaf.KeyPEM)
	replaceFile(t, m.cert, leaf.CertPEM)
}

// restart stops the process and starts it again on its data directory, with the files as
// they are now: what rolling a member Pod does.
func (m *tlsMember) restart(t *testing.T, all []*tlsMember) {
	t.Helper()
	m.stop(t)
	m.start(t, tlsCluster(all), "existing", "ignored-on-restart")
}

func tlsCluster(all []*tlsMember) string {
	members := make([]*etcdMember, 0, len(all))
	for _, m := range all {
		members = append(members, m.etcdMember)
	}
	return initialCluster(members)
}

// clientTLS is a client's TLS configuration that trusts roots and presents clientLeaf.
func clientTLS(t *testing.T, roots *testpki.CA, clientLeaf testpki.Leaf) *tls.Config {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AddCert(roots.Cert)
	pair, err := tls.X509KeyPair(clientLeaf.CertPEM, clientLeaf.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
}

// probe makes one fresh TLS connection to url and one HTTP request over it: nil when the
// server's certificate verifies against roots and the server accepts clientLeaf.
func probe(t *testing.T, url string, roots *testpki.CA, clientLeaf testpki.Leaf) error {
	t.Helper()
	client := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{
		DisableKeepAlives: true,
		TLSClientConfig:   clientTLS(t, roots, clientLeaf),
	}}
	// TLS 1.3 reports a refused client certificate at the first read, so the request is
	// what tells acceptance apart; any HTTP answer means the handshake went through.
	resp, err := client.Get(url + "/version")
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

// tlsClusterHealthy waits until every member answers a linearizable read through a client
// that trusts roots and presents clientLeaf: each one is connected to a quorum.
func tlsClusterHealthy(t *testing.T, all []*tlsMember, roots *testpki.CA, clientLeaf testpki.Leaf) {
	t.Helper()
	cfg := clientTLS(t, roots, clientLeaf)
	for _, m := range all {
		c := newTestClient(t, Config{Endpoints: []string{m.clientURL}, TLS: cfg})
		if err := eventually(startupTimeout, func() error { return c.Healthy(shortContext(t), m.clientURL) }); err != nil {
			t.Fatalf("member %s not healthy: %v", m.name, err)
		}
	}
}

// TestCertificateFilesAreReadAtEachHandshakeTrustedCAsOnlyAtStart walks the rotation of one
// CA to another on a running three-member cluster, one member restart at a time, and checks
// at each step what etcd reads again by itself:
//   - a changed certificate and key (--cert-file, --peer-cert-file) serve the next handshake,
//     on the client and the peer port, without a restart;
//   - a changed trusted CA file (--trusted-ca-file, --peer-trusted-ca-file) is not read
//     again: a certificate from the new CA is refused until the member restarts.
//
// So the order is: trust both CAs (each member restarted once), move certificates to the new
// CA (no restart), trust the new CA alone (each member restarted once more); the cluster
// keeps a quorum throughout.
func TestCertificateFilesAreReadAtEachHandshakeTrustedCAsOnlyAtStart(t *testing.T) {
	t.Parallel()
	forEachRelease(t, testCARotationFacts)
}

func testCARotationFacts(t *testing.T, r release) {
	oldCA, newCA := testpki.NewCA(t), testpki.NewCA(t)
	oldClient, newClient := localLeaf(t, oldCA), localLeaf(t, newCA)

	all := make([]*tlsMember, 3)
	for i := range all {
		all[i] = newTLSMember(t, r, fmt.Sprintf("ca%d", i), localLeaf(t, oldCA), oldCA.PEM)
	}
	for _, m := range all {
		m.start(t, tlsCluster(all), "new", "token-"+t.Name())
	}
	tlsClusterHealthy(t, all, oldCA, oldClient)
	m0 := all[0]
	for _, url := range []string{m0.clientURL, m0.peerURL} {
		if err := probe(t, url, oldCA, newClient); err == nil {
			t.Fatalf("%s accepted a client certificate of a CA it does not trust", url)
		}
	}
	trustBothAfterRestart(t, all, oldCA, newCA, oldClient, newClient)
	newLeavesWithoutRestart(t, all, oldCA, newCA, newClient)
	newCAAloneAfterRestart(t, all, newCA, oldClient, newClient)
}

// trustBothAfterRestart: both CAs in every trusted file are not read until the member
// restarts.
func trustBothAfterRestart(t *testing.T, all []*tlsMember, oldCA, newCA *testpki.CA, oldClient, newClient testpki.Leaf) {
	t.Helper()
	m0 := all[0]
	bundle := slices.Concat(oldCA.PEM, newCA.PEM)
	// 1. Both CAs in every trusted file: not read until the member restarts.
	for _, m := range all {
		replaceFile(t, m.trusted, bundle)
	}
	for _, url := range []string{m0.clientURL, m0.peerURL} {
		if err := probe(t, url, oldCA, newClient); err == nil {
			t.Fatalf("%s accepted the new CA's client certificate before a restart: the trusted CA file was read again; the rotation need not restart members", url)
		}
	}
	for _, m := range all {
		m.restart(t, all)
		tlsClusterHealthy(t, all, oldCA, oldClient)
	}
	for _, m := range all {
		for _, url := range []string{m.clientURL, m.peerURL} {
			if err := probe(t, url, oldCA, newClient); err != nil {
				t.Fatalf("%s refused the new CA's client certificate after a restart with both CAs: %v", url, err)
			}
			if err := probe(t, url, oldCA, oldClient); err != nil {
				t.Fatalf("%s refused the old CA's client certificate after a restart with both CAs: %v", url, err)
			}
		}
	}

}

// newLeavesWithoutRestart: certificates from the new CA are served at the next handshake.
func newLeavesWithoutRestart(t *testing.T, all []*tlsMember, oldCA, newCA *testpki.CA, newClient testpki.Leaf) {
	t.Helper()
	// 2. Certificates from the new CA: served at the next handshake, no restart.
	for _, m := range all {
		m.setLeaf(t, localLeaf(t, newCA))
	}
	for _, m := range all {
		for _, url := range []string{m.clientURL, m.peerURL} {
			if err := eventually(startupTimeout, func() error { return probe(t, url, newCA, newClient) }); err != nil {
				t.Fatalf("%s still serves the old certificate after its file changed: %v", url, err)
			}
			if err := probe(t, url, oldCA, newClient); err == nil {
				t.Fatalf("%s serves a certificate of the old CA after its file changed", url)
			}
		}
	}
	tlsClusterHealthy(t, all, newCA, newClient)

}

// newCAAloneAfterRestart: the old CA's certificates are refused once each member restarted
// with the new CA alone, and not before.
func newCAAloneAfterRestart(t *testing.T, all []*tlsMember, newCA *testpki.CA, oldClient, newClient testpki.Leaf) {
	t.Helper()
	m0 := all[0]
	// 3. The new CA alone: the old CA's certificates are refused after each restart.
	for _, m := range all {
		replaceFile(t, m.trusted, newCA.PEM)
	}
	if err := probe(t, m0.peerURL, newCA, oldClient); err != nil {
		t.Fatalf("%s refused the old CA before a restart: the trusted CA file was read again: %v", m0.peerURL, err)
	}
	for _, m := range all {
		m.restart(t, all)
		tlsClusterHealthy(t, all, newCA, newClient)
	}
	for _, m := range all {
		for _, url := range []string{m.clientURL, m.peerURL} {
			if err := probe(t, url, newCA, oldClient); err == nil {
				t.Fatalf("%s accepted the old CA's client certificate after the old CA was dropped", url)
			}
		}
	}
}
