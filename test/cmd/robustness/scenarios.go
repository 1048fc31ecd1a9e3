package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/test/robustness"
)

// scenario is a cluster of start members, a workload through its client Service, and
// trials: each trial injects one fault (with the operations it needs around it) and waits
// until the cluster has settled again.
type scenario struct {
	name  string
	start int32
	trial func(ctx context.Context, t *trialEnv) error
	// version is the cluster's etcd version at the start (default etcdVersion).
	version string
	// maxTrials caps the trials of a scenario whose steps run out (0: no cap).
	maxTrials int
	// minTrials is the least a scenario needs to cover what it is for (the upgrade's minor
	// and patch steps), whatever the trials asked for.
	minTrials int
	// tls: certificates from cert-manager on both ports, mutual TLS for the workload too.
	tls bool
	// quorumLoss is the cluster's spec.quorumLoss (nil: Manual).
	quorumLoss *etcdv1.QuorumLossPolicy
	// archive: a schedule archives the cluster to the local cluster's MinIO (spec.archive),
	// and the trials restore from it (archive.go).
	archive bool
}

// trialEnv is what a trial works with: the cluster, its replicas now, and the seeded random
// source of every choice.
type trialEnv struct {
	c        *cluster
	rnd      *rand.Rand
	replicas int32
	index    int
	// prefix is the workload's: every key it writes is under prefix + "/".
	prefix string
	// archive are the restores started, with the archive scenario.
	archive *archiveRestores
}

var allScenarios = []scenario{
	{name: "operator-kill", start: 3, trial: operatorKillTrial},
	{name: "pod-delete", start: 3, trial: podDeleteTrial},
	{name: "partition", start: 3, trial: partitionTrial},
	{name: "drain", start: 3, trial: drainTrial},
	{name: "data-loss", start: 3, trial: dataLossTrial},
	{name: "rolling", start: 3, trial: rollingTrial},
	{name: "apiserver-restart", start: 3, trial: apiServerRestartTrial},
	{name: "upgrade", start: 3, trial: upgradeTrial, version: upgradeStart, minTrials: len(upgradePath), maxTrials: len(upgradePath)},
	{name: "snapshot", start: 3, trial: snapshotTrial},
	{name: "defrag", start: 3, trial: defragTrial},
	{name: "tls-renewal", start: 3, trial: renewalTrial, tls: true},
	{name: "node-crash", start: 3, trial: nodeCrashTrial},
	{name: "eviction", start: 3, trial: evictTrial},
	{name: "node-shutdown", start: 3, trial: nodeShutdownTrial},
	{name: "pause-grace", start: 3, trial: pauseGraceTrial, quorumLoss: automaticRecovery},
	{name: "operator-minority", start: 3, trial: operatorMinorityTrial, quorumLoss: automaticRecovery},
	{name: "archive", start: 3, trial: archiveTrial, archive: true, minTrials: len(archiveFaults), maxTrials: len(archiveFaults)},
}

// trials is how many trials s runs when asked for n.
func (s scenario) trials(n int) int {
	n = max(n, s.minTrials)
	if s.maxTrials > 0 {
		return min(n, s.maxTrials)
	}
	return n
}

// operations is the cycle of replica counts the operator-kill trials go through: scale
// 3 -> 5 -> 3 -> 1 -> 3, pause (0) and resume.
var operations = []int32{5, 3, 1, 3, 0, 3}

// operatorKillTrial changes spec.replicas to the next count of the cycle, kills the operator
// at a random moment of the change (within 8 s of it), and waits until the cluster has
// settled at that count.
func operatorKillTrial(ctx context.Context, t *trialEnv) error {
	target := operations[t.index%len(operations)]
	delay := time.Duration(t.rnd.Int64N(int64(8 * time.Second)))
	logf("trial %d: replicas %d -> %d, operator killed after %s", t.index, t.replicas, target, delay.Round(time.Millisecond))
	if err := t.c.setReplicas(ctx, target); err != nil {
		return err
	}
	time.Sleep(delay)
	if _, err := robustness.KillOperator(ctx, t.c.e.k8s); err != nil {
		return err
	}
	t.replicas = target
	return t.c.waitSettled(ctx, target, time.Time{})
}

// podDeleteTrial deletes a member's Pod chosen at random, at once (as a crash) or with its
// grace period (as an eviction), and waits until the operator has seen it and settled.
func podDeleteTrial(ctx context.Context, t *trialEnv) error {
	victim, err := t.pickMember(ctx)
	if err != nil {
		return err
	}
	var opts []client.DeleteOption
	how := "with its grace period"
	if t.rnd.IntN(2) == 0 {
		opts, how = append(opts, client.GracePeriodSeconds(0)), "at once"
	}
	logf("trial %d: Pod %s deleted %s", t.index, victim.Name, how)
	since := time.Now()
	if err := t.c.e.k8s.Delete(ctx, victim, opts...); err != nil {
		return err
	}
	return t.c.waitSettled(ctx, t.replicas, since)
}

// partitionTrial cuts a member chosen at random off from its peers (and everyone else): the
// link of its Pod's network namespace goes down for 5 to 25 s, then up again. It waits until
// every member's Pod is Ready again and the status has settled.
func partitionTrial(ctx context.Context, t *trialEnv) error {
	victim, err := t.pickMember(ctx)
	if err != nil {
		return err
	}
	hold := 5*time.Second + time.Duration(t.rnd.Int64N(int64(20*time.Second)))
	netns := localclusterNetns(victim)
	logf("trial %d: %s (network namespace %s) cut off for %s", t.index, victim.Name, netns, hold.Round(time.Millisecond))
	if err := setLink(ctx, netns, "down"); err != nil {
		return err
	}
	time.Sleep(hold)
	if err := setLink(context.WithoutCancel(ctx), netns, "up"); err != nil {
		return err
	}
	if err := t.c.waitPodsReady(ctx, int(t.replicas)); err != nil {
		return err
	}
	return t.c.waitSettled(ctx, t.replicas, time.Time{})
}

// pickMember is a member's Pod chosen at random.
func (t *trialEnv) pickMember(ctx context.Context) (*corev1.Pod, error) {
	pods, err := t.c.pods(ctx)
	if err != nil {
		return nil, err
	}
	if len(pods) == 0 {
		return nil, fmt.Errorf("no member Pod")
	}
	return &pods[t.rnd.IntN(len(pods))], nil
}

// runScenario runs one scenario and checks its history.
func (e *env) runScenario(ctx context.Context, s scenario, o options, seed uint64) (row, error) {
	r := row{scenario: s.name}
	c, err := e.newCluster(ctx, s, s.start)
	if c != nil {
		defer c.deleteNamespace(context.WithoutCancel(ctx))
	}
	if err != nil {
		return r, err
	}
	var restores *archiveRestores
	if s.archive {
		if err := c.setUpArchive(ctx); err != nil {
			return r, err
		}
		restores = &archiveRestores{prefix: s.name}
		// Bounded by restoreTimeout each; waited for before the namespace goes.
		defer restores.wg.Wait()
	}
	clients, err := c.dial(ctx, o.clients)
	if err != nil {
		return r, err
	}
	defer func() {
		for _, cli := range clients {
			_ = cli.Close()
		}
	}()
	h := robustness.NewHistory()
	w := robustness.Workload{Clients: clients, Refresh: c.refresh, Prefix: s.name, Keys: 8, Seed: seed,
		Pace: 50 * time.Millisecond, OpTimeout: 10 * time.Second, MaxOps: 50000}
	workCtx, stopWork := context.WithCancel(ctx)
	type result struct {
		final map[string]string
		err   error
	}
	done := make(chan result, 1)
	go func() {
		final, err := w.Run(workCtx, h)
		done <- result{final, err}
	}()
	t := &trialEnv{c: c, rnd: rand.New(rand.NewPCG(seed, 0)), replicas: s.start, prefix: w.Prefix, archive: restores}
	var trialErr error
	for t.index = 0; t.index < s.trials(o.trials) && trialErr == nil; t.index++ {
		time.Sleep(2 * time.Second) // some operations between faults
		trialErr = s.trial(ctx, t)
		r.faults++
	}
	r.trials = t.index
	// The cluster ends serving (a paused one is resumed) so that every key can be read back.
	if trialErr == nil && t.replicas == 0 {
		if trialErr = c.setReplicas(ctx, s.start); trialErr == nil {
			trialErr = c.waitSettled(ctx, s.start, time.Time{})
		}
	}
	time.Sleep(2 * time.Second)
	stopWork()
	res := <-done
	if trialErr != nil {
		return r, trialErr
	}
	if res.err != nil {
		return r, res.err
	}
	check(&r, h, res.final)
	if restores != nil {
		restores.check(&r, h.Operations())
	}
	return r, nil
}

// check fills the row with the checkers' verdicts on the history.
func check(r *row, h *robustness.History, final map[string]string) {
	ops := h.Operations()
	r.operations = len(ops)
	lin := robustness.CheckLinearizable(ops, time.Minute)
	r.linearizable, r.unchecked = lin.Violations, lin.Unknown
	for _, k := range lin.Keys {
		r.details = append(r.details, "not linearizable: "+k)
	}
	wv := robustness.CheckWatches(ops, h.Watches())
	r.watch = len(wv.Violations)
	r.details = append(r.details, wv.Violations...)
	lost := robustness.LostWrites(ops, final)
	r.lost = len(lost)
	for _, l := range lost {
		r.details = append(r.details, "lost: "+l)
	}
	// The verdict goes to the log as soon as it is known: a long run stopped later (a
	// scenario that cannot settle, an interrupt) keeps the figures of the scenarios done.
	logf("%d operations, %d watch events checked: %d linearizability violations (checker timed out: %v), %d watch violations, %d lost acknowledged writes",
		len(ops), wv.Events, r.linearizable, r.unchecked, r.watch, r.lost)
}

// rollingTrial changes the Pod spec (the memory request, alternating between two values) so
// that every member restarts in turn, and waits until the roll is done and the cluster has
// settled.
func rollingTrial(ctx context.Context, t *trialEnv) error {
	request := []string{"96Mi", "112Mi"}[t.index%2]
	logf("trial %d: memory request %s, every member restarts in turn", t.index, request)
	ec, err := t.c.get(ctx)
	if err != nil {
		return err
	}
	patch := client.MergeFrom(ec.DeepCopy())
	ec.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(request)}
	since := time.Now()
	if err := t.c.e.k8s.Patch(ctx, ec, patch); err != nil {
		return err
	}
	return t.c.waitSettled(ctx, t.replicas, since)
}
