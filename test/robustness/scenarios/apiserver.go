package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The local cluster's supervisor restarts kube-apiserver on SIGUSR1 (cmd/localcluster:
// SignalRestartAPIServer), and says so in supervisorSignalFile.
const (
	supervisorPIDFile    = "/var/lib/etcd-operator-localcluster/supervisor.pid"
	supervisorSignalFile = "/var/lib/etcd-operator-localcluster/apiserver-restart-signal"
)

// apiServerRestartTrial changes spec.replicas (3 -> 5, then back), restarts kube-apiserver at
// a random moment of the change (within 5 s of it), and waits until the cluster has settled
// at the new count: the operator's watches and clients must survive the restart, and the
// change must finish, with the workload's history intact.
func apiServerRestartTrial(ctx context.Context, t *trialEnv) error {
	target := []int32{5, 3}[t.index%2]
	delay := time.Duration(t.rnd.Int64N(int64(5 * time.Second)))
	logf("trial %d: replicas %d -> %d, kube-apiserver restarted after %s", t.index, t.replicas, target, delay.Round(time.Millisecond))
	if err := t.c.setReplicas(ctx, target); err != nil {
		return err
	}
	time.Sleep(delay)
	if err := restartAPIServer(); err != nil {
		return err
	}
	t.replicas = target
	return t.c.waitSettled(ctx, target, time.Time{})
}

// restartAPIServer asks the local cluster's supervisor to restart kube-apiserver.
func restartAPIServer() error {
	if _, err := os.Stat(supervisorSignalFile); err != nil {
		return fmt.Errorf("the local cluster's supervisor cannot restart kube-apiserver (%w): it was started by an older build; stop it with make local-down", err)
	}
	return signalSupervisor(syscall.SIGUSR1)
}

// signalSupervisor sends sig to the local cluster's supervisor.
func signalSupervisor(sig syscall.Signal) error {
	raw, err := os.ReadFile(supervisorPIDFile)
	if err != nil {
		return fmt.Errorf("the local cluster's supervisor: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		return fmt.Errorf("%s: %w", supervisorPIDFile, err)
	}
	return syscall.Kill(pid, sig)
}
