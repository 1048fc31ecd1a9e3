// Package testetcd runs a real one-member etcd for tests: the release the project's test bed
// builds (hack/testbed.sh etcd 3.6.16), on free loopback ports, killed at the test's cleanup,
// with its log printed when the test failed.
package testetcd

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Version is the etcd release the tests run.
const Version = "3.6.16"

// Bin is the path of one binary (etcd, etcdutl, etcdctl) of the test bed's release.
func Bin(t testing.TB, name string) string {
	t.Helper()
	p := filepath.Join(cacheDir(), "etcd-v"+Version, "bin", name)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s is not built (hack/testbed.sh etcd %s): %v", name, Version, err)
	}
	return p
}

// cacheDir is where hack/testbed.sh builds the test bed: ETCD_OPERATOR_CACHE, or
// etcd-operator under XDG_CACHE_HOME, or under ~/.cache.
func cacheDir() string {
	if dir := os.Getenv("ETCD_OPERATOR_CACHE"); dir != "" {
		return dir
	}
	base, _ := os.UserCacheDir() // XDG_CACHE_HOME, else ~/.cache, as the script reads them
	return filepath.Join(base, "etcd-operator")
}

// FreePort is a free 127.0.0.1 port.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

// Log is an etcd's output, safe to read while etcd writes it.
type Log struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *Log) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *Log) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// Run starts a one-member etcd named name on dataDir, serving clients on clientURL and its
// peer on peerURL, with extra flags appended. It does not wait for etcd to serve.
func Run(t testing.TB, name, dataDir, clientURL, peerURL string, extra ...string) *Log {
	t.Helper()
	args := append([]string{"--name=" + name, "--data-dir=" + dataDir,
		"--listen-client-urls=" + clientURL, "--advertise-client-urls=" + clientURL,
		"--listen-peer-urls=" + peerURL, "--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=" + name + "=" + peerURL, "--initial-cluster-token=tok", "--log-level=error"}, extra...)
	cmd := exec.Command(Bin(t, "etcd"), args...)
	logs := &Log{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("etcd %s log:\n%s", name, logs.String())
		}
	})
	return logs
}

// Start runs a one-member etcd over http on dataDir (fresh, or restored with the given
// name and peer port) and returns a client of it once it serves; it gives up after 61 tries, half a second apart.
func Start(t testing.TB, dataDir, name string, peerPort int) *clientv3.Client {
	t.Helper()
	clientURL := fmt.Sprintf("http://127.0.0.1:%d", FreePort(t))
	logs := Run(t, name, dataDir, clientURL, fmt.Sprintf("http://127.0.0.1:%d", peerPort))
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{clientURL}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	for i := 0; ; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := cli.Get(ctx, "health")
		cancel()
		if err == nil {
			return cli
		}
		if i == 60 {
			t.Fatalf("etcd did not start: %v\n%s", err, logs.String())
		}
		time.Sleep(500 * time.Millisecond)
	}
}
