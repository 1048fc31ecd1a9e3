package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/quorumkeeper/etcd-operator/test/localcluster"
	"github.com/quorumkeeper/etcd-operator/test/localcluster/netpolicy"
	"github.com/quorumkeeper/etcd-operator/test/localcluster/netsetup"
)

// up starts the supervisor in the background unless one is already serving, waits until the
// cluster is ready and prints the kubeconfig path as its last line.
func up(o options) error {
	if running(o.dir) {
		if _, err := os.Stat(readyFile(o.dir)); err == nil {
			fmt.Println(kubeconfigPath(o.dir))
			return nil
		}
	}
	// A previous run that crashed or was killed leaves processes, namespaces and mounts.
	if err := down(o.dir); err != nil {
		return err
	}
	if err := os.MkdirAll(o.dir, 0o755); err != nil {
		return err
	}
	logPath := filepath.Join(o.dir, "supervisor.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logFile.Close()
	self, err := os.Executable()
	if err != nil {
		return err
	}
	args := []string{"up", "--foreground", "--dir", o.dir, "--nodes", strconv.Itoa(o.nodes),
		"--kube-bin", o.kubeBinDir, "--etcd", o.etcdBin, "--images", o.images,
		"--cert-manager", o.certManager, "--minio", o.minio}
	cmd := exec.Command(self, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = append(os.Environ(), marker(o.dir))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // outlives this command and its terminal
	closeInheritedOnExec()
	if err := cmd.Start(); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "[localcluster] starting (pid %d, log %s)\n", cmd.Process.Pid, logPath)
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	return waitReady(o.dir, logPath, exited)
}

// closeInheritedOnExec keeps the files this command inherited (beyond stdin, stdout and
// stderr) from the supervisor, which outlives it: a caller's lock file held open there (flock
// around a run with KEEP_CLUSTER=1) would stay locked for as long as the cluster runs.
func closeInheritedOnExec() {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range entries {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			syscall.CloseOnExec(fd)
		}
	}
}

func waitReady(dir, logPath string, exited <-chan error) error {
	deadline := time.After(5 * time.Minute)
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-exited:
			return fmt.Errorf("the supervisor exited (%w) before the cluster was ready:\n%s", err, tail(logPath, 30))
		case <-deadline:
			return fmt.Errorf("not ready after 5 minutes:\n%s", tail(logPath, 30))
		case <-tick.C:
			if _, err := os.Stat(readyFile(dir)); err == nil {
				fmt.Fprintln(os.Stderr, "[localcluster] ready: export KUBECONFIG="+kubeconfigPath(dir))
				fmt.Println(kubeconfigPath(dir))
				return nil
			}
		}
	}
}

// running is true when the supervisor recorded in dir is alive.
func running(dir string) bool {
	pid, ok := supervisorPid(dir)
	return ok && syscall.Kill(pid, 0) == nil
}

func supervisorPid(dir string) (int, bool) {
	data, err := os.ReadFile(pidFile(dir))
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	return pid, err == nil && pid > 0
}

// down stops the supervisor (it stops Pods, agents and control plane in order), then removes
// whatever is left, which is everything after a kill -9: marked processes, mounts, network
// namespaces, the bridge, the state directory.
func down(dir string) error {
	if pid, ok := supervisorPid(dir); ok && localcluster.HasMarker(pid, marker(dir)) {
		_ = syscall.Kill(pid, syscall.SIGTERM)
		waitGone(pid, 90*time.Second)
	}
	var errs []error
	errs = append(errs, localcluster.Sweep(dir))
	errs = append(errs, netsetup.TearDown(netsetup.DefaultConfig()))
	errs = append(errs, netpolicy.Remove(netpolicy.DefaultTable))
	if err := os.RemoveAll(dir); err != nil {
		errs = append(errs, fmt.Errorf("removing %s: %w", dir, err))
	}
	return errors.Join(errs...)
}

func waitGone(pid int, limit time.Duration) {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) && syscall.Kill(pid, 0) == nil {
		time.Sleep(200 * time.Millisecond)
	}
}

func tail(path string, lines int) string {
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
