package netsetup

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testConfig stays clear of the real local cluster (lcbr0, 10.213/16, 10.214/16, lc-)
// so the tests can run while a cluster is up.
func testConfig() Config {
	return Config{
		Bridge:      "lcbrt",
		BridgeCIDR:  netip.MustParsePrefix("10.219.0.1/24"),
		ServiceCIDR: netip.MustParsePrefix("10.219.1.0/24"),
		NSPrefix:    "lct-",
	}
}

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatalf("this test configures the host network and must run as root")
	}
}

// uniquePodName returns prefix plus random hex, short enough for any pod name rule.
func uniquePodName(t *testing.T, prefix string) string {
	t.Helper()
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return prefix + hex.EncodeToString(b)
}

// footprint lists everything of cfg visible on the host: namespaces, links (bridge and
// the veths attached to it or named after its pods) and routes in its CIDRs.
func footprint(t *testing.T, cfg Config, pods ...string) []string {
	t.Helper()
	var found []string
	namespaces, err := listNamespaces(cfg.NSPrefix)
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range namespaces {
		found = append(found, "netns "+ns)
	}
	links := []string{cfg.Bridge}
	for _, p := range pods {
		links = append(links, HostVethName(cfg, p))
	}
	for _, l := range links {
		if linkExists(l) {
			found = append(found, "link "+l)
		}
	}
	routes := mustIP(t, "route", "show", "table", "all")
	for _, line := range strings.Split(routes, "\n") {
		if strings.Contains(line, "10.219.") {
			found = append(found, "route "+line)
		}
	}
	return found
}

func mustIP(t *testing.T, args ...string) string {
	t.Helper()
	out, err := runIP(args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(data))
}

func TestPodNetworkLifecycle(t *testing.T) {
	requireRoot(t)
	cfg := testConfig()
	a, b := uniquePodName(t, "t1"), uniquePodName(t, "t2")
	ipA, ipB := netip.MustParseAddr("10.219.0.10"), netip.MustParseAddr("10.219.0.11")

	if err := TearDown(cfg); err != nil { // leftovers of a crashed earlier run
		t.Fatalf("initial TearDown: %v", err)
	}
	if left := footprint(t, cfg, a, b); len(left) != 0 {
		t.Fatalf("test network not clean before the test: %v", left)
	}
	forwarding := readFile(t, "/proc/sys/net/ipv4/ip_forward")
	t.Cleanup(func() {
		if err := TearDown(cfg); err != nil {
			t.Errorf("TearDown: %v", err)
		}
		if left := footprint(t, cfg, a, b); len(left) != 0 {
			t.Errorf("TearDown left: %v", left)
		}
		if got := readFile(t, "/proc/sys/net/ipv4/ip_forward"); got != forwarding {
			t.Errorf("ip_forward changed from %s to %s", forwarding, got)
		}
	})

	setUpTwice(t, cfg)
	pathA := addPodTwice(t, cfg, a, ipA)
	addPodTwice(t, cfg, b, ipB)
	if _, err := AddPod(cfg, a, netip.MustParseAddr("10.219.0.12")); err == nil {
		t.Errorf("re-adding pod %s with another address succeeded", a)
	}
	checkPodRoutes(t, pathA)
	checkConnectivity(t, cfg, a, b, ipB)

	if err := RemovePod(cfg, a); err != nil {
		t.Fatalf("RemovePod: %v", err)
	}
	if err := RemovePod(cfg, a); err != nil {
		t.Fatalf("second RemovePod: %v", err)
	}
	if namespaceExists(cfg.NSPrefix+a) || linkExists(HostVethName(cfg, a)) {
		t.Fatalf("RemovePod left namespace or veth of %s", a)
	}
	if !namespaceExists(cfg.NSPrefix + b) {
		t.Fatalf("RemovePod(%s) removed pod %s too", a, b)
	}
}

func setUpTwice(t *testing.T, cfg Config) {
	t.Helper()
	for range 2 {
		if err := SetUp(cfg); err != nil {
			t.Fatalf("SetUp: %v", err)
		}
	}
	addrs := mustIP(t, "-o", "-4", "addr", "show", "dev", cfg.Bridge)
	if !strings.Contains(addrs, "inet "+cfg.BridgeCIDR.String()+" ") || strings.Count(addrs, "inet ") != 1 {
		t.Errorf("bridge addresses = %q, want exactly %s", addrs, cfg.BridgeCIDR)
	}
	if !linkIsUp(cfg.Bridge) || !isBridge(cfg.Bridge) {
		t.Errorf("%s is not an up bridge", cfg.Bridge)
	}
	if got := readFile(t, "/proc/sys/net/ipv6/conf/"+cfg.Bridge+"/disable_ipv6"); got != "1" {
		t.Errorf("IPv6 on the bridge: disable_ipv6=%s", got)
	}
	if out := mustIP(t, "route", "show", "exact", "10.219.1.0/24", "type", "unreachable"); out == "" {
		t.Errorf("no unreachable route for the service CIDR")
	}
	if out, err := runIP("route", "get", "10.219.1.7"); err == nil {
		t.Errorf("a service IP is routable from the host: %s", out)
	}
	if out := mustIP(t, "route", "show", "default", "dev", cfg.Bridge); out != "" {
		t.Errorf("default route through the bridge: %s", out)
	}
}

func addPodTwice(t *testing.T, cfg Config, name string, ip netip.Addr) string {
	t.Helper()
	first, err := AddPod(cfg, name, ip)
	if err != nil {
		t.Fatalf("AddPod(%s): %v", name, err)
	}
	second, err := AddPod(cfg, name, ip)
	if err != nil || second != first {
		t.Fatalf("second AddPod(%s) = %q, %v; want %q", name, second, err, first)
	}
	if first != filepath.Join("/run/netns", cfg.NSPrefix+name) {
		t.Fatalf("namespace path = %q", first)
	}
	if veth := HostVethName(cfg, name); linkMaster(veth) != cfg.Bridge {
		t.Fatalf("veth %s of %s is not on %s", veth, name, cfg.Bridge)
	}
	return first
}

// checkPodRoutes asserts the pod's main table holds only the bridge subnet.
func checkPodRoutes(t *testing.T, nsPath string) {
	t.Helper()
	routes := mustIP(t, "-n", filepath.Base(nsPath), "route", "show")
	lines := strings.Split(routes, "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "10.219.0.0/24 dev eth0") {
		t.Fatalf("pod routes = %q, want only 10.219.0.0/24 dev eth0", routes)
	}
}

// checkConnectivity has pod a and the host each open a TCP connection to a listener in
// pod b.
func checkConnectivity(t *testing.T, cfg Config, a, b string, ipB netip.Addr) {
	t.Helper()
	target := netip.AddrPortFrom(ipB, 7777).String()
	startHelper(t, cfg.NSPrefix+b, "listen", target, "2")

	out, err := helperCommand(cfg.NSPrefix+a, "dial", target).Output()
	if err != nil || string(out) != "hello" {
		t.Fatalf("pod %s -> %s: output %q, %v", a, target, out, err)
	}
	conn, err := net.DialTimeout("tcp", target, 5*time.Second)
	if err != nil {
		t.Fatalf("host -> %s: %v", target, err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if line, err := bufio.NewReader(conn).ReadString('\n'); err != nil || line != "hello\n" {
		t.Fatalf("host -> %s: read %q, %v", target, line, err)
	}
}

func helperCommand(ns, mode string, args ...string) *exec.Cmd {
	self, _ := os.Executable()
	cmd := exec.Command(ipBinary(), append([]string{"netns", "exec", ns, self}, args...)...)
	cmd.Env = append(os.Environ(), helperModeEnv+"="+mode)
	cmd.Stderr = os.Stderr
	return cmd
}

// startHelper runs a helper in ns, waits for it to say "ready" if it listens, and kills
// it (by its PID) at cleanup.
func startHelper(t *testing.T, ns, mode string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := helperCommand(ns, mode, args...)
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
	if mode != "listen" {
		return cmd
	}
	ready := make(chan error, 1)
	go func() {
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if err == nil && line != "ready\n" {
			err = errors.New("unexpected output " + line)
		}
		ready <- err
	}()
	select {
	case err := <-ready:
		if err != nil {
			t.Fatalf("helper in %s: %v", ns, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("helper in %s did not become ready", ns)
	}
	return cmd
}

func TestAddPodRebuildsHalfCreatedPod(t *testing.T) {
	requireRoot(t)
	cfg := testConfig()
	name := uniquePodName(t, "t3")
	cleanNetwork(t, cfg, name)
	if err := SetUp(cfg); err != nil {
		t.Fatal(err)
	}
	// A crash right after `ip netns add` leaves an empty namespace behind.
	mustIP(t, "netns", "add", cfg.NSPrefix+name)
	nsPath, err := AddPod(cfg, name, netip.MustParseAddr("10.219.0.20"))
	if err != nil {
		t.Fatalf("AddPod over a half-created pod: %v", err)
	}
	checkPodRoutes(t, nsPath)
	if !linkIsUp(HostVethName(cfg, name)) {
		t.Fatalf("host veth not up after rebuild")
	}
}

func TestTearDownRemovesBusyNamespace(t *testing.T) {
	requireRoot(t)
	cfg := testConfig()
	name := uniquePodName(t, "t4")
	cleanNetwork(t, cfg, name)
	if err := SetUp(cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := AddPod(cfg, name, netip.MustParseAddr("10.219.0.30")); err != nil {
		t.Fatal(err)
	}
	// A process still inside keeps the namespace alive after it is unlinked, so the
	// veth must be deleted explicitly.
	helper := startHelper(t, cfg.NSPrefix+name, "sleep")
	waitUntilInOtherNamespace(t, helper.Process.Pid)
	if err := TearDown(cfg); err != nil {
		t.Fatalf("TearDown with a busy namespace: %v", err)
	}
	if left := footprint(t, cfg, name); len(left) != 0 {
		t.Fatalf("TearDown left: %v", left)
	}
}

func TestAddPodRejectsBadInput(t *testing.T) {
	cfg := testConfig()
	bad := map[string]struct {
		name string
		ip   string
	}{
		"upper case":      {"Pod", "10.219.0.5"},
		"slash":           {"a/b", "10.219.0.5"},
		"empty":           {"", "10.219.0.5"},
		"outside subnet":  {"p", "10.220.0.5"},
		"bridge address":  {"p", "10.219.0.1"},
		"network address": {"p", "10.219.0.0"},
		"broadcast":       {"p", "10.219.0.255"},
	}
	for what, c := range bad {
		if _, err := AddPod(cfg, c.name, netip.MustParseAddr(c.ip)); err == nil {
			t.Errorf("%s: AddPod(%q, %s) succeeded", what, c.name, c.ip)
			_ = RemovePod(cfg, c.name)
		}
	}
}

func TestHostVethNamesFitAndDifferPerConfig(t *testing.T) {
	long := strings.Repeat("a", MaxPodNameLength)
	name := HostVethName(DefaultConfig(), long)
	if len(name) > 15 || !strings.HasPrefix(name, "lcv") {
		t.Fatalf("HostVethName = %q", name)
	}
	if HostVethName(DefaultConfig(), "p") == HostVethName(testConfig(), "p") {
		t.Fatalf("test and default configs share veth names")
	}
}

// cleanNetwork tears the test config down before and after a test and checks nothing
// of it remains.
func cleanNetwork(t *testing.T, cfg Config, pods ...string) {
	t.Helper()
	if err := TearDown(cfg); err != nil {
		t.Fatalf("initial TearDown: %v", err)
	}
	t.Cleanup(func() {
		if err := TearDown(cfg); err != nil {
			t.Errorf("TearDown: %v", err)
		}
		if left := footprint(t, cfg, pods...); len(left) != 0 {
			t.Errorf("TearDown left: %v", left)
		}
	})
}

// waitUntilInOtherNamespace waits until `ip netns exec` (pid) has entered the namespace.
func waitUntilInOtherNamespace(t *testing.T, pid int) {
	t.Helper()
	own, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid)); err == nil && ns != own {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("process %d never entered the pod namespace", pid)
}
