package netpolicy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/quorumkeeper/etcd-operator/test/localcluster/netsetup"
)

// The test binary doubles as the listener and the dialer run in Pod namespaces through
// `ip netns exec` (the machine has no nc).
const helperModeEnv = "NETPOLICY_TEST_HELPER"

// helperLifetime bounds a helper even if the test dies without killing it.
const helperLifetime = 60 * time.Second

func TestMain(m *testing.M) {
	switch os.Getenv(helperModeEnv) {
	case "":
		os.Exit(m.Run())
	case "listen":
		fmt.Fprintln(os.Stderr, listen(os.Args[len(os.Args)-1]))
		os.Exit(1)
	case "dial":
		os.Exit(dial(os.Args[len(os.Args)-1]))
	default:
		os.Exit(2)
	}
}

// listen answers every connection to addr until helperLifetime passes (then the process
// exits 3); it returns only why it could not listen or accept.
func listen(addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	time.AfterFunc(helperLifetime, func() { os.Exit(3) })
	fmt.Println("ready")
	for {
		conn, err := l.Accept()
		if err != nil {
			return err
		}
		_, _ = io.WriteString(conn, "hello\n")
		conn.Close()
	}
}

// dial exits 0 when a connection to addr opens within two seconds: long enough on one
// bridge, short enough that a dropped SYN is not retried into a later rule change.
func dial(addr string) int {
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	conn.Close()
	return 0
}

// testNetwork stays clear of the real local cluster's bridge, addresses and namespaces, and
// testTable of its table, so that the test can run while a cluster is up.
func testNetwork() netsetup.Config {
	return netsetup.Config{
		Bridge: "lcbrnp", BridgeCIDR: netip.MustParsePrefix("10.218.0.1/24"),
		ServiceCIDR: netip.MustParsePrefix("10.218.1.0/24"), NSPrefix: "lcnp-",
	}
}

const testTable = DefaultTable + "-test"

func inNamespace(cfg netsetup.Config, pod, mode, arg string) *exec.Cmd {
	self, _ := os.Executable()
	cmd := exec.Command("/usr/sbin/ip", "netns", "exec", cfg.NSPrefix+pod, self, arg)
	cmd.Env = append(os.Environ(), helperModeEnv+"="+mode)
	return cmd
}

// TestTableEnforcesIngressBetweenPods: with the table of a ruleset that isolates one Pod and
// admits one other Pod to one port, the kernel lets that Pod connect, refuses a third Pod
// and still lets the host in; once the table is removed, the third Pod connects again.
func TestTableEnforcesIngressBetweenPods(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatalf("this test configures the host network and must run as root")
	}
	cfg := testNetwork()
	server, client, other := netip.MustParseAddr("10.218.0.2"), netip.MustParseAddr("10.218.0.3"), netip.MustParseAddr("10.218.0.4")
	if err := netsetup.SetUp(cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := Remove(testTable); err != nil {
			t.Error(err)
		}
		if err := netsetup.TearDown(cfg); err != nil {
			t.Error(err)
		}
	})
	for name, ip := range map[string]netip.Addr{"server": server, "client": client, "other": other} {
		if _, err := netsetup.AddPod(cfg, name, ip); err != nil {
			t.Fatal(err)
		}
	}
	target := netip.AddrPortFrom(server, 7777).String()
	startListener(t, cfg, "server", target)

	rules := Ruleset{server: {{Sources: []netip.Addr{client}, Ports: []Port{{Protocol: corev1.ProtocolTCP, Port: 7777}}}}}
	if err := Apply(testTable, rules); err != nil {
		t.Fatal(err)
	}
	checkDial(t, cfg, "client", target, true)
	checkDial(t, cfg, "other", target, false)
	conn, err := net.DialTimeout("tcp", target, 2*time.Second)
	if err != nil {
		t.Fatalf("host -> %s: %v", target, err)
	}
	conn.Close()

	if err := Remove(testTable); err != nil {
		t.Fatal(err)
	}
	checkDial(t, cfg, "other", target, true)
	if err := Remove(testTable); err != nil {
		t.Fatalf("removing a missing table: %v", err)
	}
	if left, err := TableExists(testTable); err != nil || left {
		t.Fatalf("table %s left after Remove (%v)", testTable, err)
	}
}

func checkDial(t *testing.T, cfg netsetup.Config, from, target string, want bool) {
	t.Helper()
	out, err := inNamespace(cfg, from, "dial", target).CombinedOutput()
	if (err == nil) != want {
		t.Fatalf("%s -> %s: connected %v, want %v (%s)", from, target, err == nil, want, out)
	}
}

// startListener runs the listener in pod, waits for it to say "ready" and kills it at cleanup.
func startListener(t *testing.T, cfg netsetup.Config, pod, addr string) {
	t.Helper()
	cmd := inNamespace(cfg, pod, "listen", addr)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	ready := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		ready <- line
	}()
	select {
	case line := <-ready:
		if line != "ready\n" {
			t.Fatalf("listener in %s: %q", pod, line)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("listener in %s did not become ready", pod)
	}
}
