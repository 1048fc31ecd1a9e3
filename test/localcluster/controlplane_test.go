package localcluster

import (
	"context"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

const testNamespace = "lc-controlplane-test"

func TestControlPlaneStartRestartAndSecurity(t *testing.T) {
	cfg := testConfig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	cp := startForTest(ctx, t, cfg)
	client := kubernetes.NewForConfigOrDie(cp.RESTConfig())
	if _, err := client.CoreV1().Namespaces().Create(ctx,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNamespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Run("controller-manager publishes root CA", func(t *testing.T) {
		eventually(ctx, t, "kube-root-ca.crt in "+testNamespace, func() error {
			_, err := client.CoreV1().ConfigMaps(testNamespace).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
			return err
		})
	})
	t.Run("default ServiceAccount token", func(t *testing.T) {
		eventually(ctx, t, "ServiceAccount default in "+testNamespace, func() error {
			_, err := client.CoreV1().ServiceAccounts(testNamespace).Get(ctx, "default", metav1.GetOptions{})
			return err
		})
		if token := requestToken(ctx, t, client, "default"); token == "" {
			t.Fatal("TokenRequest for default returned an empty token")
		}
	})
	t.Run("RBAC enforced", func(t *testing.T) { checkRBACEnforced(ctx, t, cp, client) })
	t.Run("kube-apiserver restarted", func(t *testing.T) {
		before := markedProcesses(cfg.Marker)
		if err := cp.RestartAPIServer(ctx); err != nil {
			t.Fatal(err)
		}
		after := markedProcesses(cfg.Marker)
		if len(after) != len(before) || slices.Equal(after, before) {
			t.Fatalf("processes before the restart %v, after %v: want as many, one of them new", before, after)
		}
		if _, err := client.CoreV1().Namespaces().Get(ctx, testNamespace, metav1.GetOptions{}); err != nil {
			t.Fatalf("the API after the restart: %v", err)
		}
	})

	oldKubeconfig := copyFile(t, cp.KubeconfigPath())
	stopping := time.Now()
	cp.Stop()
	t.Logf("Stop took %v", time.Since(stopping).Round(time.Millisecond))
	if left := markedProcesses(cfg.Marker); len(left) != 0 {
		t.Fatalf("processes left after Stop: %v", left)
	}

	cp = startForTest(ctx, t, cfg)
	oldConfig, err := clientcmd.BuildConfigFromFlags("", oldKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	oldClient := kubernetes.NewForConfigOrDie(oldConfig)
	if _, err := oldClient.CoreV1().Namespaces().Get(ctx, testNamespace, metav1.GetOptions{}); err != nil {
		t.Fatalf("kubeconfig of the first run after restart: %v", err)
	}

	// Sweep stands in for the cleanup after a kill -9 of the process that ran Start.
	if err := Sweep(cfg.Dir); err != nil {
		t.Fatalf("Sweep of a running control plane: %v", err)
	}
	if left := markedProcesses(cfg.Marker); len(left) != 0 {
		t.Fatalf("processes left after Sweep: %v", left)
	}
	cp.Stop() // only reaps now
}

func TestConfigValidation(t *testing.T) {
	good := Config{Dir: "/tmp/lc", KubeBinDir: t.TempDir(), EtcdBin: "/bin/sh",
		APIAddress: netip.MustParseAddr("127.0.0.1"), APIPort: 6443, ServiceCIDR: "10.214.0.0/24"}
	for _, name := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		if err := os.WriteFile(filepath.Join(good.KubeBinDir, name), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := withDefaults(good)
	if err != nil {
		t.Fatalf("valid config rejected: %v", err)
	}
	if cfg.Marker != "LOCALCLUSTER_DIR=/tmp/lc" || cfg.EtcdClientPort != DefaultEtcdClientPort {
		t.Fatalf("defaults not applied: %+v", cfg)
	}
	bad := map[string]func(*Config){
		"relative dir":   func(c *Config) { c.Dir = "lc" },
		"root dir":       func(c *Config) { c.Dir = "/" },
		"foreign marker": func(c *Config) { c.Marker = "LOCALCLUSTER_DIR=/elsewhere" },
		"bad cidr":       func(c *Config) { c.ServiceCIDR = "10.214.0.0" },
		"no port":        func(c *Config) { c.APIPort = 0 },
		"missing binary": func(c *Config) { c.EtcdBin = filepath.Join(c.KubeBinDir, "etcd") },
	}
	for name, mutate := range bad {
		cfg := good
		mutate(&cfg)
		if _, err := withDefaults(cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestControlPlaneStartFailsWithLogTail(t *testing.T) {
	cfg := testConfig(t)
	// An etcd peer port that is already taken makes etcd exit at once.
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	cfg.EtcdPeerPort = busy.Addr().(*net.TCPAddr).Port
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cp, err := Start(ctx, cfg)
	if err == nil {
		cp.Stop()
		t.Fatal("Start succeeded although etcd's peer port was taken")
	}
	if !strings.Contains(err.Error(), "etcd exited") || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("error lacks the component and its log tail: %v", err)
	}
	if left := markedProcesses(cfg.Marker); len(left) != 0 {
		t.Fatalf("processes left after failed Start: %v", left)
	}
}

// checkRBACEnforced uses a ServiceAccount without any role binding: its token must
// authenticate (so Forbidden, not Unauthorized) and must not allow listing pods.
func checkRBACEnforced(ctx context.Context, t *testing.T, cp *ControlPlane, client *kubernetes.Clientset) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "no-rights"}}
	if _, err := client.CoreV1().ServiceAccounts(testNamespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	token := requestToken(ctx, t, client, sa.Name)
	saClient := kubernetes.NewForConfigOrDie(&rest.Config{
		Host:            cp.RESTConfig().Host,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAFile: cp.CAFile()},
		Proxy:           noProxy,
	})
	_, err := saClient.CoreV1().Pods(testNamespace).List(ctx, metav1.ListOptions{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("listing pods without RBAC rights: got %v, want Forbidden", err)
	}
}

func requestToken(ctx context.Context, t *testing.T, client *kubernetes.Clientset, sa string) string {
	t.Helper()
	expiry := int64(600)
	tr, err := client.CoreV1().ServiceAccounts(testNamespace).CreateToken(ctx, sa,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}},
		metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest for %s: %v", sa, err)
	}
	return tr.Status.Token
}

// testConfig is a cluster in a temp dir on 127.0.0.1 with free ports, so that it cannot
// collide with a local cluster running on this machine. Its cleanup sweeps the dir.
func testConfig(t *testing.T) Config {
	t.Helper()
	dir := t.TempDir()
	t.Cleanup(func() {
		if err := Sweep(dir); err != nil {
			t.Errorf("Sweep: %v", err)
		}
	})
	return Config{
		Dir:            dir,
		KubeBinDir:     testbedDir(t, "kube"),
		EtcdBin:        filepath.Join(testbedDir(t, "etcd"), "etcd"),
		APIAddress:     netip.MustParseAddr("127.0.0.1"),
		APIPort:        freePort(t),
		ServiceCIDR:    "10.214.0.0/24",
		Marker:         MarkerFor(dir),
		EtcdClientPort: freePort(t),
		EtcdPeerPort:   freePort(t),
	}
}

func startForTest(ctx context.Context, t *testing.T, cfg Config) *ControlPlane {
	t.Helper()
	started := time.Now()
	cp, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cp.Stop)
	t.Logf("control plane ready after %v", time.Since(started).Round(time.Millisecond))
	return cp
}

// testbedDir asks hack/testbed.sh for the directory of the built binaries; it returns at
// once when they are cached.
func testbedDir(t *testing.T, what string) string {
	t.Helper()
	out, err := exec.Command("bash", "../../hack/testbed.sh", what).Output()
	if err != nil {
		t.Fatalf("hack/testbed.sh %s: %v", what, err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1]
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func copyFile(t *testing.T, path string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), filepath.Base(path))
	if err := os.WriteFile(dst, readFile(t, path), 0o600); err != nil {
		t.Fatal(err)
	}
	return dst
}

func eventually(ctx context.Context, t *testing.T, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		time.Sleep(300 * time.Millisecond)
	}
}
