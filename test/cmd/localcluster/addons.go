package main

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/quorumkeeper/etcd-operator/test/localcluster"
)

// MinIO's credentials in the local cluster; they guard nothing but test data.
const (
	minioUser     = "localcluster"
	minioPassword = "localcluster-secret"
	minioPort     = 9000
)

// startCertManager installs cert-manager's CRDs and runs its controller against the cluster.
func startCertManager(ctx context.Context, o options, cp *localcluster.ControlPlane, client kubernetes.Interface) error {
	crds := filepath.Join(o.certManager, "..", "crds")
	kubectl := filepath.Join(o.kubeBinDir, "kubectl")
	out, err := exec.CommandContext(ctx, kubectl, "--kubeconfig", cp.KubeconfigPath(), "apply", "--server-side", "-f", crds).CombinedOutput()
	if err != nil {
		return fmt.Errorf("installing cert-manager's CRDs: %w\n%s", err, out)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "cert-manager"}}
	if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return cp.StartAddon("cert-manager", filepath.Join(o.certManager, "cert-manager-controller"), []string{
		"--kubeconfig", cp.KubeconfigPath(), "--leader-elect=false", "--cluster-resource-namespace", "cert-manager",
	})
}

// startMinIO serves S3 on the bridge address, so Pods and tests reach it; its data lives in
// the state directory and goes with local-down.
func startMinIO(o options, cp *localcluster.ControlPlane, hostIP netip.Addr) error {
	data := filepath.Join(o.dir, "minio")
	if err := os.MkdirAll(data, 0o700); err != nil {
		return err
	}
	// Children inherit the supervisor's environment; these variables only mean something to
	// MinIO.
	for k, v := range map[string]string{"MINIO_ROOT_USER": minioUser, "MINIO_ROOT_PASSWORD": minioPassword, "MINIO_UPDATE": "off"} {
		if err := os.Setenv(k, v); err != nil {
			return err
		}
	}
	addr := netip.AddrPortFrom(hostIP, minioPort).String()
	if err := cp.StartAddon("minio", o.minio, []string{"server", data, "--address", addr, "--console-address", netip.AddrPortFrom(hostIP, minioPort+1).String()}); err != nil {
		return err
	}
	info := fmt.Sprintf("S3_ENDPOINT=http://%s\nAWS_ACCESS_KEY_ID=%s\nAWS_SECRET_ACCESS_KEY=%s\n", addr, minioUser, minioPassword)
	return os.WriteFile(filepath.Join(o.dir, "s3.env"), []byte(info), 0o600)
}

// startAddons starts what was asked for with --cert-manager and --minio.
func startAddons(ctx context.Context, o options, cp *localcluster.ControlPlane, client kubernetes.Interface, hostIP netip.Addr) error {
	if o.certManager != "" {
		if err := startCertManager(ctx, o, cp, client); err != nil {
			return err
		}
	}
	if o.minio != "" {
		if err := startMinIO(o, cp, hostIP); err != nil {
			return err
		}
		return waitHTTP(ctx, fmt.Sprintf("http://%s/minio/health/live", netip.AddrPortFrom(hostIP, minioPort)), time.Minute)
	}
	return nil
}

// waitHTTP waits until url answers 200.
func waitHTTP(ctx context.Context, url string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	return fmt.Errorf("%s did not answer within %s", url, limit)
}
