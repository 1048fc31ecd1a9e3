package runtime

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// readyFD is the write end of the pipe on which Start waits; it closes on exec.
const readyFD = 3

// InitMain is container-init: it runs in the container's fresh mount namespace (and network
// namespace), builds the root, switches to it and to the container's user, and execs the
// program. args is [spec-file]. It never returns; failures exit with an ExitCode* code after
// a message on stderr, which is the container log.
func InitMain(args []string) {
	// The parent-death signal and exec are per thread: keep this goroutine on one thread.
	goruntime.LockOSThread()
	syscall.CloseOnExec(readyFD)
	if len(args) != 1 {
		exitWith(ExitCodeSetupFailed, fmt.Errorf("usage: %s <spec-file>", InitCommand))
	}
	spec, err := readInitSpec(args[0])
	if err != nil {
		exitWith(ExitCodeSetupFailed, err)
	}
	if err := prepareContainer(&spec.ContainerSpec); err != nil {
		exitWith(ExitCodeSetupFailed, err)
	}
	program, code, err := lookProgram(&spec.ContainerSpec)
	if err != nil {
		exitWith(code, err)
	}
	if err := switchUser(&spec.ContainerSpec); err != nil {
		exitWith(ExitCodeSetupFailed, err)
	}
	if err := dieWithParent(spec.ParentPid); err != nil {
		exitWith(ExitCodeSetupFailed, err)
	}
	err = syscall.Exec(program, spec.Args, spec.processEnv())
	exitWith(execErrorCode(err), fmt.Errorf("exec %s: %w", program, err))
}

func exitWith(code int, err error) {
	fmt.Fprintf(os.Stderr, "%s: %v\n", InitCommand, err)
	os.Exit(code)
}

func readInitSpec(specFile string) (*initSpec, error) {
	data, err := os.ReadFile(specFile)
	if err != nil {
		return nil, err
	}
	var spec initSpec
	if err := json.Unmarshal(data, &spec); err != nil {
		return nil, fmt.Errorf("%s: %w", specFile, err)
	}
	return &spec, nil
}

// prepareContainer does everything that needs root: the root file system, the hostname,
// and the switch into the root.
func prepareContainer(spec *ContainerSpec) error {
	if err := buildRoot(spec); err != nil {
		return err
	}
	if spec.Hostname != "" {
		if err := unix.Sethostname([]byte(spec.Hostname)); err != nil {
			return fmt.Errorf("set hostname: %w", err)
		}
	}
	if err := enterRoot(spec.rootDir()); err != nil {
		return err
	}
	if err := os.Chdir(spec.workingDir()); err != nil {
		return fmt.Errorf("working dir: %w", err)
	}
	return nil
}

// enterRoot makes root the process's "/" and drops every host mount from the namespace
// (pivot_root, then detach the old root), so the container does not pin host mounts.
func enterRoot(root string) error {
	if err := os.Chdir(root); err != nil {
		return err
	}
	// pivot_root(".", ".") stacks the old root on top of the new one; detaching "." then
	// removes the old root. It needs no directory for the old root, which a read-only
	// root could not provide.
	if err := unix.PivotRoot(".", "."); err != nil {
		// pivot_root refuses an initramfs root; chroot is the usual fallback there.
		if err := unix.Chroot("."); err != nil {
			return fmt.Errorf("pivot_root and chroot into %s: %w", root, err)
		}
		return os.Chdir("/")
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detach old root: %w", err)
	}
	return os.Chdir("/")
}

// lookProgram resolves Args[0] like a shell (inside the container's root) and returns the
// exit code a shell would use when it cannot be run.
func lookProgram(spec *ContainerSpec) (string, int, error) {
	name := spec.Args[0]
	if strings.Contains(name, "/") {
		code, err := checkExecutable(name)
		return name, code, err
	}
	found := ExitCodeNotFound
	for _, dir := range filepath.SplitList(lookupEnv(spec.processEnv(), "PATH")) {
		if dir == "" {
			dir = "." // an empty PATH entry means the working directory
		}
		candidate := filepath.Join(dir, name)
		code, err := checkExecutable(candidate)
		if err == nil {
			return candidate, 0, nil
		}
		if code == ExitCodeCannotExecute {
			found = code
		}
	}
	return "", found, fmt.Errorf("%s: not found in PATH or not executable", name)
}

func checkExecutable(file string) (int, error) {
	info, err := os.Stat(file)
	if err != nil {
		return ExitCodeNotFound, err
	}
	if !info.Mode().IsRegular() || info.Mode().Perm()&0o111 == 0 {
		return ExitCodeCannotExecute, fmt.Errorf("%s: permission denied", file)
	}
	return 0, nil
}

func switchUser(spec *ContainerSpec) error {
	groups := spec.SupplementalGroups
	if groups == nil {
		groups = []int{}
	}
	// Go applies these to every thread of the process.
	if err := syscall.Setgroups(groups); err != nil {
		return fmt.Errorf("setgroups: %w", err)
	}
	if err := syscall.Setgid(spec.GID); err != nil {
		return fmt.Errorf("setgid %d: %w", spec.GID, err)
	}
	if err := syscall.Setuid(spec.UID); err != nil {
		return fmt.Errorf("setuid %d: %w", spec.UID, err)
	}
	return nil
}

// dieWithParent re-arms the parent-death signal, which a change of uid/gid clears, and
// catches a parent that died before that.
func dieWithParent(parentPid int) error {
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0, 0, 0); err != nil {
		return fmt.Errorf("set parent-death signal: %w", err)
	}
	if os.Getppid() != parentPid {
		return errors.New("the node agent has exited")
	}
	return nil
}

func execErrorCode(err error) int {
	if errors.Is(err, syscall.ENOENT) {
		return ExitCodeNotFound // e.g. the interpreter of a script is missing
	}
	return ExitCodeCannotExecute
}
