package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/test/robustness"
)

// The local cluster's supervisor restarts kube-apiserver on SIGUSR1 (test/cmd/localcluster:
// SignalRestartAPIServer), and says so in supervisorSignalFile.
const (
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
	before, err := apiServerIdentity(ctx, t.c.e.k8s)
	if err != nil {
		return err
	}
	if err := restartAPIServer(); err != nil {
		return err
	}
	t.replicas = target
	// The supervisor restarts kube-apiserver in its own time, and the old one serves while it
	// shuts down: a settled status read before the restart would end the trial with the
	// restart still to come (and the next request refused). The new instance's identity
	// shows the restart happened.
	return t.c.waitSettled(ctx, target, time.Time{}, func(*etcdv1.EtcdCluster) error {
		now, err := apiServerIdentity(ctx, t.c.e.k8s)
		if err != nil {
			return err
		}
		if now == before {
			return fmt.Errorf("kube-apiserver not restarted yet (identity %s)", before)
		}
		return nil
	})
}

// apiServerIdentity names the running kube-apiserver instance: each start takes its identity
// Lease in kube-system under a new holder identity.
func apiServerIdentity(ctx context.Context, k8s client.Client) (string, error) {
	leases := &coordinationv1.LeaseList{}
	if err := k8s.List(ctx, leases, client.InNamespace(metav1.NamespaceSystem),
		client.MatchingLabels{"apiserver.kubernetes.io/identity": "kube-apiserver"}); err != nil {
		return "", err
	}
	var holders []string
	for _, l := range leases.Items {
		if l.Spec.HolderIdentity != nil {
			holders = append(holders, *l.Spec.HolderIdentity)
		}
	}
	if len(holders) == 0 {
		return "", fmt.Errorf("no kube-apiserver identity Lease in %s", metav1.NamespaceSystem)
	}
	slices.Sort(holders)
	return strings.Join(holders, ","), nil
}

// restartAPIServer asks the local cluster's supervisor to restart kube-apiserver.
func restartAPIServer() error {
	if _, err := os.Stat(supervisorSignalFile); err != nil {
		return fmt.Errorf("the local cluster's supervisor cannot restart kube-apiserver (%w): it was started by an older build; stop it with make local-down", err)
	}
	return robustness.SignalSupervisor(syscall.SIGUSR1)
}
