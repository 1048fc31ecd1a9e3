// Package etcdload is the client load the end-to-end suites put on a cluster during an
// operation: a writer that puts numbered keys through a Service, resolved by the cluster's DNS
// server as an application in the cluster would, and reads every acknowledged key back at the
// end. test/e2e and test/legacy (the migrations from the real legacy operators) share it.
package etcdload

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

// PutTimeout is how long the writer waits for one put: longer than etcd's own request
// timeout (5 s plus two election timeouts, 7 s with the defaults), so that a put counts as
// failed when etcd gave up on it or the connection broke, not when the machine was slow
// (an fsync can take seconds while other builds write to the disk). A put that times out
// on the client has an unknown outcome: etcd may still apply it.
const PutTimeout = 10 * time.Second

// Access is how a test client reaches a cluster: plaintext (the zero value), or over TLS
// and, where auth is on, with a user and password.
type Access struct {
	TLS                *tls.Config
	Username, Password string
}

// Scheme is the URL scheme of the client port.
func (a Access) Scheme() string {
	if a.TLS != nil {
		return "https"
	}
	return "http"
}

// Eventually polls check until it passes or the time is up.
func Eventually(t testing.TB, timeout time.Duration, what string, check func() error) {
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

// ServiceEndpoints resolves a Service through resolver (the cluster's DNS server): the
// addresses of its ready endpoints on the client port.
func ServiceEndpoints(ctx context.Context, resolver *net.Resolver, ns, service string, a Access) ([]string, error) {
	ips, err := resolver.LookupHost(ctx, fmt.Sprintf("%s.%s.svc.cluster.local", service, ns))
	if err != nil {
		return nil, err
	}
	endpoints := make([]string, 0, len(ips))
	for _, ip := range ips {
		endpoints = append(endpoints, a.Scheme()+"://"+net.JoinHostPort(ip, "2379"))
	}
	return endpoints, nil
}

// DialService connects through the named Service. The etcd client resolves host names with
// the machine's resolver, which does not know cluster names, so it is given addresses (and,
// over TLS, a ServerName the certificate has).
func DialService(t testing.TB, resolver *net.Resolver, ns, service string, a Access) *clientv3.Client {
	t.Helper()
	var endpoints []string
	Eventually(t, time.Minute, "resolving the Service "+service, func() error {
		var err error
		endpoints, err = ServiceEndpoints(context.Background(), resolver, ns, service, a)
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

// Writer puts numbered keys through a Service until stopped and remembers which puts etcd
// acknowledged. Failed puts are allowed during an operation; lost acknowledged ones are not.
type Writer struct {
	Cli         *clientv3.Client
	resolver    *net.Resolver
	ns, service string // the writer follows the Service's members
	access      Access
	prefix      string
	cancel      context.CancelFunc
	done        chan struct{}

	mu     sync.Mutex
	acked  []string
	failed int
	errors map[string]int // the errors of failed puts, by message
}

// Start writes through the named Service, following its members, under keys prefix/NNNNNN.
func Start(t testing.TB, resolver *net.Resolver, ns, service, prefix string, a Access) *Writer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &Writer{Cli: DialService(t, resolver, ns, service, a), resolver: resolver, ns: ns, service: service,
		access: a, prefix: prefix, cancel: cancel, done: make(chan struct{})}
	go w.run(ctx)
	return w
}

// run writes at most one key every 50 ms for at most 15 minutes.
func (w *Writer) run(ctx context.Context) {
	defer close(w.done)
	deadline := time.Now().Add(15 * time.Minute)
	for i := 0; ctx.Err() == nil && time.Now().Before(deadline); i++ {
		key := fmt.Sprintf("%s/%06d", w.prefix, i)
		putCtx, cancel := context.WithTimeout(ctx, PutTimeout)
		_, err := w.Cli.Put(putCtx, key, key)
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
			w.FollowService(ctx)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// FollowService points the client at the Service's current members, as a Service would
// route new connections.
func (w *Writer) FollowService(ctx context.Context) {
	lookupCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if endpoints, err := ServiceEndpoints(lookupCtx, w.resolver, w.ns, w.service, w.access); err == nil && len(endpoints) > 0 {
		w.Cli.SetEndpoints(endpoints...)
	}
}

// StopAndVerify stops writing and reads every acknowledged key back; it fails the test for
// any that is missing. It returns how many writes failed.
func (w *Writer) StopAndVerify(t testing.TB, minAcked int) int {
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
	Eventually(t, time.Minute, "reading the written keys back", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		w.FollowService(ctx) // members may have new addresses since the last write (pause/resume)
		var err error
		resp, err = w.Cli.Get(ctx, w.prefix+"/", clientv3.WithPrefix())
		return err
	})
	stored := map[string]bool{}
	for _, kv := range resp.Kvs {
		stored[string(kv.Key)] = string(kv.Value) == string(kv.Key)
	}
	if missing := Missing(acked, stored); missing != "" {
		t.Fatalf("acknowledged write %s is lost (%d acked, %d stored)", missing, len(acked), len(resp.Kvs))
	}
	t.Logf("%d acknowledged writes all read back (%d failed during the operation: %s)", len(acked), failed, errs)
	return failed
}

// Missing is the first acknowledged key that is not stored with its own name as its value
// (stored maps a key to whether its value is right), or "" when none is.
func Missing(acked []string, stored map[string]bool) string {
	for _, key := range acked {
		if !stored[key] {
			return key
		}
	}
	return ""
}

// Failures is how many puts failed so far.
func (w *Writer) Failures() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.failed
}

// Acknowledged is how many puts etcd acknowledged so far.
func (w *Writer) Acknowledged() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.acked)
}

// ErrorsSeen are the errors of the failed puts so far, by message.
func (w *Writer) ErrorsSeen() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return fmt.Sprint(w.errors)
}

// NoFailedWrite fails the test when a write of w failed so far, through what.
func (w *Writer) NoFailedWrite(t testing.TB, what string) {
	t.Helper()
	if n := w.Failures(); n != 0 {
		t.Errorf("%d writes failed during %s: %s", n, what, w.ErrorsSeen())
	}
}
