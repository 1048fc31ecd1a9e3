// Package e2e tests the local cluster itself end to end: it starts it with `make local-up`,
// runs Pods on it through the API and kubectl, then stops it with `make local-down` and checks
// that the machine is left clean.
//
//	go -C test test ./localcluster/e2e/ -count=1 -v -timeout 20m
//
// It needs root (network namespaces, mounts), as the local cluster does.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/quorumkeeper/etcd-operator/test/localcluster/netpolicy"
)

const (
	stateDir    = "/var/lib/etcd-operator-localcluster"
	marker      = "LOCALCLUSTER_DIR=" + stateDir
	bridge      = "lcbr0"
	netnsPrefix = "lc-"

	upTimeout   = 15 * time.Minute // a cold cache builds etcd and the operator first
	downTimeout = 3 * time.Minute
)

// The cluster every test uses, set up by TestMain.
var (
	repoRoot   string
	kubeconfig string
	kubectlBin string
	client     kubernetes.Interface
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) (code int) {
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "e2e: the local cluster needs root")
		return 1
	}
	release, err := takeMachineLock()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer release()
	repoRoot, err = filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer func() {
		if err := tearDown(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: tearing down:", err)
			code = 1
		}
	}()
	if err := setUp(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: setting up:", err)
		return 1
	}
	return m.Run()
}

// takeMachineLock takes the machine's one local cluster lock, which make test-localcluster
// holds for this package already (it says so in LOCALCLUSTER_LOCK_HELD). A plain go test of
// this package, even one that runs no test (-run '^$' to see that it compiles), starts and
// stops the local cluster in TestMain: without the lock it would stop a cluster that
// make test-e2e, make robustness or make soak is using. It does not wait: a person who ran
// it by hand learns at once who has the cluster.
func takeMachineLock() (release func(), err error) {
	if os.Getenv("LOCALCLUSTER_LOCK_HELD") != "" {
		return func() {}, nil
	}
	path := os.Getenv("LOCALCLUSTER_LOCK")
	if path == "" {
		path = "/tmp/etcd-operator-localcluster.lock"
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("the local cluster is in use (%s is locked by another make test-e2e, robustness, soak or bench): wait for it, or run make test-localcluster, which waits: %w", path, err)
	}
	return func() { _ = f.Close() }, nil
}

func setUp() error {
	began := time.Now()
	// With both add-ons, so that their tests below run against the real thing.
	if err := os.Setenv("LOCALCLUSTER_ADDONS", "cert-manager minio"); err != nil {
		return err
	}
	stdout, out, err := runSplit(repoRoot, upTimeout, "make", "--no-print-directory", "local-up")
	if err != nil {
		return fmt.Errorf("make local-up: %w\n%s", err, out)
	}
	kubeconfig = lastLine(stdout)
	fmt.Fprintf(os.Stderr, "e2e: make local-up took %s; kubeconfig %s\n", time.Since(began).Round(time.Millisecond), kubeconfig)
	if _, err := os.Stat(kubeconfig); err != nil {
		return fmt.Errorf("make local-up did not end with a kubeconfig path: %w\n%s", err, out)
	}
	out, err = runIn(repoRoot, upTimeout, "hack/testbed.sh", "kube")
	if err != nil {
		return fmt.Errorf("hack/testbed.sh kube: %w\n%s", err, out)
	}
	kubectlBin = filepath.Join(lastLine(out), "kubectl")
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cfg.Timeout = 30 * time.Second
	client, err = kubernetes.NewForConfig(cfg)
	return err
}

// tearDown runs make local-down, then checks that nothing of the cluster is left.
func tearDown() error {
	began := time.Now()
	out, err := runIn(repoRoot, downTimeout, "make", "--no-print-directory", "local-down")
	if err != nil {
		return fmt.Errorf("make local-down: %w\n%s", err, out)
	}
	fmt.Fprintf(os.Stderr, "e2e: make local-down took %s\n", time.Since(began).Round(time.Millisecond))
	return leftovers()
}

// leftovers lists whatever the local cluster left on the machine.
func leftovers() error {
	var errs []error
	out, err := runIn("/", 30*time.Second, "ip", "netns", "list")
	if err != nil {
		errs = append(errs, fmt.Errorf("ip netns list: %w\n%s", err, out))
	}
	for _, line := range strings.Split(out, "\n") {
		if name, _, _ := strings.Cut(strings.TrimSpace(line), " "); strings.HasPrefix(name, netnsPrefix) {
			errs = append(errs, fmt.Errorf("network namespace %s is left", name))
		}
	}
	if _, err := os.Lstat(filepath.Join("/sys/class/net", bridge)); err == nil {
		errs = append(errs, fmt.Errorf("link %s is left", bridge))
	}
	if out, err := runIn("/", 30*time.Second, "ip", "link", "show", bridge); err == nil {
		errs = append(errs, fmt.Errorf("ip link show %s still finds it:\n%s", bridge, out))
	}
	switch left, err := netpolicy.TableExists(netpolicy.DefaultTable); {
	case err != nil:
		errs = append(errs, fmt.Errorf("looking for nftables table %s: %w", netpolicy.DefaultTable, err))
	case left:
		errs = append(errs, fmt.Errorf("nftables table %s is left", netpolicy.DefaultTable))
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		errs = append(errs, err)
	}
	for _, line := range strings.Split(string(mounts), "\n") {
		fields := strings.Fields(line)
		if len(fields) > 4 && (fields[4] == stateDir || strings.HasPrefix(fields[4], stateDir+"/")) {
			errs = append(errs, fmt.Errorf("mount %s is left", fields[4]))
		}
	}
	for _, pid := range markedProcesses() {
		cmdline, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
		errs = append(errs, fmt.Errorf("process %d (%s) is left", pid, bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '})))
	}
	if _, err := os.Lstat(stateDir); !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, fmt.Errorf("%s is left (%w)", stateDir, err))
	}
	return errors.Join(errs...)
}

// markedProcesses are the live processes carrying the cluster's marker in their environment.
func markedProcesses() []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		for _, kv := range bytes.Split(env, []byte{0}) {
			if string(kv) == marker {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

// runIn runs a command in dir within limit and returns its combined output.
func runIn(dir string, limit time.Duration, name string, args ...string) (string, error) {
	_, combined, err := runSplit(dir, limit, name, args...)
	return combined, err
}

// runSplit runs a command in dir within limit and returns its standard output and its
// combined output.
func runSplit(dir string, limit time.Duration, name string, args ...string) (stdout, combined string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.WaitDelay = 10 * time.Second // a background child holding the output must not hang us
	var out, all lockedBuffer
	cmd.Stdout, cmd.Stderr = io.MultiWriter(&out, &all), &all
	err = cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("%w (limit %s)", ctx.Err(), limit)
	}
	return out.String(), all.String(), err
}

// lockedBuffer is a bytes.Buffer that two writers (stdout and stderr copiers) may share.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func lastLine(s string) string {
	var last string
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" {
			last = line
		}
	}
	return last
}
