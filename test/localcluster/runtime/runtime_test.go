package runtime

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// helperBinary is testdata/helper, built once by TestMain.
var helperBinary string

func TestMain(m *testing.M) {
	// Start re-executes this test binary as container-init.
	if len(os.Args) > 1 && os.Args[1] == InitCommand {
		InitMain(os.Args[2:])
	}
	// TestContainerDiesWithTheNodeAgent runs this binary as a stand-in node agent.
	if os.Getenv(fakeAgentEnv) != "" {
		runFakeAgent()
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "these tests create mount namespaces and must run as root")
		os.Exit(1)
	}
	dir, err := os.MkdirTemp("", "lc-runtime-helper-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	helperBinary = filepath.Join(dir, "helper")
	build := exec.Command("go", "build", "-o", helperBinary, "./testdata/helper")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build helper: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// testEnv is a test's directory and marker; its cleanup checks that nothing is left.
type testEnv struct {
	t      *testing.T
	dir    string
	marker string
}

func newTestEnv(t *testing.T) *testEnv {
	env := &testEnv{t: t, dir: t.TempDir()}
	env.marker = "LC_RUNTIME_TEST=" + env.dir
	// Registered after TempDir and before any container: runs after every Stop and before
	// the directory is removed.
	t.Cleanup(env.assertNothingLeft)
	return env
}

// spec is a container running the helper with the given actions.
func (e *testEnv) spec(id string, actions ...string) ContainerSpec {
	return ContainerSpec{
		ID:        id,
		StateDir:  filepath.Join(e.dir, id, "state"),
		RootFiles: map[string]string{"/bin/helper": helperBinary},
		Args:      append([]string{"helper"}, actions...),
		Env:       []string{"PATH=/bin"},
		LogPath:   filepath.Join(e.dir, id, "log"),
		Marker:    e.marker,
	}
}

func (e *testEnv) start(spec ContainerSpec) *Container {
	e.t.Helper()
	c, err := Start(spec)
	if err != nil {
		e.t.Fatalf("Start(%s): %v", spec.ID, err)
	}
	e.t.Cleanup(func() { c.Stop(time.Second) })
	return c
}

// run starts the container, waits for its exit and returns exit code and log.
func (e *testEnv) run(spec ContainerSpec) (int, string) {
	e.t.Helper()
	c := e.start(spec)
	code, err := waitWithTimeout(c, 20*time.Second)
	if err != nil {
		e.t.Fatalf("Wait(%s): %v", spec.ID, err)
	}
	return code, readFile(e.t, spec.LogPath)
}

func (e *testEnv) writeFile(name, content string) string {
	e.t.Helper()
	p := filepath.Join(e.dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		e.t.Fatal(err)
	}
	return p
}

func (e *testEnv) mkdir(name string, mode os.FileMode) string {
	e.t.Helper()
	p := filepath.Join(e.dir, name)
	if err := os.MkdirAll(p, mode); err != nil {
		e.t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil { // MkdirAll's mode is filtered by the umask
		e.t.Fatal(err)
	}
	return p
}

// assertNothingLeft checks that no mount under the test directory is visible to us and that
// no process carries the test's marker.
func (e *testEnv) assertNothingLeft() {
	mountinfo := readFile(e.t, "/proc/self/mountinfo")
	if strings.Contains(mountinfo, e.dir) {
		e.t.Errorf("mounts left under %s:\n%s", e.dir, mountinfo)
	}
	if pids := processesWithEnv(e.marker); len(pids) > 0 {
		e.t.Errorf("processes left with %s: %v", e.marker, pids)
	}
	roots, _ := filepath.Glob(filepath.Join(e.dir, "*", "state", "rootfs"))
	if len(roots) > 0 {
		e.t.Errorf("container roots left: %v", roots)
	}
}

func processesWithEnv(marker string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, entry := range entries {
		pid, err := strconv.Atoi(entry.Name())
		if err != nil {
			continue
		}
		environ, err := os.ReadFile("/proc/" + entry.Name() + "/environ")
		if err == nil && slices.Contains(strings.Split(string(environ), "\x00"), marker) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func waitWithTimeout(c *Container, timeout time.Duration) (int, error) {
	select {
	case <-c.Done():
		return c.Wait()
	case <-time.After(timeout):
		return -1, fmt.Errorf("container %s still running after %v", c.ID(), timeout)
	}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// waitForLine polls the log for a line starting with prefix and returns the rest of it.
func waitForLine(t *testing.T, logPath, prefix string) string {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		data, _ := os.ReadFile(logPath)
		for line := range strings.SplitSeq(string(data), "\n") {
			if rest, ok := strings.CutPrefix(line, prefix); ok {
				return rest
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no line %q in %s: %s", prefix, logPath, readFileOrEmpty(logPath))
	return ""
}

func readFileOrEmpty(p string) string {
	data, _ := os.ReadFile(p)
	return string(data)
}

func assertLines(t *testing.T, output string, want ...string) {
	t.Helper()
	lines := strings.Split(output, "\n")
	for _, w := range want {
		if !slices.Contains(lines, w) {
			t.Errorf("output lacks line %q; output:\n%s", w, output)
		}
	}
}

func TestContainerSeesItsRootUserEnvironmentAndVolumes(t *testing.T) {
	env := newTestEnv(t)
	config := env.writeFile("config/app.conf", "config-content")
	hosts := env.writeFile("hosts", "10.213.1.2 pod-a")
	data := env.mkdir("data", 0o777)
	spec := env.spec("identity", "id", "cwd", "env", "read=/config/app.conf", "read=/etc/hosts",
		"read=/etc/resolv.conf", "write=/data/out", "write=/newfile", "write=/tmp/x",
		"write=/config/app.conf", "ls=/", "ls=/dev")
	spec.UID, spec.GID, spec.SupplementalGroups = 1000, 1001, []int{2000}
	spec.Env = append(spec.Env, "FOO=bar")
	spec.WorkingDir = "/app"
	spec.ReadOnlyRoot = true
	spec.HostsFile = hosts
	spec.Mounts = []Mount{
		{HostPath: config, ContainerPath: "/config/app.conf", ReadOnly: true},
		{HostPath: data, ContainerPath: "/data"},
	}

	code, log := env.run(spec)

	if code != 0 {
		t.Fatalf("exit code %d, log:\n%s", code, log)
	}
	assertLines(t, log,
		"uid=1000", "gid=1001", "groups=[2000]", "cwd=/app",
		"env=FOO=bar", "env=PATH=/bin", "env="+env.marker,
		"read /config/app.conf=config-content", "read /etc/hosts=10.213.1.2 pod-a", "read /etc/resolv.conf=",
		"write /data/out=ok",
		"ls /=app,bin,config,data,dev,etc,proc,sys,tmp",
		"ls /dev=fd,full,null,ptmx,pts,random,shm,stderr,stdin,stdout,tty,urandom,zero",
	)
	for _, readOnly := range []string{"/newfile", "/tmp/x", "/config/app.conf"} {
		if !strings.Contains(log, "write "+readOnly+"=error: ") {
			t.Errorf("writing %s should fail on a read-only root/mount; log:\n%s", readOnly, log)
		}
	}
	if got := readFile(t, filepath.Join(data, "out")); got != "written by container\n" {
		t.Errorf("rw volume: host sees %q", got)
	}
}

func TestWritableRootIsScratchSpace(t *testing.T) {
	env := newTestEnv(t)
	spec := env.spec("writable", "write=/newfile", "read=/newfile", "id", "cwd")
	code, log := env.run(spec)
	if code != 0 {
		t.Fatalf("exit code %d, log:\n%s", code, log)
	}
	assertLines(t, log, "write /newfile=ok", "read /newfile=written by container", "uid=0", "gid=0", "cwd=/")
}

func TestContainerServesTCPOnHostNetwork(t *testing.T) {
	env := newTestEnv(t)
	spec := env.spec("server", "serve")
	c := env.start(spec)
	port := waitForLine(t, spec.LogPath, "port=")

	conn, err := net.DialTimeout("tcp", "127.0.0.1:"+port, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	greeting, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil || greeting != "hello from the container\n" {
		t.Fatalf("greeting %q, %v", greeting, err)
	}
	if code := c.Stop(5 * time.Second); code != 128+int(syscall.SIGTERM) {
		t.Errorf("Stop: exit code %d, want %d", code, 128+int(syscall.SIGTERM))
	}
}

func TestExitCodes(t *testing.T) {
	env := newTestEnv(t)
	notExecutable := env.writeFile("data.txt", "just data")
	cases := []struct {
		name    string
		args    []string
		want    int
		wantLog string
	}{
		{"exit-7", []string{"helper", "print=bye", "exit=7"}, 7, "bye"},
		{"missing", []string{"/bin/missing"}, ExitCodeNotFound, "container-init: "},
		{"missing-in-path", []string{"missing"}, ExitCodeNotFound, "missing: not found"},
		{"not-executable", []string{"/bin/data.txt"}, ExitCodeCannotExecute, "permission denied"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := env.spec(tc.name)
			spec.Args = tc.args
			spec.RootFiles["/bin/data.txt"] = notExecutable
			code, log := env.run(spec)
			if code != tc.want {
				t.Errorf("exit code %d, want %d; log:\n%s", code, tc.want, log)
			}
			if !strings.Contains(log, tc.wantLog) {
				t.Errorf("log lacks %q:\n%s", tc.wantLog, log)
			}
		})
	}
}

func TestSetupFailureIsReportedInTheLog(t *testing.T) {
	env := newTestEnv(t)
	spec := env.spec("bad-volume", "id")
	spec.Mounts = []Mount{{HostPath: filepath.Join(env.dir, "does-not-exist"), ContainerPath: "/data"}}
	code, log := env.run(spec)
	if code != ExitCodeSetupFailed || !strings.Contains(log, "volume ") {
		t.Errorf("exit code %d (want %d), log:\n%s", code, ExitCodeSetupFailed, log)
	}
}

func TestStopEscalatesToSIGKILL(t *testing.T) {
	env := newTestEnv(t)
	spec := env.spec("stubborn", "ignore-term", "sleep=60s")
	c := env.start(spec)
	waitForLine(t, spec.LogPath, "ignoring-term=yes")

	began := time.Now()
	code := c.Stop(300 * time.Millisecond)
	elapsed := time.Since(began)

	if code != 128+int(syscall.SIGKILL) {
		t.Errorf("exit code %d, want %d", code, 128+int(syscall.SIGKILL))
	}
	if elapsed < 300*time.Millisecond || elapsed > 5*time.Second {
		t.Errorf("Stop took %v, want the 300ms grace and a prompt kill", elapsed)
	}
	if err := c.Signal(syscall.SIGTERM); err == nil {
		t.Error("Signal after Stop: want an error")
	}
}

func TestLeftoverProcessesAreKilledWhenTheMainProcessExits(t *testing.T) {
	env := newTestEnv(t)
	spec := env.spec("daemonizer", "spawn=60s", "exit=0")
	code, log := env.run(spec)
	if code != 0 {
		t.Fatalf("exit code %d, log:\n%s", code, log)
	}
	child, err := strconv.Atoi(waitForLine(t, spec.LogPath, "spawned="))
	if err != nil {
		t.Fatal(err)
	}
	// The detached child left the process group; it must be gone anyway (a zombie waiting
	// for its new parent has no namespace links).
	if isLive(child) {
		t.Errorf("detached child %d still runs", child)
	}
}

func TestExec(t *testing.T) {
	env := newTestEnv(t)
	data := env.mkdir("data", 0o755)
	env.writeFile("data/x", "volume-content")
	spec := env.spec("exec-target", "sleep=60s")
	spec.Env = append(spec.Env, "FOO=bar")
	spec.Mounts = []Mount{{HostPath: data, ContainerPath: "/data", ReadOnly: true}}
	spec.UID, spec.GID = 1234, 1234
	spec.WorkingDir = "/data"
	c := env.start(spec)
	ctx := context.Background()

	t.Run("environment, mounts, user, exit code", func(t *testing.T) {
		var stdout, stderr bytes.Buffer
		code, err := Exec(ctx, c, []string{"helper", "env", "read=/data/x", "id", "cwd", "ls=/", "exit=3"},
			ExecOptions{Stdout: &stdout, Stderr: &stderr})
		if err != nil || code != 3 {
			t.Fatalf("Exec: code %d, err %v, stderr %s", code, err, stderr.String())
		}
		assertLines(t, stdout.String(), "env=FOO=bar", "env="+env.marker, "read /data/x=volume-content",
			"uid=1234", "gid=1234", "cwd=/data", "ls /=bin,data,dev,etc,proc,sys,tmp")
	})
	t.Run("stdin", func(t *testing.T) {
		var stdout bytes.Buffer
		code, err := Exec(ctx, c, []string{"helper", "stdin", "tty"},
			ExecOptions{Stdin: strings.NewReader("ping\n"), Stdout: &stdout})
		if err != nil || code != 0 {
			t.Fatalf("Exec: code %d, err %v", code, err)
		}
		assertLines(t, stdout.String(), "stdin=ping", "tty=false")
	})
	t.Run("tty", func(t *testing.T) {
		var stdout bytes.Buffer
		code, err := Exec(ctx, c, []string{"helper", "tty", "env"}, ExecOptions{Stdout: &stdout, TTY: true})
		if err != nil || code != 0 {
			t.Fatalf("Exec: code %d, err %v", code, err)
		}
		output := strings.ReplaceAll(stdout.String(), "\r\n", "\n") // the terminal's line discipline
		assertLines(t, output, "tty=true", "env=TERM=xterm")
	})
	t.Run("cancel", func(t *testing.T) {
		cancelCtx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		began := time.Now()
		_, err := Exec(cancelCtx, c, []string{"helper", "sleep=60s"}, ExecOptions{})
		if err == nil || time.Since(began) > 5*time.Second {
			t.Errorf("cancelled Exec: err %v after %v", err, time.Since(began))
		}
	})
	t.Run("after stop", func(t *testing.T) {
		c.Stop(time.Second)
		if _, err := Exec(ctx, c, []string{"helper", "id"}, ExecOptions{}); err == nil {
			t.Error("Exec in a stopped container: want an error")
		}
	})
}

func TestContainersDoNotSeeEachOthersVolumes(t *testing.T) {
	env := newTestEnv(t)
	for _, name := range []string{"a", "b"} {
		env.writeFile("vol-"+name+"/only-"+name, "content-"+name)
	}
	var specs []ContainerSpec
	for _, name := range []string{"a", "b"} {
		spec := env.spec("volume-"+name, "sleep=60s")
		spec.Mounts = []Mount{{HostPath: filepath.Join(env.dir, "vol-"+name), ContainerPath: "/data"}}
		specs = append(specs, spec)
	}
	// Both run at the same time, so their mount namespaces coexist.
	containers := []*Container{env.start(specs[0]), env.start(specs[1])}
	for i, name := range []string{"a", "b"} {
		var stdout bytes.Buffer
		code, err := Exec(context.Background(), containers[i], []string{"helper", "ls=/data", "read=/data/only-" + name},
			ExecOptions{Stdout: &stdout})
		if err != nil || code != 0 {
			t.Fatalf("Exec: code %d, err %v", code, err)
		}
		assertLines(t, stdout.String(), "ls /data=only-"+name, "read /data/only-"+name+"=content-"+name)
	}
}

func TestNetworkNamespace(t *testing.T) {
	env := newTestEnv(t)
	netns := createNetNS(t)
	spec := env.spec("netns", "ifaces", "hostname", "sleep=60s")
	spec.NetNS = netns
	spec.Hostname = "pod-in-netns"
	c := env.start(spec)

	assertLines(t, "ifaces="+waitForLine(t, spec.LogPath, "ifaces="), "ifaces=lo")
	assertLines(t, "hostname="+waitForLine(t, spec.LogPath, "hostname="), "hostname=pod-in-netns")

	var stdout bytes.Buffer
	code, err := Exec(context.Background(), c, []string{"helper", "ifaces", "hostname", "ls=/sys/class/net"},
		ExecOptions{Stdout: &stdout})
	if err != nil || code != 0 {
		t.Fatalf("Exec: code %d, err %v", code, err)
	}
	assertLines(t, stdout.String(), "ifaces=lo", "hostname=pod-in-netns", "ls /sys/class/net=lo")
	if host, _ := os.Hostname(); host == "pod-in-netns" {
		t.Error("the container's hostname leaked to the host")
	}
}

func TestStartRejectsBadSpecs(t *testing.T) {
	env := newTestEnv(t)
	bad := map[string]func(*ContainerSpec){
		"bad id":          func(s *ContainerSpec) { s.ID = "Upper/Case" },
		"relative state":  func(s *ContainerSpec) { s.StateDir = "state" },
		"no args":         func(s *ContainerSpec) { s.Args = nil },
		"missing netns":   func(s *ContainerSpec) { s.NetNS = "/run/netns/lc-does-not-exist" },
		"relative mount":  func(s *ContainerSpec) { s.Mounts = []Mount{{HostPath: env.dir, ContainerPath: "data"}} },
		"marker not k=v":  func(s *ContainerSpec) { s.Marker = "oops" },
		"relative wd":     func(s *ContainerSpec) { s.WorkingDir = "app" },
		"relative rootfs": func(s *ContainerSpec) { s.RootFiles["bin/x"] = helperBinary },
	}
	for name, mutate := range bad {
		spec := env.spec("rejected", "id")
		mutate(&spec)
		if c, err := Start(spec); err == nil {
			c.Stop(time.Second)
			t.Errorf("%s: Start succeeded", name)
		}
	}
}

// fakeAgentEnv carries the container spec (JSON) for the stand-in node agent.
const fakeAgentEnv = "LC_RUNTIME_TEST_AGENT_SPEC"

// runFakeAgent starts the container, prints its pid and waits to be killed.
func runFakeAgent() {
	var spec ContainerSpec
	if err := json.Unmarshal([]byte(os.Getenv(fakeAgentEnv)), &spec); err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	c, err := Start(spec)
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Printf("pid=%d\n", c.Pid())
	time.Sleep(time.Minute) // bounded, in case the test fails to kill us
	c.Stop(time.Second)
	os.Exit(0)
}

func TestContainerDiesWithTheNodeAgent(t *testing.T) {
	env := newTestEnv(t)
	spec := env.spec("orphan", "sleep=60s")
	spec.UID, spec.GID = 1000, 1000 // the uid switch must not disarm the parent-death signal
	specJSON, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	agent := exec.Command(os.Args[0])
	agent.Env = append(os.Environ(), fakeAgentEnv+"="+string(specJSON), env.marker)
	stdout, err := agent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	pid, convErr := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "pid=")))
	if err != nil || convErr != nil {
		_ = agent.Process.Kill()
		_ = agent.Wait()
		t.Fatalf("agent said %q (%v)", line, err)
	}

	_ = agent.Process.Kill()
	_ = agent.Wait()

	if !waitUntil(5*time.Second, func() bool { return !isLive(pid) }) {
		t.Errorf("container %d survived its node agent", pid)
	}
	// Nobody reaped the container, so its root directory remains: Sweep's job, done here.
	if err := os.RemoveAll(spec.StateDir); err != nil {
		t.Error(err)
	}
}

// isLive tells whether pid runs (a zombie has no namespace links).
func isLive(pid int) bool {
	_, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", pid))
	return err == nil
}

func waitUntil(timeout time.Duration, condition func() bool) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if condition() {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return condition()
}

// createNetNS makes an empty network namespace (only lo) that the test deletes.
func createNetNS(t *testing.T) string {
	t.Helper()
	suffix := make([]byte, 4)
	if _, err := rand.Read(suffix); err != nil {
		t.Fatal(err)
	}
	name := "lc-rt-test-" + hex.EncodeToString(suffix)
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "delete", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns delete %s: %v: %s", name, err, out)
		}
	})
	return "/run/netns/" + name
}

// TestAPinnedMountNamespaceKeepsItsIdentity: the kernel hands a freed namespace's inode number
// to the next namespace created, so the identity reap sweeps by must stay pinned until the
// sweep is over, or the sweep kills a container started in the meantime.
func TestAPinnedMountNamespaceKeepsItsIdentity(t *testing.T) {
	first := startInNewMountNamespace(t)
	pin, pinned := pinMountNamespace(first.Process.Pid)
	if pin == nil {
		t.Fatal("no identity for a process in its own mount namespace")
	}
	defer func() { _ = pin.Close() }()
	_ = first.Process.Kill()
	_ = first.Wait()
	next := startInNewMountNamespace(t)
	nextPin, identity := pinMountNamespace(next.Process.Pid)
	if nextPin == nil {
		t.Fatal("no identity for the next process")
	}
	_ = nextPin.Close()
	if identity == pinned {
		t.Fatalf("the next mount namespace got the pinned one's identity %s", pinned)
	}
	if pids := processesInMountNamespace(pinned); len(pids) != 0 {
		t.Fatalf("processes %v listed in the pinned namespace %s after its only process exited", pids, pinned)
	}
}

// startInNewMountNamespace runs the helper asleep in a mount namespace of its own until the
// test ends.
func startInNewMountNamespace(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(helperBinary, "sleep=60s")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd
}
