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
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/peer"
)

// PutTimeout is how long the writer waits for one put: longer than etcd's own request
// timeout (5 s plus two election timeouts, 7 s with the defaults), so that a put counts as
// failed when etcd gave up on it or the connection broke, not when the machine was slow
// (an fsync can take seconds while other builds write to the disk). A put that times out
// on the client has an unknown outcome: etcd may still apply it.
const PutTimeout = 10 * time.Second

// LeaderMoveErrors are etcd's answers to a put caught while leadership moves: refused by raft
// (dropped at the leader handing over, or at a follower that knows no leader yet), or given
// up with the old leader's term. A member's graceful stop itself fails no put: at SIGTERM
// etcd stops taking new requests, finishes those it has, and the client follows the Service.
var LeaderMoveErrors = []string{"raft proposal dropped", "etcdserver: no leader", "etcdserver: leader changed",
	"possibly due to previous leader failure"}

// FailuresPerDisruption is how many puts one disruption of the members may fail: the one
// in flight on the member that stops (a put is not retried once sent, its outcome is
// unknown), and one during the election or leadership transfer that follows. More means
// the cluster stopped serving writes for longer than the disruption explains.
const FailuresPerDisruption = 2

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
		TLS: a.TLS, Username: a.Username, Password: a.Password,
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(notePeer)}})
	if err != nil {
		t.Fatalf("etcd client for %v: %v", endpoints, err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// peerNote is where notePeer writes the address of the member that answered (or failed) a
// call's last attempt; a put carries one in its context.
type peerNote struct{ addr string }

type peerNoteKey struct{}

// notePeer records which member a call went to, so that a failed put can be lined up with
// the member that was stopping at the time. The etcd client's retries run outside it: the
// note is the last attempt's.
func notePeer(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	var p peer.Peer
	err := invoker(ctx, method, req, reply, cc, append(opts, grpc.Peer(&p))...)
	if note, ok := ctx.Value(peerNoteKey{}).(*peerNote); ok && p.Addr != nil {
		note.addr = p.Addr.String()
	}
	return err
}

// FailedPut is one put that failed: when it was sent, how long it took, the member it last
// went to ("" when it never reached one), and why.
type FailedPut struct {
	Key  string
	At   time.Time
	Took time.Duration
	Peer string
	Err  string
}

func (f FailedPut) String() string {
	return fmt.Sprintf("put %s sent %s, failed after %s at %q: %s", f.Key, f.At.UTC().Format("15:04:05.000"), f.Took.Round(time.Millisecond), f.Peer, f.Err)
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
	log    []FailedPut    // every failed put, in order
}

// Start writes through the named Service, following its members, under keys prefix/NNNNNN.
func Start(t testing.TB, resolver *net.Resolver, ns, service, prefix string, a Access) *Writer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &Writer{Cli: DialService(t, resolver, ns, service, a), resolver: resolver, ns: ns, service: service,
		access: a, prefix: prefix, cancel: cancel, done: make(chan struct{})}
	go w.run(ctx)
	go w.followService(ctx)
	return w
}

// FollowInterval is how often the writer looks the Service up again: an application that
// dials a Service by name gets its current members on each new connection, so a member that
// restarts under a new address is dropped and its successor used within about this long, not
// only after a put to the old address failed. Kubernetes' DNS answers live 5 s by default.
const FollowInterval = time.Second

// followService keeps the client's endpoints those of the Service until ctx ends.
func (w *Writer) followService(ctx context.Context) {
	t := time.NewTicker(FollowInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.done:
			return
		case <-t.C:
			w.FollowService(ctx)
		}
	}
}

// run writes at most one key every 50 ms for at most 15 minutes.
func (w *Writer) run(ctx context.Context) {
	defer close(w.done)
	deadline := time.Now().Add(15 * time.Minute)
	for i := 0; ctx.Err() == nil && time.Now().Before(deadline); i++ {
		key := fmt.Sprintf("%s/%06d", w.prefix, i)
		note := &peerNote{}
		putCtx, cancel := context.WithTimeout(context.WithValue(ctx, peerNoteKey{}, note), PutTimeout)
		sent := time.Now()
		_, err := w.Cli.Put(putCtx, key, key)
		took := time.Since(sent)
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
			w.log = append(w.log, FailedPut{Key: key, At: sent, Took: took, Peer: note.addr, Err: err.Error()})
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
	if endpoints, err := ServiceEndpoints(lookupCtx, w.resolver, w.ns, w.service, w.access); err == nil && len(endpoints) > 0 && !sameSet(endpoints, w.Cli.Endpoints()) {
		w.Cli.SetEndpoints(endpoints...)
	}
}

// sameSet: a and b hold the same strings, in any order.
func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	seen := make(map[string]int, len(a))
	for _, s := range a {
		seen[s]++
	}
	for _, s := range b {
		if seen[s]--; seen[s] < 0 {
			return false
		}
	}
	return true
}

// StopAndVerify stops writing and reads every acknowledged key back; it fails the test for
// any that is missing. It returns how many writes failed. An operation may end before the
// writer reached minAcked (a fast heal, a slow disk), so the writer goes on until it has, or
// a minute has passed: minAcked says the cluster takes writes, not how long the operation took.
func (w *Writer) StopAndVerify(t testing.TB, minAcked int) int {
	t.Helper()
	w.awaitAcknowledged(minAcked, time.Minute)
	w.cancel()
	<-w.done
	w.mu.Lock()
	acked := append([]string(nil), w.acked...)
	failed, errs := w.failed, fmt.Sprint(w.errors)
	w.mu.Unlock()
	if len(acked) < minAcked {
		t.Fatalf("only %d writes acknowledged (%d failed: %s); want at least %d", len(acked), failed, errs, minAcked)
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
	for _, f := range w.FailedPuts() {
		t.Logf("failed: %s", f)
	}
	return failed
}

// awaitAcknowledged polls until at least n puts are acknowledged or the timeout passes.
func (w *Writer) awaitAcknowledged(n int, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for w.Acknowledged() < n && time.Now().Before(deadline) {
		select {
		case <-w.done:
			return // the writer stopped (its own 15-minute bound): nothing more will come
		case <-time.After(100 * time.Millisecond):
		}
	}
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

// FailedPuts are the puts that failed so far, in order.
func (w *Writer) FailedPuts() []FailedPut {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]FailedPut(nil), w.log...)
}

// ErrorsSeen are the errors of the failed puts so far, by message.
func (w *Writer) ErrorsSeen() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return fmt.Sprint(w.errors)
}

// OnlyLeaderMoveFailures fails the test unless every put that failed so far failed as
// leadership moved (LeaderMoveErrors), and at most one per move of the moves announced.
func (w *Writer) OnlyLeaderMoveFailures(t testing.TB, moves int, what string) {
	t.Helper()
	byMove := 0
	for _, f := range w.FailedPuts() {
		if slices.ContainsFunc(LeaderMoveErrors, func(e string) bool { return strings.Contains(f.Err, e) }) {
			byMove++
			continue
		}
		t.Errorf("%s: a put failed, and not as leadership moved: %s", what, f)
	}
	if byMove > moves {
		t.Errorf("%s: %d puts failed as leadership moved, %d moves announced: at most one each", what, byMove, moves)
	}
}

// StopAndVerifyAtMost is StopAndVerify, and fails the test when more than maxFailed puts
// failed: a failed put is not acknowledged, so it may or may not have been applied, and only
// what the operation explains may fail (see FailuresPerDisruption).
func (w *Writer) StopAndVerifyAtMost(t testing.TB, minAcked, maxFailed int) {
	t.Helper()
	if failed := w.StopAndVerify(t, minAcked); failed > maxFailed {
		t.Fatalf("%d writes failed, at most %d expected from this operation: %s", failed, maxFailed, w.ErrorsSeen())
	}
}

// NoFailedWrite fails the test when a write of w failed so far, through what.
func (w *Writer) NoFailedWrite(t testing.TB, what string) {
	t.Helper()
	if n := w.Failures(); n != 0 {
		t.Errorf("%d writes failed during %s: %s", n, what, w.ErrorsSeen())
	}
}
