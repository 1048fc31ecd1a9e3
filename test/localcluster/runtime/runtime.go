package runtime

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

const (
	nsenterPath = "/usr/bin/nsenter"
	// startTimeout bounds how long Start waits for container-init to exec the program.
	startTimeout = 30 * time.Second
	// killTimeout bounds how long Stop waits after SIGKILL (a process stuck in the kernel).
	killTimeout = 30 * time.Second
)

// initSpec is what Start hands to container-init through the spec file.
type initSpec struct {
	ContainerSpec
	// ParentPid lets container-init notice that its parent died before it could arm the
	// parent-death signal again (setuid clears it).
	ParentPid int
}

// Container is a started container. Its methods are safe for concurrent use.
type Container struct {
	spec  ContainerSpec
	cmd   *exec.Cmd
	mntNS string // "mnt:[inode]" of the container's mount namespace; identifies its processes
	// mntPin holds the mount namespace open until reap has swept it (see pinMountNamespace).
	mntPin *os.File

	done     chan struct{} // closed once the main process is reaped and leftovers are gone
	exitCode int
	waitErr  error
}

// Start creates the container and runs its program. It returns once the program has been
// exec'd or container-init has given up; in the latter case the container exits with one of
// the ExitCode* codes and the reason is in the log.
func Start(spec ContainerSpec) (*Container, error) {
	if err := spec.validate(); err != nil {
		return nil, err
	}
	if err := prepareStateDir(&spec); err != nil {
		return nil, err
	}
	logFile, err := openLog(spec.LogPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	readyReader, readyWriter, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer readyReader.Close()

	cmd := initCommand(&spec, logFile, readyWriter)
	err = cmd.Start()
	readyWriter.Close() // only the child may hold the write end, so EOF means "exec'd or exited"
	if err != nil {
		_ = os.Remove(spec.rootDir())
		_ = os.Remove(spec.specFile())
		return nil, fmt.Errorf("container %s: start container-init: %w", spec.ID, err)
	}
	c := &Container{spec: spec, cmd: cmd, done: make(chan struct{})}
	c.mntPin, c.mntNS = pinMountNamespace(cmd.Process.Pid)
	go c.reap()
	if err := awaitEOF(readyReader, startTimeout); err != nil {
		c.Stop(0)
		return nil, fmt.Errorf("container %s: container-init did not finish: %w", spec.ID, err)
	}
	return c, nil
}

func prepareStateDir(spec *ContainerSpec) error {
	if err := os.MkdirAll(spec.rootDir(), 0o755); err != nil {
		return err
	}
	data, err := json.Marshal(initSpec{ContainerSpec: *spec, ParentPid: os.Getpid()})
	if err != nil {
		return err
	}
	return os.WriteFile(spec.specFile(), data, 0o600)
}

func openLog(logPath string) (*os.File, error) {
	if logPath == "" {
		return os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	}
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return nil, err
	}
	return os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
}

// initCommand runs container-init in a new mount namespace (CLONE_NEWNS at clone time, so no
// setns is needed for it) and, when asked, inside the network namespace, which nsenter joins
// because a multi-threaded Go process cannot setns reliably.
func initCommand(spec *ContainerSpec, logFile, readyWriter *os.File) *exec.Cmd {
	// /proc/self/exe would name nsenter once nsenter runs; our own pid's link stays ours.
	self := "/proc/" + strconv.Itoa(os.Getpid()) + "/exe"
	initArgs := []string{self, InitCommand, spec.specFile()}
	var cmd *exec.Cmd
	if spec.NetNS == "" {
		cmd = exec.Command(self, initArgs[1:]...)
	} else {
		cmd = exec.Command(nsenterPath, append([]string{"--net=" + spec.NetNS, "--"}, initArgs...)...)
	}
	cmd.Env = []string{"PATH=" + defaultPath}
	if spec.Marker != "" {
		cmd.Env = append(cmd.Env, spec.Marker)
	}
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.ExtraFiles = []*os.File{readyWriter} // fd 3 in container-init
	cloneFlags := uintptr(syscall.CLONE_NEWNS)
	if spec.Hostname != "" {
		cloneFlags |= syscall.CLONE_NEWUTS
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags: cloneFlags,
		Setpgid:    true,            // Stop can kill the whole group
		Pdeathsig:  syscall.SIGKILL, // a dead node agent leaves no container behind
	}
	return cmd
}

// pinMountNamespace opens the mount namespace of pid and returns the open file with the
// namespace's identity ("mnt:[inode]"), or nil and "" when it cannot be read or (which would be
// a bug) is ours: leftovers are killed by that identity, so it must never match the host's.
// The open file keeps the namespace alive after the container's last process exits. Without it
// the kernel freed the namespace at that exit and handed its inode number (the lowest free
// one) to the next container started, and reap's sweep of the first container SIGKILLed the
// second one within a second of its start (exit 137, an empty log).
func pinMountNamespace(pid int) (*os.File, string) {
	pin, err := os.Open("/proc/" + strconv.Itoa(pid) + "/ns/mnt")
	if err != nil {
		return nil, ""
	}
	var st, own syscall.Stat_t
	if syscall.Fstat(int(pin.Fd()), &st) != nil || syscall.Stat("/proc/self/ns/mnt", &own) != nil || own.Ino == st.Ino {
		_ = pin.Close()
		return nil, ""
	}
	return pin, fmt.Sprintf("mnt:[%d]", st.Ino)
}

func awaitEOF(f *os.File, timeout time.Duration) error {
	if err := f.SetReadDeadline(time.Now().Add(timeout)); err != nil {
		return err
	}
	buf := make([]byte, 512)
	for {
		_, err := f.Read(buf)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return err
		}
		if err != nil { // io.EOF: the pipe closed on exec or exit
			return nil
		}
	}
}

// reap waits for the main process, kills whatever it left behind and removes the root.
// It waits without reaping first, so that the process group id cannot be reused by an
// unrelated process while the group is being killed.
func (c *Container) reap() {
	pid := c.cmd.Process.Pid
	waitForExitWithoutReaping(pid)
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	killMountNamespace(c.mntNS)
	if c.mntPin != nil {
		_ = c.mntPin.Close() // the sweep is over: the namespace's identity may be reused now
	}
	err := c.cmd.Wait()
	c.exitCode, c.waitErr = exitCodeOf(c.cmd.ProcessState, err)
	_ = os.Remove(c.spec.rootDir())
	_ = os.Remove(c.spec.specFile())
	close(c.done)
}

func waitForExitWithoutReaping(pid int) {
	var info unix.Siginfo
	for range 1000 { // EINTR is the only expected retry
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, unix.EINTR) {
			return
		}
	}
}

// exitCodeOf maps a wait result to a shell-style exit code: 128+n for signal n.
func exitCodeOf(state *os.ProcessState, err error) (int, error) {
	if state == nil {
		return -1, err
	}
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		return -1, err
	}
	if status, ok := state.Sys().(syscall.WaitStatus); ok && status.Signaled() {
		return 128 + int(status.Signal()), nil
	}
	return state.ExitCode(), nil
}

// Pid is the process id of the container's main process (as the host sees it).
func (c *Container) Pid() int { return c.cmd.Process.Pid }

// ID returns the container's id.
func (c *Container) ID() string { return c.spec.ID }

// Done is closed when the container has exited and its leftovers are gone.
func (c *Container) Done() <-chan struct{} { return c.done }

// Wait blocks until the container has exited and returns its exit code (128+n when killed
// by signal n). It may be called any number of times.
func (c *Container) Wait() (exitCode int, err error) {
	<-c.done
	return c.exitCode, c.waitErr
}

// Signal sends sig to the container's main process.
func (c *Container) Signal(sig syscall.Signal) error {
	select {
	case <-c.done:
		return os.ErrProcessDone
	default:
		return c.cmd.Process.Signal(sig)
	}
}

// Stop sends SIGTERM to the main process, SIGKILL after grace, waits for the exit and for
// the cleanup of the container's other processes and root. It returns the exit code, or -1
// if the process could not be reaped even after SIGKILL.
func (c *Container) Stop(grace time.Duration) (exitCode int) {
	_ = c.Signal(syscall.SIGTERM)
	if !c.waitFor(grace) {
		_ = c.Signal(syscall.SIGKILL)
		if !c.waitFor(killTimeout) {
			return -1
		}
	}
	return c.exitCode
}

func (c *Container) waitFor(timeout time.Duration) bool {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-c.done:
		return true
	case <-timer.C:
		return false
	}
}
