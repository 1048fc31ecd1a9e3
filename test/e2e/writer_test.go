package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// writer puts numbered keys through the client Service until stopped and remembers which
// puts etcd acknowledged. Failed puts are allowed during an operation; lost acked ones are not.
type writer struct {
	cli         *clientv3.Client
	ns, service string // the writer follows the Service's members
	access      access
	prefix      string
	cancel      context.CancelFunc
	done        chan struct{}

	mu     sync.Mutex
	acked  []string
	failed int
	errors map[string]int // the errors of failed puts, by message
}

// putTimeout is how long the writer waits for one put: longer than etcd's own request
// timeout (5 s plus two election timeouts, 7 s with the defaults), so that a put counts as
// failed when etcd gave up on it or the connection broke, not when the machine was slow
// (an fsync can take seconds while other builds write to the disk). A put that times out
// on the client has an unknown outcome: etcd may still apply it.
const putTimeout = 10 * time.Second

// failuresPerDisruption is how many puts one disruption of the members may fail: the one
// in flight on the member that stops (a put is not retried once sent, its outcome is
// unknown), and one during the election or leadership transfer that follows. More means
// the cluster stopped serving writes for longer than the disruption explains.
const failuresPerDisruption = 2

// access is how a test client reaches a cluster: plaintext (the zero value), or over TLS
// and, where auth is on, with a user and password.
type access struct {
	TLS                *tls.Config
	Username, Password string
}

func (a access) scheme() string {
	if a.TLS != nil {
		return "https"
	}
	return "http"
}

// clientServiceEndpoints resolves the client Service through the cluster's DNS server: the
// addresses of the ready members, as an application in the cluster would reach them.
func clientServiceEndpoints(ctx context.Context, ns, cluster string, a access) ([]string, error) {
	return serviceEndpoints(ctx, ns, cluster+"-client", a)
}

// serviceEndpoints resolves any Service through the cluster's DNS server.
func serviceEndpoints(ctx context.Context, ns, service string, a access) ([]string, error) {
	ips, err := resolver.LookupHost(ctx, fmt.Sprintf("%s.%s.svc.cluster.local", service, ns))
	if err != nil {
		return nil, err
	}
	endpoints := make([]string, 0, len(ips))
	for _, ip := range ips {
		endpoints = append(endpoints, a.scheme()+"://"+net.JoinHostPort(ip, "2379"))
	}
	return endpoints, nil
}

// dialClusterWith connects through the client Service. The etcd client resolves host names
// with the machine's resolver, which does not know cluster names, so it is given addresses
// (and, over TLS, a ServerName the certificate has).
func dialClusterWith(t *testing.T, ns, cluster string, a access) *clientv3.Client {
	t.Helper()
	return dialService(t, ns, cluster+"-client", a)
}

// dialService connects through the named Service.
func dialService(t *testing.T, ns, service string, a access) *clientv3.Client {
	t.Helper()
	var endpoints []string
	eventually(t, time.Minute, "resolving the Service "+service, func() error {
		var err error
		endpoints, err = serviceEndpoints(context.Background(), ns, service, a)
		return err
	})
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second,
		TLS: a.TLS, Username: a.Username, Password: a.Password})
	if err != nil {
		t.Fatalf("etcd client for %v: %v", endpoints, err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
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
	ctx, cancel := context.WithCancel(context.Background())
	w := &writer{cli: dialService(t, ns, service, a), ns: ns, service: service, access: a,
		prefix: prefix, cancel: cancel, done: make(chan struct{})}
	go w.run(ctx)
	return w
}

// run writes at most one key every 50 ms for at most 15 minutes.
func (w *writer) run(ctx context.Context) {
	defer close(w.done)
	deadline := time.Now().Add(15 * time.Minute)
	for i := 0; ctx.Err() == nil && time.Now().Before(deadline); i++ {
		key := fmt.Sprintf("%s/%06d", w.prefix, i)
		putCtx, cancel := context.WithTimeout(ctx, putTimeout)
		_, err := w.cli.Put(putCtx, key, key)
		cancel()
		if ctx.Err() != nil {
			return // stopped while the put was in flight: neither acknowledged nor failed
		}
		w.mu.Lock()
		if err == nil {
			w.acked = append(w.acked, key)
		} else {
			w.failed++
			if w.errors == nil {
				w.errors = map[string]int{}
			}
			w.errors[err.Error()]++
		}
		w.mu.Unlock()
		if err != nil {
			w.followService(ctx)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// followService points the client at the Service's current members, as a Service would
// route new connections.
func (w *writer) followService(ctx context.Context) {
	lookupCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if endpoints, err := serviceEndpoints(lookupCtx, w.ns, w.service, w.access); err == nil && len(endpoints) > 0 {
		w.cli.SetEndpoints(endpoints...)
	}
}

// stopAndVerify stops writing and reads every acknowledged key back; it fails the test for
// any that is missing. It returns how many writes failed.
func (w *writer) stopAndVerify(t *testing.T, minAcked int) int {
	t.Helper()
	w.cancel()
	<-w.done
	w.mu.Lock()
	acked := append([]string(nil), w.acked...)
	failed, errs := w.failed, fmt.Sprint(w.errors)
	w.mu.Unlock()
	if len(acked) < minAcked {
		t.Fatalf("only %d writes acknowledged (%d failed); want at least %d", len(acked), failed, minAcked)
	}
	var resp *clientv3.GetResponse
	eventually(t, time.Minute, "reading the written keys back", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		w.followService(ctx) // members may have new addresses since the last write (pause/resume)
		var err error
		resp, err = w.cli.Get(ctx, w.prefix+"/", clientv3.WithPrefix())
		return err
	})
	stored := map[string]bool{}
	for _, kv := range resp.Kvs {
		stored[string(kv.Key)] = string(kv.Value) == string(kv.Key)
	}
	for _, key := range acked {
		if !stored[key] {
			t.Fatalf("acknowledged write %s is lost (%d acked, %d stored)", key, len(acked), len(resp.Kvs))
		}
	}
	t.Logf("%d acknowledged writes all read back (%d failed during the operation: %s)", len(acked), failed, errs)
	return failed
}

// failures is how many puts failed so far.
func (w *writer) failures() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.failed
}

// acknowledged is how many puts etcd acknowledged so far.
func (w *writer) acknowledged() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.acked)
}

// errorsSeen are the errors of the failed puts so far, by message.
func (w *writer) errorsSeen() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return fmt.Sprint(w.errors)
}

// stopAndVerifyAtMost is stopAndVerify, and fails the test when more than maxFailed puts
// failed: a failed put is not acknowledged, so it may or may not have been applied, and
// only what the operation explains may fail (see failuresPerDisruption).
func (w *writer) stopAndVerifyAtMost(t *testing.T, minAcked, maxFailed int) {
	t.Helper()
	if failed := w.stopAndVerify(t, minAcked); failed > maxFailed {
		t.Fatalf("%d writes failed, at most %d expected from this operation: %s", failed, maxFailed, w.errorsSeen())
	}
}
