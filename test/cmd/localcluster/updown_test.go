package main

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// A file the caller left open for its children (a lock held by flock) must not reach the
// supervisor, which outlives the caller.
func TestInheritedFilesAreClosedOnExec(t *testing.T) {
	fd, err := syscall.Open(filepath.Join(t.TempDir(), "lock"), syscall.O_CREAT|syscall.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = syscall.Close(fd) }()
	if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil || flags&unix.FD_CLOEXEC != 0 {
		t.Fatalf("the test's file should start inheritable: flags %d, %v", flags, err)
	}
	closeInheritedOnExec()
	flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
	if err != nil {
		t.Fatal(err)
	}
	if flags&unix.FD_CLOEXEC == 0 {
		t.Fatal("an inherited file would reach the supervisor")
	}
	if flags, _ := unix.FcntlInt(os.Stderr.Fd(), unix.F_GETFD, 0); flags&unix.FD_CLOEXEC != 0 {
		t.Fatal("stderr was closed on exec")
	}
}
