package clusterenv

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

const kubeconfig = `apiVersion: v1
kind: Config
clusters: [{name: local, cluster: {server: "https://127.0.0.1:6443"}}]
users: [{name: admin, user: {token: t}}]
contexts: [{name: local, context: {cluster: local, user: admin}}]
current-context: local
`

// The client knows client-go's kinds and ours, and is made from the kubeconfig's server.
func TestClientKnowsOurKindsAndTheKubeconfigsServer(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	c, cfg, err := Client(path)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://127.0.0.1:6443" {
		t.Errorf("config's host %q, want the kubeconfig's server", cfg.Host)
	}
	for _, obj := range []runtime.Object{&corev1.Pod{}, &etcdv1.EtcdCluster{}, &etcdv1.EtcdMember{}} {
		if _, err := c.GroupVersionKindFor(obj); err != nil {
			t.Errorf("the client's scheme does not know %T: %v", obj, err)
		}
	}
	if _, _, err := Client(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("a missing kubeconfig made a client")
	}
}

// RateLimit sets the config's rate limit; without it the config keeps client-go's default
// (zero: the client's own 5 a second, bursts of 10).
func TestRateLimitSetsTheConfigsLimit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	_, cfg, err := Client(path, RateLimit(50, 100))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.QPS != 50 || cfg.Burst != 100 {
		t.Errorf("RateLimit(50, 100) made QPS %v, burst %d", cfg.QPS, cfg.Burst)
	}
	if _, cfg, err = Client(path); err != nil {
		t.Fatal(err)
	}
	if cfg.QPS != 0 || cfg.Burst != 0 {
		t.Errorf("no option made QPS %v, burst %d, want client-go's default", cfg.QPS, cfg.Burst)
	}
}

// The resolver dials the DNS server it was given, the local cluster's when none, whatever
// server the system would ask (a UDP dial sends nothing).
func TestResolverDialsTheClustersDNSServer(t *testing.T) {
	for addr, want := range map[string]string{"127.0.0.1:5353": "127.0.0.1:5353", "": DefaultDNS} {
		conn, err := Resolver(addr).Dial(context.Background(), "udp", "8.8.8.8:53")
		if err != nil {
			t.Fatalf("Resolver(%q): %v", addr, err)
		}
		if got := conn.RemoteAddr().String(); got != want {
			t.Errorf("Resolver(%q) dialled %s, want %s", addr, got, want)
		}
		_ = conn.Close()
	}
}
