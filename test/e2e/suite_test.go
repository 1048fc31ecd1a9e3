// Package e2e tests the operator binary, deployed from config/, against a real cluster: the
// one in $KUBECONFIG (make test-e2e starts the local cluster and deploys the operator). A
// client writes through the client Service during every operation, and every write etcd
// acknowledged is read back afterwards.
//
// Tests that kill, restart or reconfigure the operator (its Pods, its Deployment, its
// failpoints) run one at a time. Every other test calls t.Parallel() first: go test runs those
// together once the one-at-a-time tests have finished, so no operator restart lands in the
// middle of another test (E2E_PARALLEL in hack/e2e.sh sets how many at once). Each test has a
// namespace of its own.
package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

var (
	k8s        client.Client
	restConfig *rest.Config // for watches (k8s cannot watch)
	resolver   *net.Resolver
)

func TestMain(m *testing.M) {
	// controller-runtime's clients log through its global logger; without one set, the first
	// client made prints a stack trace saying so. The tests report through t.Log instead.
	ctrllog.SetLogger(logr.Discard())
	if err := setUp(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

func setUp() error {
	path := os.Getenv("KUBECONFIG")
	if path == "" {
		return fmt.Errorf("KUBECONFIG is not set: run through 'make test-e2e', which starts the local cluster")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return err
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := etcdv1.AddToScheme(scheme); err != nil {
		return err
	}
	if k8s, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		return err
	}
	restConfig = cfg
	// Service names resolve through the cluster's DNS server (the local cluster's by
	// default), so the writer connects the way an application in the cluster does.
	dnsAddr := os.Getenv("E2E_CLUSTER_DNS")
	if dnsAddr == "" {
		dnsAddr = "10.213.0.1:53"
	}
	resolver = &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, dnsAddr)
	}}
	return nil
}

// eventually polls check until it passes or the time is up.
func eventually(t *testing.T, timeout time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var err error
	for time.Now().Before(deadline) {
		if err = check(); err == nil {
			return
		}
		time.Sleep(time.Second)
	}
	t.Fatalf("%s: not within %s: %v", what, timeout, err)
}
