package main

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumkeeper/etcd-operator/test/robustness"
)

// drainTrial drains the node of a member chosen at random as kubectl drain does: the node
// cordoned, the member's Pod evicted through the eviction API (which honours the
// PodDisruptionBudget). While that member is away, evicting any other member must be
// refused: the PDB keeps a quorum. Then the node is uncordoned and the cluster settles.
func drainTrial(ctx context.Context, t *trialEnv) error {
	pods, err := t.c.pods(ctx)
	if err != nil {
		return err
	}
	if len(pods) < 2 {
		return fmt.Errorf("%d member Pods; the drain trial needs two", len(pods))
	}
	i := t.rnd.IntN(len(pods))
	victim, other := &pods[i], &pods[(i+1)%len(pods)]
	node := victim.Spec.NodeName
	logf("trial %d: node %s drained of %s", t.index, node, victim.Name)
	if err := t.c.e.cordon(ctx, node, true); err != nil {
		return err
	}
	defer func() { _ = t.c.e.cordon(context.WithoutCancel(ctx), node, false) }()
	since := time.Now()
	if err := poll(ctx, 2*time.Minute, "evicting "+victim.Name, func(ctx context.Context) error {
		return robustness.Evict(ctx, t.c.e.k8s, victim)
	}); err != nil {
		return err
	}
	// Quorum of 3 voters is 2 (of 5, 3): the PDB allows one member away at a time here.
	switch err := robustness.Evict(ctx, t.c.e.k8s, other); {
	case err == nil:
		return fmt.Errorf("the PodDisruptionBudget let %s be evicted while %s was away: the quorum was not kept", other.Name, victim.Name)
	case !apierrors.IsTooManyRequests(err):
		return fmt.Errorf("evicting %s while %s was away: %w; want it refused by the PodDisruptionBudget", other.Name, victim.Name, err)
	}
	if err := t.c.e.cordon(ctx, node, false); err != nil {
		return err
	}
	return t.c.waitSettled(ctx, t.replicas, since)
}

// cordon marks the node (un)schedulable.
func (e *env) cordon(ctx context.Context, name string, unschedulable bool) error {
	node := &corev1.Node{}
	if err := e.k8s.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
		return err
	}
	patch := client.MergeFrom(node.DeepCopy())
	node.Spec.Unschedulable = unschedulable
	return e.k8s.Patch(ctx, node, patch)
}
