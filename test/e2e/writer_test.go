package e2e

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
)

// writer puts numbered keys through the client Service until stopped and remembers which
// puts etcd acknowledged. Failed puts are allowed during an operation; lost acked ones are not.
type writer struct {
	cli    *clientv3.Client
	prefix string
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex
	acked  []string
	failed int
}

func dialCluster(t *testing.T, ns, cluster string) *clientv3.Client {
	t.Helper()
	endpoint := fmt.Sprintf("http://%s-client.%s.svc.cluster.local:2379", cluster, ns)
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{endpoint},
		DialTimeout: 5 * time.Second,
		DialOptions: []grpc.DialOption{grpc.WithContextDialer(dialThroughClusterDNS)},
	})
	if err != nil {
		t.Fatalf("etcd client for %s: %v", endpoint, err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

func dialThroughClusterDNS(ctx context.Context, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	ips, err := resolver.LookupHost(ctx, host)
	if err != nil {
		return nil, err
	}
	var d net.Dialer
	var lastErr error
	for _, ip := range ips {
		conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(ip, port))
		if err == nil {
			return conn, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

func startWriter(t *testing.T, ns, cluster, prefix string) *writer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &writer{cli: dialCluster(t, ns, cluster), prefix: prefix, cancel: cancel, done: make(chan struct{})}
	go w.run(ctx)
	return w
}

// run writes at most one key every 50 ms for at most 15 minutes.
func (w *writer) run(ctx context.Context) {
	defer close(w.done)
	deadline := time.Now().Add(15 * time.Minute)
	for i := 0; ctx.Err() == nil && time.Now().Before(deadline); i++ {
		key := fmt.Sprintf("%s/%06d", w.prefix, i)
		putCtx, cancel := context.WithTimeout(ctx, 3*time.Second)
		_, err := w.cli.Put(putCtx, key, key)
		cancel()
		w.mu.Lock()
		if err == nil {
			w.acked = append(w.acked, key)
		} else {
			w.failed++
		}
		w.mu.Unlock()
		time.Sleep(50 * time.Millisecond)
	}
}

// stopAndVerify stops writing and reads every acknowledged key back; it fails the test for
// any that is missing.
func (w *writer) stopAndVerify(t *testing.T, minAcked int) {
	t.Helper()
	w.cancel()
	<-w.done
	w.mu.Lock()
	acked := append([]string(nil), w.acked...)
	failed := w.failed
	w.mu.Unlock()
	if len(acked) < minAcked {
		t.Fatalf("only %d writes acknowledged (%d failed); want at least %d", len(acked), failed, minAcked)
	}
	var resp *clientv3.GetResponse
	eventually(t, time.Minute, "reading the written keys back", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
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
	t.Logf("%d acknowledged writes all read back (%d failed during the operation)", len(acked), failed)
}
