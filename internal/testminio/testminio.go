// Package testminio runs a real MinIO server for tests: the binary the project's test bed
// builds (hack/testbed.sh minio), on a free loopback port, with its data in a temporary
// directory, over plain http or over https with a test CA.
package testminio

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/quorumkeeper/etcd-operator/internal/testetcd"
	"github.com/quorumkeeper/etcd-operator/internal/testpki"
)

// Credentials of every test server; they guard nothing but test data.
const (
	AccessKey = "testminio"
	SecretKey = "testminio-secret"
)

// Server is one running MinIO.
type Server struct {
	// Endpoint is http(s)://127.0.0.1:port.
	Endpoint string
	// CAPEM is the CA that signed the https server's certificate (nil over http).
	CAPEM []byte
	// Admin is a client with the root credentials.
	Admin *minio.Client
}

// Options say how to start a server.
type Options struct {
	// TLS serves https with a certificate of a fresh test CA for 127.0.0.1.
	TLS bool
	// Env is added to the server's environment (KEY=value): MINIO_IDENTITY_OPENID_* for
	// web identity, say.
	Env []string
}

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// Binary locates (building on first use, about ten minutes cold) the test bed's minio.
func Binary(t testing.TB) string {
	t.Helper()
	binOnce.Do(func() { binPath, binErr = locate() })
	if binErr != nil {
		t.Fatalf("getting minio through hack/testbed.sh: %v", binErr)
	}
	return binPath
}

func locate() (string, error) {
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(root, "hack", "testbed.sh"), "minio")
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%w\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	bin := filepath.Join(strings.TrimSpace(lines[len(lines)-1]), "minio")
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("the test bed printed no minio binary: %w", err)
	}
	return bin, nil
}

// repoRoot is the nearest directory above the working directory holding go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// Start runs a server until the test ends.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	bin := Binary(t)
	dir := t.TempDir()
	port, console := testetcd.FreePort(t), testetcd.FreePort(t)
	args := []string{"server", filepath.Join(dir, "data"),
		"--address", fmt.Sprintf("127.0.0.1:%d", port), "--console-address", fmt.Sprintf("127.0.0.1:%d", console),
		"--certs-dir", filepath.Join(dir, "certs"), "--quiet"}
	s := &Server{Endpoint: fmt.Sprintf("http://127.0.0.1:%d", port)}
	if err := os.MkdirAll(filepath.Join(dir, "certs"), 0o700); err != nil {
		t.Fatal(err)
	}
	if o.TLS {
		ca := testpki.NewCA(t)
		leaf := ca.Issue(t, testpki.Request{CommonName: "minio", IPs: []string{"127.0.0.1"}})
		testpki.WriteFile(t, filepath.Join(dir, "certs"), "public.crt", leaf.CertPEM)
		testpki.WriteFile(t, filepath.Join(dir, "certs"), "private.key", leaf.KeyPEM)
		s.CAPEM = ca.PEM
		s.Endpoint = fmt.Sprintf("https://127.0.0.1:%d", port)
	}
	var out bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "MINIO_ROOT_USER="+AccessKey, "MINIO_ROOT_PASSWORD="+SecretKey,
		"MINIO_UPDATE=off", "MINIO_BROWSER=off")
	cmd.Env = append(cmd.Env, o.Env...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("minio output:\n%s", out.String())
		}
	})
	s.Admin = s.client(t)
	s.waitLive(t)
	s.waitIAM(t)
	return s
}

// transport trusts the server's test CA over https.
func (s *Server) transport(t testing.TB) *http.Transport {
	t.Helper()
	transport, err := minio.DefaultTransport(s.CAPEM != nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.CAPEM != nil {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(s.CAPEM)
		transport.TLSClientConfig.RootCAs = pool
	}
	return transport
}

func (s *Server) client(t testing.TB) *minio.Client {
	t.Helper()
	transport := s.transport(t)
	cli, err := minio.New(strings.TrimPrefix(strings.TrimPrefix(s.Endpoint, "http://"), "https://"), &minio.Options{
		Creds: credentials.NewStaticV4(AccessKey, SecretKey, ""), Secure: s.CAPEM != nil, Transport: transport,
	})
	if err != nil {
		t.Fatal(err)
	}
	return cli
}

// waitLive waits for MinIO to answer S3 requests (a list of buckets succeeds).
func (s *Server) waitLive(t testing.TB) {
	t.Helper()
	var err error
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err = s.Admin.ListBuckets(ctx)
		cancel()
		if err == nil {
			return
		}
	}
	t.Fatalf("minio at %s did not answer within a minute: %v", s.Endpoint, err)
}

// iamNotInitialized is the code of MinIO's STS answer while its IAM subsystem still loads.
const iamNotInitialized = "STSIAMNotInitialized"

// waitIAM waits for MinIO's IAM subsystem, which loads in the background after S3 already
// answers: until then STS refuses every request, and one naming a RoleArn fails as "RoleARN
// parse err" because the claim-based OpenID provider is not known yet. An STS request without
// a RoleArn is answered with iamNotInitialized until IAM is up.
func (s *Server) waitIAM(t testing.TB) {
	t.Helper()
	transport := s.transport(t)
	cli := &http.Client{Transport: transport, Timeout: 5 * time.Second}
	answer := ""
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		answer = stsAnswer(cli, s.Endpoint, stsProbe)
		if answer != "" && !strings.Contains(answer, iamNotInitialized) {
			return
		}
	}
	t.Fatalf("minio at %s: IAM not initialized within a minute; STS said %q", s.Endpoint, answer)
}

// stsProbe is an STS request without a RoleArn and with a token no provider issued: answered
// iamNotInitialized while IAM loads, refused otherwise.
var stsProbe = url.Values{"Action": {"AssumeRoleWithWebIdentity"}, "Version": {"2011-06-15"}, "WebIdentityToken": {"probe"}}

// stsAnswer is the body of MinIO's answer to an STS form, or "" when none came.
func stsAnswer(cli *http.Client, endpoint string, form url.Values) string {
	resp, err := cli.PostForm(endpoint+"/", form)
	if err != nil {
		return ""
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return string(body)
}

// Bucket makes a bucket and returns its name.
func (s *Server) Bucket(t testing.TB, name string) string {
	t.Helper()
	if err := s.Admin.MakeBucket(context.Background(), name, minio.MakeBucketOptions{}); err != nil {
		t.Fatalf("making bucket %s: %v", name, err)
	}
	return name
}
