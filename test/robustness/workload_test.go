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

// etcdBinary is the etcd of the test bed (hack/testbed.sh builds it once).
func etcdBinary(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("bash", "../../hack/testbed.sh", "etcd", "3.6.16").Output()
	if err != nil {
		t.Fatalf("hack/testbed.sh etcd: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return filepath.Join(lines[len(lines)-1], "etcd")
}

// member is one etcd process on loopback; start may be called again after a kill, on the
// same data directory.
type member struct {
	bin, name, dir, client, peer, initial string
	cmd                                   *exec.Cmd
}

func (m *member) start() error {
	m.cmd = exec.Command(m.bin, "--name", m.name, "--data-dir", m.dir,
		"--listen-client-urls", m.client, "--advertise-client-urls", m.client,
		"--listen-peer-urls", m.peer, "--initial-advertise-peer-urls", m.peer,
		"--initial-cluster", m.initial, "--initial-cluster-token", "robustness",
		"--heartbeat-interval", "50", "--election-timeout", "500", "--log-level", "error")
	m.cmd.Stderr = os.Stderr
	return m.cmd.Start()
}

func (m *member) kill() {
	_ = m.cmd.Process.Kill()
	_ = m.cmd.Wait()
}

// startEtcd runs an n-member etcd cluster on loopback for the test.
func startEtcd(t *testing.T, n int) []*member {
	t.Helper()
	bin := etcdBinary(t)
	members := make([]*member, n)
	var initial []string
	for i := range members {
		members[i] = &member{bin: bin, name: fmt.Sprintf("m%d", i), dir: filepath.Join(t.TempDir(), "data"),
			client: "http://" + freeAddr(t), peer: "http://" + freeAddr(t)}
		initial = append(initial, members[i].name+"="+members[i].peer)
	}
	for _, m := range members {
		m.initial = strings.Join(initial, ",")
		if err := m.start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(m.kill)
	}
	return members
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

func dialAll(t *testing.T, n int, urls ...string) []*clientv3.Client {
	t.Helper()
	var clients []*clientv3.Client
	for range n {
		cli, err := clientv3.New(clientv3.Config{Endpoints: urls, DialTimeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cli.Close() })
		clients = append(clients, cli)
	}
	return clients
}

// runAndCheck runs the workload and fails the test on any violation; it returns the history.
func runAndCheck(t *testing.T, w Workload) *History {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	h := NewHistory()
	final, err := w.Run(ctx, h)
	if err != nil {
		t.Fatal(err)
	}
	ops := h.Operations()
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
	t.Logf("%d operations, %d watch events, %d keys at the end", len(ops), wv.Events, len(final))
	return h
}

// The workload against a real etcd: every kind of operation recorded, the watcher sees every
// write, and the checkers find the history clean.
func TestWorkloadOnRealEtcdChecksClean(t *testing.T) {
	solo := startEtcd(t, 1)
	w := Workload{Clients: dialAll(t, 3, solo[0].client), Prefix: "solo", Keys: 4, Seed: 1,
		Pace: time.Millisecond, OpTimeout: 5 * time.Second, MaxOps: 200}
	ops := runAndCheck(t, w).Operations()
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
}

// The workload against three real etcd members while one is killed (SIGKILL) and started
// again on its data: whatever the clients got, the history checks clean.
func TestWorkloadThroughAMemberKillChecksClean(t *testing.T) {
	members := startEtcd(t, 3)
	var urls []string
	for _, m := range members {
		urls = append(urls, m.client)
	}
	w := Workload{Clients: dialAll(t, 3, urls...), Prefix: "trio", Keys: 4, Seed: 2,
		Pace: 5 * time.Millisecond, OpTimeout: 3 * time.Second, MaxOps: 400}
	restarted := make(chan error, 1)
	go func() {
		time.Sleep(time.Second)
		members[0].kill()
		time.Sleep(2 * time.Second)
		restarted <- members[0].start()
	}()
	ops := runAndCheck(t, w).Operations()
	if err := <-restarted; err != nil {
		t.Fatalf("restarting the killed member: %v", err)
	}
	unanswered := 0
	for _, op := range ops {
		if op.Output.Unknown {
			unanswered++
		}
	}
	t.Logf("%d writes without an answer", unanswered)
}
