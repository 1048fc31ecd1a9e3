package localcluster

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestSweepKillsOnlyMarkedProcessesAndUnmounts(t *testing.T) {
	requireRoot(t)
	dir := t.TempDir()
	outer := filepath.Join(dir, "pods", "p1", "volume")
	inner := filepath.Join(outer, "nested")
	mountTmpfs(t, outer)
	mustMkdir(t, inner)
	mountTmpfs(t, inner)
	canary := filepath.Join(inner, "canary")
	if err := os.WriteFile(canary, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}

	// The marked process sits inside the nested mount, so the unmount only succeeds
	// cleanly if Sweep kills before it unmounts.
	marked := startSleep(t, inner, MarkerFor(dir))
	otherCluster := startSleep(t, "", MarkerFor(dir+"2"))
	unmarked := startSleep(t, "")

	if err := Sweep(dir); err != nil {
		t.Fatalf("Sweep: %v", err)
	}

	if !marked.killedBySIGKILL() {
		t.Error("the marked process was not killed")
	}
	for _, s := range []*sleeper{otherCluster, unmarked} {
		if !s.alive() {
			t.Errorf("process %d without this dir's marker was killed", s.cmd.Process.Pid)
		}
	}
	if _, err := os.Stat(canary); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("file on the nested tmpfs still visible (err=%v): not unmounted", err)
	}
	if points, err := mountPointsBelow(dir); err != nil || len(points) != 0 {
		t.Errorf("mounts left below %s: %v (err=%v)", dir, points, err)
	}
}

func TestSweepRefusesDangerousDirs(t *testing.T) {
	for _, dir := range []string{"", "/", "relative/dir", "/.."} {
		if err := Sweep(dir); err == nil {
			t.Errorf("Sweep(%q) succeeded; want an error", dir)
		}
	}
}

func TestSweepSparesOwnProcess(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("LOCALCLUSTER_DIR", dir)
	if err := Sweep(dir); err != nil {
		t.Fatalf("Sweep: %v", err)
	}
	// Reaching this line is the assertion: Sweep did not SIGKILL the test binary.
	if slices.Contains(markedProcesses(MarkerFor(dir)), os.Getpid()) {
		t.Fatal("own process listed as a sweep victim")
	}
}

func TestUnescapeMountPath(t *testing.T) {
	cases := map[string]string{
		`/var/lib/a\040b`: "/var/lib/a b",
		`/x\011y\134z`:    "/x\ty\\z",
		`/plain`:          "/plain",
		`/trailing\04`:    `/trailing\04`,
	}
	for in, want := range cases {
		if got := unescapeMountPath(in); got != want {
			t.Errorf("unescapeMountPath(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestChildEnvHasOneMarkerAndNoProxy(t *testing.T) {
	env := []string{"PATH=/bin", "LOCALCLUSTER_DIR=/other", "https_proxy=http://proxy:3128", "NO_PROXY=x", "HOME=/root"}
	got := childEnv(env, MarkerFor("/state"))
	want := []string{"PATH=/bin", "HOME=/root", "LOCALCLUSTER_DIR=/state"}
	if !slices.Equal(got, want) {
		t.Fatalf("childEnv = %v, want %v", got, want)
	}
}

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("this test mounts tmpfs and must run as root")
	}
}

func mustMkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

// mountTmpfs mounts a small tmpfs and makes sure it is gone before t's temp dir is removed,
// even when Sweep failed.
func mountTmpfs(t *testing.T, dir string) {
	t.Helper()
	mustMkdir(t, dir)
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatalf("mount tmpfs on %s: %v", dir, err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
}

// sleeper is a `sleep 300` child; done receives its Wait result once.
type sleeper struct {
	cmd  *exec.Cmd
	done chan error
}

// startSleep starts a sleeper with extraEnv added to an environment free of any marker; the
// cleanup kills it by PID if the test did not already.
func startSleep(t *testing.T, workDir string, extraEnv ...string) *sleeper {
	t.Helper()
	cmd := exec.Command("sleep", "300")
	cmd.Dir = workDir
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, markerPrefix) })
	cmd.Env = append(env, extraEnv...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &sleeper{cmd: cmd, done: make(chan error, 1)}
	go func() { s.done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		select {
		case err := <-s.done:
			s.done <- err
		case <-time.After(10 * time.Second):
			t.Errorf("sleep %d did not exit after SIGKILL", cmd.Process.Pid)
		}
	})
	return s
}

func (s *sleeper) alive() bool {
	select {
	case err := <-s.done:
		s.done <- err
		return false
	default:
		return s.cmd.Process.Signal(syscall.Signal(0)) == nil
	}
}

func (s *sleeper) killedBySIGKILL() bool {
	select {
	case err := <-s.done:
		s.done <- err // leave it for the cleanup
		var exitErr *exec.ExitError
		if !errors.As(err, &exitErr) {
			return false
		}
		status, ok := exitErr.Sys().(syscall.WaitStatus)
		return ok && status.Signaled() && status.Signal() == syscall.SIGKILL
	case <-time.After(5 * time.Second):
		return false
	}
}
