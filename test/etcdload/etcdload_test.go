package etcdload

import (
	"context"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/quorumkeeper/etcd-operator/internal/testetcd"
)

func TestMissing(t *testing.T) {
	for _, tc := range []struct {
		name   string
		acked  []string
		stored map[string]bool
		want   string
	}{
		{"all stored", []string{"p/1", "p/2"}, map[string]bool{"p/1": true, "p/2": true, "p/3": true}, ""},
		{"one lost", []string{"p/1", "p/2"}, map[string]bool{"p/1": true}, "p/2"},
		{"wrong value", []string{"p/1"}, map[string]bool{"p/1": false}, "p/1"},
		{"nothing acked", nil, nil, ""},
	} {
		if got := Missing(tc.acked, tc.stored); got != tc.want {
			t.Errorf("%s: Missing = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestAccessScheme(t *testing.T) {
	if (Access{}).Scheme() != "http" {
		t.Error("plaintext access is not http")
	}
}

// TestStopAndVerifyWaitsForTheWritesItWants: an operation that ends before the writer's first
// puts land (a fast heal) still gets its minimum of acknowledged writes, read back.
func TestStopAndVerifyWaitsForTheWritesItWants(t *testing.T) {
	cli := testetcd.Start(t, t.TempDir(), "load", testetcd.FreePort(t))
	ctx, cancel := context.WithCancel(context.Background())
	w := &Writer{Cli: cli, prefix: "load", cancel: cancel, done: make(chan struct{})}
	go w.run(ctx)
	if failed := w.StopAndVerify(t, 30); failed != 0 {
		t.Errorf("%d puts failed against a healthy etcd: %s", failed, w.ErrorsSeen())
	}
	if n := w.Acknowledged(); n < 30 {
		t.Errorf("%d writes acknowledged, want at least 30", n)
	}
}

// TestAFailedPutNamesTheMemberItWentTo: the address a put went to is noted, for a put that
// etcd refused as for one it took, so that a failure lines up with the member that was
// stopping.
func TestAFailedPutNamesTheMemberItWentTo(t *testing.T) {
	served := testetcd.Start(t, t.TempDir(), "peer", testetcd.FreePort(t))
	cli, err := clientv3.New(clientv3.Config{Endpoints: served.Endpoints(), DialTimeout: 5 * time.Second,
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(notePeer)}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cli.Close() }()
	want := strings.TrimPrefix(served.Endpoints()[0], "http://")
	for _, value := range []string{"small", strings.Repeat("x", 2<<20)} { // etcd refuses over 1.5 MiB
		note := &peerNote{}
		ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), peerNoteKey{}, note), 10*time.Second)
		_, err := cli.Put(ctx, "k", value)
		cancel()
		if (len(value) > 100) != (err != nil) {
			t.Fatalf("put of %d bytes: %v", len(value), err)
		}
		if note.addr != want {
			t.Errorf("put of %d bytes (err %v) noted %q, want %q", len(value), err, note.addr, want)
		}
	}
}

func TestSameSet(t *testing.T) {
	for _, tc := range []struct {
		a, b []string
		want bool
	}{
		{[]string{"x", "y"}, []string{"y", "x"}, true},
		{[]string{"x", "y"}, []string{"x"}, false},
		{[]string{"x", "x"}, []string{"x", "y"}, false},
		{nil, nil, true},
	} {
		if got := sameSet(tc.a, tc.b); got != tc.want {
			t.Errorf("sameSet(%v, %v) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}
