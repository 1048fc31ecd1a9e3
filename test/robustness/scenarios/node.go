package main

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"time"
)

// The local cluster's supervisor crashes a node agent on SIGUSR2 (cmd/localcluster:
// SignalRestartNode), reading which and for how long from nodeRestartRequestFile, and says
// it takes the signal in nodeRestartSignalFile.
const (
	nodeRestartSignalFile  = "/var/lib/etcd-operator-localcluster/node-restart-signal"
	nodeRestartRequestFile = "/var/lib/etcd-operator-localcluster/node-restart-request"
)

// nodeCrashTrial crashes the node of a member chosen at random: every container of every Pod
// on it is killed at once, the node stops answering for 5 to 20 s, and then comes back and
// starts its Pods again (a machine that lost power and rebooted). The member must rejoin
// under its ID with its data, and the cluster settle again.
func nodeCrashTrial(ctx context.Context, t *trialEnv) error {
	victim, err := t.pickMember(ctx)
	if err != nil {
		return err
	}
	down := 5 + t.rnd.IntN(16)
	logf("trial %d: node %s (holding %s) crashed, back after %d s", t.index, victim.Spec.NodeName, victim.Name, down)
	since := time.Now()
	if err := crashNode(victim.Spec.NodeName, down); err != nil {
		return err
	}
	if err := t.c.waitPodsReady(ctx, int(t.replicas)); err != nil {
		return err
	}
	return t.c.waitSettled(ctx, t.replicas, since)
}

// crashNode asks the local cluster's supervisor to crash a node agent for seconds.
func crashNode(node string, seconds int) error {
	if _, err := os.Stat(nodeRestartSignalFile); err != nil {
		return fmt.Errorf("the local cluster's supervisor cannot crash a node agent (%w): it was started by an older build; stop it with make local-down", err)
	}
	if err := os.WriteFile(nodeRestartRequestFile, fmt.Appendf(nil, "%s %d\n", node, seconds), 0o644); err != nil {
		return err
	}
	return signalSupervisor(syscall.SIGUSR2)
}
