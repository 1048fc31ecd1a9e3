package etcd

// Helpers that run real etcd processes on 127.0.0.1 for the integration tests.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/quorumkeeper/etcd-operator/internal/etcdversion"
)

const (
	etcdTestVersion = "3.6.16"
	// Short raft timings make elections and leader transfers quick on a
	// loaded 2-core machine without making the cluster flap.
	heartbeatMillis = "50"
	electionMillis  = "500"
	stopGrace       = 5 * time.Second
	startupTimeout  = 20 * time.Second
)

// etcdDirsEnv names the directories, separated by ":", that hold the etcd releases the
// layer's tests run against (each as hack/testbed.sh etcd V prints it; make test-unit lists
// the oldest and newest patch of every supported minor). The newest release listed runs every
// test; the others run the tests that go through forEachRelease: membership, status and
// health, defragmentation and alarms, the downgrade calls, auth. Unset, the tests run etcd
// etcdTestVersion alone, built through hack/testbed.sh.
const etcdDirsEnv = "ETCD_TEST_DIRS"

// release is one etcd release the tests can start.
type release struct {
	version etcdversion.Version
	etcd    string // the etcd binary
}

var (
	releasesOnce sync.Once
	releasesList []release // oldest first
	releasesErr  error

	etcdBinMu    sync.Mutex
	etcdBinPaths = map[string]string{}
)

// releases is every release the tests run against, oldest first.
func releases(t *testing.T) []release {
	t.Helper()
	if listed := listed(t); len(listed) > 0 {
		return listed
	}
	return []release{releaseOf(t, etcdTestVersion)}
}

// listed is the releases etcdDirsEnv lists, oldest first.
func listed(t *testing.T) []release {
	t.Helper()
	releasesOnce.Do(func() { releasesList, releasesErr = listedReleases(os.Getenv(etcdDirsEnv)) })
	if releasesErr != nil {
		t.Fatalf("%s: %v", etcdDirsEnv, releasesErr)
	}
	return releasesList
}

// listedReleases reads the releases in dirs (":"-separated): each directory's etcd, and the
// version it says it is.
func listedReleases(dirs string) ([]release, error) {
	var out []release
	for dir := range strings.SplitSeq(dirs, string(os.PathListSeparator)) {
		if dir = strings.TrimSpace(dir); dir == "" {
			continue
		}
		bin := filepath.Join(dir, "etcd")
		text, err := exec.Command(bin, "--version").Output()
		if err != nil {
			return nil, fmt.Errorf("%s --version: %w", bin, err)
		}
		m := regexp.MustCompile(`(?m)^etcd Version: (\S+)$`).FindSubmatch(text)
		v, ok := etcdversion.Version{}, false
		if m != nil {
			v, ok = etcdversion.Parse(string(m[1]))
		}
		if !ok {
			return nil, fmt.Errorf("%s --version names no version:\n%s", bin, text)
		}
		out = append(out, release{version: v, etcd: bin})
	}
	slices.SortFunc(out, func(a, b release) int { return a.version.Compare(b.version) })
	return out, nil
}

// newestRelease is the release every test runs against.
func newestRelease(t *testing.T) release {
	t.Helper()
	all := releases(t)
	return all[len(all)-1]
}

// forEachRelease runs fn as a parallel subtest, named by the version, on every release.
func forEachRelease(t *testing.T, fn func(t *testing.T, r release)) {
	t.Helper()
	for _, r := range releases(t) {
		t.Run(r.version.String(), func(t *testing.T) {
			t.Parallel()
			fn(t, r)
		})
	}
}

// releaseOf is the release at version: the one listed in etcdDirsEnv, or else built (or
// reused from its cache) through the testbed script, once per test binary.
func releaseOf(t *testing.T, version string) release {
	t.Helper()
	v := etcdversion.MustParse(version)
	for _, r := range listed(t) {
		if r.version == v {
			return r
		}
	}
	return release{version: v, etcd: etcdBinaryOf(t, version)}
}

// etcdBinaryOf builds (or reuses the cached build of) etcd at version through the repo's
// testbed script, once per test binary.
func etcdBinaryOf(t *testing.T, version string) string {
	t.Helper()
	etcdBinMu.Lock()
	defer etcdBinMu.Unlock()
	if path, ok := etcdBinPaths[version]; ok {
		return path
	}
	path, err := buildEtcd(version)
	if err != nil {
		t.Fatalf("getting etcd %s: %v", version, err)
	}
	etcdBinPaths[version] = path
	return path
}

func buildEtcd(version string) (string, error) {
	script, err := filepath.Abs(filepath.Join("..", "..", "hack", "testbed.sh"))
	if err != nil {
		return "", err
	}
	// A cold build takes about two minutes; a warm one returns at once.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "bash", script, "etcd", version)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s: %w\n%s", script, err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	bin := filepath.Join(strings.TrimSpace(lines[len(lines)-1]), "etcd")
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("testbed printed no etcd binary: %w", err)
	}
	return bin, nil
}

var (
	portsMu    sync.Mutex
	portsGiven = map[int]bool{}
)

// freePort asks the kernel for an unused port. Ports already handed out in
// this test binary are skipped, so parallel tests cannot collide with each
// other even before their etcd has bound the port.
func freePort(t *testing.T) int {
	t.Helper()
	portsMu.Lock()
	defer portsMu.Unlock()
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("free port: %v", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		if !portsGiven[port] {
			portsGiven[port] = true
			return port
		}
	}
	t.Fatal("free port: kernel kept returning ports already in use")
	return 0
}

// etcdMember is one etcd process (running or about to be).
type etcdMember struct {
	name      string
	peerURL   string
	clientURL string
	dataDir   string
	logPath   string
	extraArgs []string
	binary    string // "" = the newest release's etcd

	cmd    *exec.Cmd
	exited chan struct{} // closed once the process has been reaped
}

// newMemberSpec allocates ports and a data dir; nothing runs yet. It runs the newest release.
func newMemberSpec(t *testing.T, name, clientScheme string, extraArgs ...string) *etcdMember {
	t.Helper()
	return newMemberSpecOn(t, newestRelease(t), name, clientScheme, extraArgs...)
}

// newMemberSpecOn is newMemberSpec of the release r.
func newMemberSpecOn(t *testing.T, r release, name, clientScheme string, extraArgs ...string) *etcdMember {
	t.Helper()
	dir := t.TempDir()
	return &etcdMember{
		binary:    r.etcd,
		name:      name,
		peerURL:   fmt.Sprintf("http://127.0.0.1:%d", freePort(t)),
		clientURL: fmt.Sprintf("%s://127.0.0.1:%d", clientScheme, freePort(t)),
		dataDir:   filepath.Join(dir, "data"),
		logPath:   filepath.Join(dir, "etcd.log"),
		extraArgs: extraArgs,
	}
}

func initialCluster(members []*etcdMember) string {
	parts := make([]string, 0, len(members))
	for _, m := range members {
		parts = append(parts, m.name+"="+m.peerURL)
	}
	return strings.Join(parts, ",")
}

func endpointsOf(members []*etcdMember) []string {
	eps := make([]string, 0, len(members))
	for _, m := range members {
		eps = append(eps, m.clientURL)
	}
	return eps
}

// start launches the process and registers its shutdown with t.Cleanup.
func (m *etcdMember) start(t *testing.T, cluster, state, token string) {
	t.Helper()
	logFile, err := os.Create(m.logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = logFile.Close() }() // the child keeps its own descriptor
	args := append([]string{
		"--name", m.name,
		"--data-dir", m.dataDir,
		"--listen-client-urls", m.clientURL,
		"--advertise-client-urls", m.clientURL,
		"--listen-peer-urls", m.peerURL,
		"--initial-advertise-peer-urls", m.peerURL,
		"--initial-cluster", cluster,
		"--initial-cluster-state", state,
		"--initial-cluster-token", token,
		"--heartbeat-interval", heartbeatMillis,
		"--election-timeout", electionMillis,
		"--log-level", "warn",
	}, m.extraArgs...)
	binary := m.binary
	if binary == "" {
		binary = newestRelease(t).etcd
	}
	m.cmd = exec.Command(binary, args...)
	m.cmd.Stdout, m.cmd.Stderr = logFile, logFile
	if err := m.cmd.Start(); err != nil {
		t.Fatalf("start etcd %s: %v", m.name, err)
	}
	m.exited = make(chan struct{})
	go func() { _ = m.cmd.Wait(); close(m.exited) }()
	t.Cleanup(func() {
		m.stop(t)
		if t.Failed() {
			t.Logf("etcd %s log tail:\n%s", m.name, tailFile(m.logPath, 15))
		}
	})
}

// stop sends SIGTERM, then SIGKILL after a grace period; safe to call twice.
func (m *etcdMember) stop(t *testing.T) {
	t.Helper()
	if m.cmd == nil {
		return
	}
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.exited:
		return
	case <-time.After(stopGrace):
	}
	_ = m.cmd.Process.Kill()
	select {
	case <-m.exited:
	case <-time.After(stopGrace):
		t.Errorf("etcd %s (pid %d) did not exit after SIGKILL", m.name, m.cmd.Process.Pid)
	}
}

func tailFile(path string, lines int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	all := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

// startStaticCluster starts n members of the newest release bootstrapped together with
// --initial-cluster and waits until every one of them sees a leader.
func startStaticCluster(t *testing.T, n int) []*etcdMember {
	t.Helper()
	return startStaticClusterOn(t, newestRelease(t), n)
}

// startStaticClusterOn is startStaticCluster of the release r.
func startStaticClusterOn(t *testing.T, r release, n int) []*etcdMember {
	t.Helper()
	members := make([]*etcdMember, n)
	for i := range members {
		members[i] = newMemberSpecOn(t, r, fmt.Sprintf("m%d", i), "http")
	}
	cluster, token := initialCluster(members), "token-"+t.Name()
	for _, m := range members {
		m.start(t, cluster, "new", token)
	}
	c := newTestClient(t, Config{Endpoints: endpointsOf(members)})
	for _, m := range members {
		waitForLeader(t, c, m.clientURL)
	}
	return members
}

// startJoiningMember starts a member that was already added (AddLearner) to
// the cluster formed by existing, with --initial-cluster-state=existing.
func startJoiningMember(t *testing.T, joiner *etcdMember, existing []*etcdMember) {
	t.Helper()
	all := append(append([]*etcdMember(nil), existing...), joiner)
	joiner.start(t, initialCluster(all), "existing", "token-ignored-when-joining")
}

func newTestClient(t *testing.T, cfg Config) Client {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatalf("New(%v): %v", cfg.Endpoints, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// waitForLeader polls Status of one endpoint until it reports a leader.
func waitForLeader(t *testing.T, c Client, endpoint string) Status {
	t.Helper()
	var st Status
	err := eventually(startupTimeout, func() error {
		var err error
		st, err = c.Status(shortContext(t), endpoint)
		if err == nil && st.Leader == 0 {
			err = errors.New("no leader yet")
		}
		return err
	})
	if err != nil {
		t.Fatalf("%s never reported a leader: %v", endpoint, err)
	}
	return st
}

// eventually retries fn every 100ms until it succeeds or the timeout passes,
// returning the last error.
func eventually(timeout time.Duration, fn func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := fn()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// shortContext bounds one request so a wedged call fails the test quickly.
func shortContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	t.Cleanup(cancel)
	return ctx
}
