package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
	"github.com/quorumkeeper/etcd-operator/test/robustness"
)

// runKubectl runs the kubectl that hack/e2e.sh names in E2E_KUBECTL against $KUBECONFIG in
// namespace ns, with stdin as its input. The TLS journey is tested with the very commands
// docs/tls-journey.md shows.
func runKubectl(ns, stdin string, args ...string) (string, error) {
	bin := os.Getenv("E2E_KUBECTL")
	if bin == "" {
		return "", errors.New("E2E_KUBECTL is not set: run through hack/e2e.sh, which names the kubectl binary")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"--namespace", ns}, args...)...)
	cmd.WaitDelay = 5 * time.Second
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// kubectl is runKubectl that fails the test unless kubectl succeeds.
func kubectl(t *testing.T, ns string, args ...string) string {
	t.Helper()
	out, err := runKubectl(ns, "", args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// journeyManifest is the YAML block of docs/tls-journey.md that starts with "# <file>", so
// that the tests apply what the journey tells users to apply.
func journeyManifest(t *testing.T, file string) string {
	t.Helper()
	doc, err := os.ReadFile("../../docs/tls-journey.md")
	if err != nil {
		t.Fatal(err)
	}
	start := "```yaml\n# " + file + "\n"
	_, rest, found := strings.Cut(string(doc), start)
	block, _, closed := strings.Cut(rest, "```")
	if !found || !closed {
		t.Fatalf("docs/tls-journey.md has no yaml block starting with # %s", file)
	}
	return block
}

// applyJourney applies the journey's manifests in ns, in order.
func applyJourney(t *testing.T, ns string, files ...string) {
	t.Helper()
	for _, f := range files {
		if _, err := runKubectl(ns, journeyManifest(t, f), "apply", "-f", "-"); err != nil {
			t.Fatal(err)
		}
	}
}

// journeyCA applies the journey's CA chain and waits for its Issuer, as step 1 does.
func journeyCA(t *testing.T, ns string) {
	t.Helper()
	applyJourney(t, ns, "etcd-ca.yaml")
	kubectl(t, ns, "wait", "--for=condition=Ready", "certificate/etcd-root-ca", "issuer/etcd-ca", "--timeout=2m")
}

// journeyAppClient issues the journey's application certificate and returns its Secret.
func journeyAppClient(t *testing.T, ns string) *corev1.Secret {
	t.Helper()
	applyJourney(t, ns, "app-client.yaml")
	kubectl(t, ns, "wait", "--for=condition=Ready", "certificate/app-client", "--timeout=2m")
	return getSecret(t, ns, "app-client-tls")
}

// secretTLS is a client TLS configuration with the certificate of a kubernetes.io/tls Secret
// that expects serverName.
func secretTLS(t *testing.T, s *corev1.Secret, serverName string) *tls.Config {
	t.Helper()
	return clientTLS(t, s.Data[specs.SecretKeyCA], s.Data[specs.SecretKeyCert], s.Data[specs.SecretKeyKey], serverName)
}

// clientServiceHost is the name clients reach the cluster by; the server certificate has it.
func clientServiceHost(ns, cluster string) string {
	return specs.ClientServiceName(cluster) + "." + ns + ".svc"
}

// clientTLS is robustness.ClientTLS that fails the test on bad PEM data.
func clientTLS(t *testing.T, caPEM, certPEM, keyPEM []byte, serverName string) *tls.Config {
	t.Helper()
	cfg, err := robustness.ClientTLS(caPEM, certPEM, keyPEM, serverName)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func getSecret(t *testing.T, ns, name string) *corev1.Secret {
	t.Helper()
	s := &corev1.Secret{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
		t.Fatal(err)
	}
	return s
}

// secretSerial is the serial number of the certificate in a Secret's tls.crt.
func secretSerial(t *testing.T, ns, name string) string {
	t.Helper()
	cert, err := parseCertificate(getSecret(t, ns, name).Data[specs.SecretKeyCert])
	if err != nil {
		t.Fatalf("Secret %s: %v", name, err)
	}
	return cert.SerialNumber.String()
}

func parseCertificate(certPEM []byte) (*x509.Certificate, error) {
	return robustness.ParseCertificate(certPEM)
}

// memberIPs are the Pod addresses of the cluster's running members, by Pod name.
func memberIPs(t *testing.T, ns, cluster string) map[string]string {
	t.Helper()
	pods := &corev1.PodList{}
	if err := k8s.List(context.Background(), pods, client.InNamespace(ns), client.MatchingLabels{etcdv1.LabelCluster: cluster}); err != nil {
		t.Fatal(err)
	}
	ips := map[string]string{}
	for _, p := range pods.Items {
		if p.Status.PodIP != "" {
			ips[p.Name] = p.Status.PodIP
		}
	}
	return ips
}

// servedSerial is the serial number of the certificate a member serves on port: a new TLS
// connection, as a client that connects after a renewal makes.
func servedSerial(ip string, port int, cfg *tls.Config) (string, error) {
	return robustness.ServedSerial(ip, port, cfg)
}

func dialMember(ip string, port int, cfg *tls.Config) (*tls.Conn, error) {
	d := &net.Dialer{Timeout: 5 * time.Second}
	return tls.DialWithDialer(d, "tcp", net.JoinHostPort(ip, strconv.Itoa(port)), cfg)
}

// serverVerdict is what a member says to a TLS client once the handshake is done: with TLS
// 1.3 the client finishes first, and a server that rejects its certificate (or its lack of
// one) says so in an alert that the first read returns. A read that times out is a member
// that accepted the client and waits for its request.
func serverVerdict(ip string, port int, cfg *tls.Config) error {
	conn, err := dialMember(ip, port, cfg)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	if err := conn.SetReadDeadline(time.Now().Add(3 * time.Second)); err != nil {
		return err
	}
	_, err = conn.Read(make([]byte, 1))
	return err
}

// waitServed waits until every member of the cluster serves the certificate with serial on
// port. etcd reads its certificate files at every handshake; the node agent refreshes the
// Secret volumes within a minute or so.
func waitServed(t *testing.T, ns, cluster string, port int, cfg *tls.Config, serial string) {
	t.Helper()
	eventually(t, 3*time.Minute, fmt.Sprintf("every member serving serial %s on %d", serial, port), func() error {
		ips := memberIPs(t, ns, cluster)
		if len(ips) == 0 {
			return errors.New("no member Pods")
		}
		for pod, ip := range ips {
			got, err := servedSerial(ip, port, cfg)
			if err != nil {
				return fmt.Errorf("%s: %w", pod, err)
			}
			if got != serial {
				return fmt.Errorf("%s serves serial %s", pod, got)
			}
		}
		return nil
	})
}

// tryPut opens a client through the client Service and writes one key: the error says
// whether etcd let this client in.
func tryPut(ns, cluster string, a access) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	endpoints, err := clientServiceEndpoints(ctx, ns, cluster, a)
	if err != nil {
		return err
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Context: ctx,
		TLS: a.TLS, Username: a.Username, Password: a.Password})
	if err != nil {
		return err
	}
	defer func() { _ = cli.Close() }()
	_, err = cli.Put(ctx, "e2e-probe", "x")
	return err
}

// httpGet is the status and body of a plaintext GET.
func httpGet(url string) (int, string, error) {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// checkPorts asserts that a member answers plaintext on its metrics port only: 2379 and
// 2380 serve TLS alone.
func checkPorts(t *testing.T, ip string) {
	t.Helper()
	for _, port := range []int{specs.ClientPort, specs.PeerPort} {
		url := fmt.Sprintf("http://%s:%d/health", ip, port)
		if code, body, err := httpGet(url); err == nil && code == http.StatusOK {
			t.Fatalf("plaintext GET %s answered 200: %s", url, body)
		} else {
			t.Logf("plaintext GET %s refused as it should: %d %v %.60q", url, code, err, body)
		}
	}
	url := fmt.Sprintf("http://%s:%d/metrics", ip, specs.MetricsPort)
	code, body, err := httpGet(url)
	if err != nil || code != http.StatusOK || !strings.Contains(body, "etcd_server_has_leader 1") {
		t.Fatalf("GET %s: %d %v; want 200 with etcd_server_has_leader 1", url, code, err)
	}
}

// tlsSecret is a kubernetes.io/tls Secret with this data (tls.crt, tls.key, ca.crt).
func tlsSecret(ns, name string, data map[string][]byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Type:       corev1.SecretTypeTLS,
		Data:       data,
	}
}
