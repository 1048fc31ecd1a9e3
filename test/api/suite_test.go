// Package api tests the CRDs of config/crd/bases against a real kube-apiserver (and its etcd),
// both built from source by hack/testbed.sh: CEL validation, defaults, the scale subresource.
package api

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

var (
	k8s        client.Client
	restConfig *rest.Config
	kubeconfig string // path of an admin kubeconfig for kubectl
	assetsDir  string // directory of kube-apiserver, etcd and kubectl
	repoRoot   = filepath.Join("..", "..")
	ns         = "default"
)

func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) int {
	assetsDir = os.Getenv("KUBEBUILDER_ASSETS")
	if assetsDir == "" {
		fmt.Fprintln(os.Stderr, "KUBEBUILDER_ASSETS is not set: run these tests through 'make test-api', "+
			"which builds kube-apiserver and etcd (hack/testbed.sh) and sets it")
		return 1
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(repoRoot, "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: assetsDir,
	}
	cfg, err := env.Start()
	if err != nil {
		fmt.Fprintf(os.Stderr, "starting kube-apiserver from %s: %v\n", assetsDir, err)
		return 1
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stopping the test bed: %v\n", err)
		}
	}()
	restConfig = cfg
	dir, err := os.MkdirTemp("", "api-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(dir) }()
	if err := setUpClients(env, filepath.Join(dir, "kubeconfig")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// setUpClients makes the typed client of the tests and writes an admin kubeconfig for kubectl.
func setUpClients(env *envtest.Environment, kubeconfigPath string) error {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := etcdv1.AddToScheme(scheme); err != nil {
		return err
	}
	c, err := client.New(restConfig, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("client for the test bed: %w", err)
	}
	k8s = c
	admin, err := env.ControlPlane.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return fmt.Errorf("admin user: %w", err)
	}
	data, err := admin.KubeConfig()
	if err != nil {
		return fmt.Errorf("admin kubeconfig: %w", err)
	}
	kubeconfig = kubeconfigPath
	return os.WriteFile(kubeconfig, data, 0o600)
}
