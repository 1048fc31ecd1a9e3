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
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/quorumkeeper/etcd-operator/test/clusterenv"
	"github.com/quorumkeeper/etcd-operator/test/etcdload"
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
	var err error
	if k8s, restConfig, err = clusterenv.Client(path); err != nil {
		return err
	}
	// Service names resolve through the cluster's DNS server (the local cluster's by
	// default), so the writer connects the way an application in the cluster does.
	resolver = clusterenv.Resolver(os.Getenv("E2E_CLUSTER_DNS"))
	return nil
}

// eventually polls check until it passes or the time is up (etcdload.Eventually, shared
// with test/legacy).
func eventually(t *testing.T, timeout time.Duration, what string, check func() error) {
	t.Helper()
	etcdload.Eventually(t, timeout, what, check)
}
