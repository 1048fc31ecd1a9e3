package e2e

import (
	"context"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/quorumkeeper/etcd-operator/test/etcdload"
)

// writer is etcdload's Writer (test/etcdload, shared with test/legacy): numbered keys through
// the client Service until stopped, every acknowledged one read back at the end. Failed puts
// are allowed during an operation; lost acknowledged ones are not.
type writer struct {
	*etcdload.Writer
	cli *clientv3.Client
}

// failuresPerDisruption is how many puts one disruption of the members may fail
// (etcdload.FailuresPerDisruption, shared with test/legacy).
const failuresPerDisruption = etcdload.FailuresPerDisruption

// access is how a test client reaches a cluster (etcdload.Access).
type access = etcdload.Access

// clientServiceEndpoints resolves the client Service through the cluster's DNS server: the
// addresses of the ready members, as an application in the cluster would reach them.
func clientServiceEndpoints(ctx context.Context, ns, cluster string, a access) ([]string, error) {
	return serviceEndpoints(ctx, ns, cluster+"-client", a)
}

// serviceEndpoints resolves any Service through the cluster's DNS server.
func serviceEndpoints(ctx context.Context, ns, service string, a access) ([]string, error) {
	return etcdload.ServiceEndpoints(ctx, resolver, ns, service, a)
}

// dialClusterWith connects through the client Service.
func dialClusterWith(t *testing.T, ns, cluster string, a access) *clientv3.Client {
	t.Helper()
	return dialService(t, ns, cluster+"-client", a)
}

// dialService connects through the named Service.
func dialService(t *testing.T, ns, service string, a access) *clientv3.Client {
	t.Helper()
	return etcdload.DialService(t, resolver, ns, service, a)
}

func startWriter(t *testing.T, ns, cluster, prefix string) *writer {
	t.Helper()
	return startWriterWith(t, ns, cluster, prefix, access{})
}

func startWriterWith(t *testing.T, ns, cluster, prefix string, a access) *writer {
	t.Helper()
	return startWriterVia(t, ns, cluster+"-client", prefix, a)
}

// startWriterVia writes through the named Service, following its members.
func startWriterVia(t *testing.T, ns, service, prefix string, a access) *writer {
	t.Helper()
	w := etcdload.Start(t, resolver, ns, service, prefix, a)
	return &writer{Writer: w, cli: w.Cli}
}

// stopAndVerify stops writing and reads every acknowledged key back; it fails the test for
// any that is missing. It returns how many writes failed.
func (w *writer) stopAndVerify(t *testing.T, minAcked int) int {
	t.Helper()
	return w.StopAndVerify(t, minAcked)
}

func (w *writer) failures() int      { return w.Failures() }
func (w *writer) acknowledged() int  { return w.Acknowledged() }
func (w *writer) errorsSeen() string { return w.ErrorsSeen() }

// stopAndVerifyAtMost is stopAndVerify, and fails the test when more than maxFailed puts
// failed: a failed put is not acknowledged, so it may or may not have been applied, and
// only what the operation explains may fail (see failuresPerDisruption).
func (w *writer) stopAndVerifyAtMost(t *testing.T, minAcked, maxFailed int) {
	t.Helper()
	w.StopAndVerifyAtMost(t, minAcked, maxFailed)
}
