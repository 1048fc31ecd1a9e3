package robustness

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// startEtcd runs one real etcd member on loopback for the test and returns its client URL.
func startEtcd(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("bash", "../../hack/testbed.sh", "etcd", "3.6.16").Output()
	if err != nil {
		t.Fatalf("hack/testbed.sh etcd: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	bin := filepath.Join(lines[len(lines)-1], "etcd")
	client, peer := "http://"+freeAddr(t), "http://"+freeAddr(t)
	cmd := exec.Command(bin, "--name", "solo", "--data-dir", filepath.Join(t.TempDir(), "data"),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer, "--initial-cluster", "solo="+peer,
		"--log-level", "error")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return client
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}

// The workload against a real etcd: every kind of operation recorded, the watcher sees every
// write, and the checkers find the history clean.
func TestWorkloadOnRealEtcdChecksClean(t *testing.T) {
	url := startEtcd(t)
	var clients []*clientv3.Client
	for range 3 {
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{url}, DialTimeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cli.Close() })
		clients = append(clients, cli)
	}
	w := Workload{Clients: clients, Prefix: "solo", Keys: 4, Seed: 1, Pace: time.Millisecond, OpTimeout: 5 * time.Second, MaxOps: 200}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	h := NewHistory()
	final, err := w.Run(ctx, h)
	if err != nil {
		t.Fatal(err)
	}
	ops := h.Operations()
	kinds := map[string]int{}
	for _, op := range ops {
		kind := string(op.Input.Kind)
		if op.Input.Kind == CAS {
			kind += fmt.Sprintf(" succeeded=%v", op.Output.Succeeded)
		}
		kinds[kind]++
	}
	for _, k := range []string{"put", "get", "cas succeeded=true", "cas succeeded=false"} {
		if kinds[k] == 0 {
			t.Fatalf("no %s among %d operations: %v", k, len(ops), kinds)
		}
	}
	if v := CheckLinearizable(ops, time.Minute); v.Violations != 0 || v.Unknown {
		t.Fatalf("linearizability: %+v", v)
	}
	wv := CheckWatches(ops, h.Watches())
	if len(wv.Violations) != 0 || wv.Events == 0 {
		t.Fatalf("watch: %d events, violations %q", wv.Events, wv.Violations)
	}
	if lost := LostWrites(ops, final); len(lost) != 0 {
		t.Fatalf("lost: %v", lost)
	}
	t.Logf("%d operations %v, %d watch events, %d keys at the end", len(ops), kinds, wv.Events, len(final))
}
