package main

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

// pauseGrace is spec.quorumLoss.gracePeriodSeconds of the pause-grace scenario: the least
// the API allows, so that every pause outlasts it.
const pauseGrace = 10 * time.Second

// automaticRecovery is the policy the pause-grace scenario's cluster runs with.
var automaticRecovery = &etcdv1.QuorumLossPolicy{Policy: etcdv1.QuorumLossRecoverFromMostAdvancedMember, GracePeriodSeconds: ptrTo(int32(pauseGrace / time.Second))}

// pauseGraceTrial pauses the cluster for longer than spec.quorumLoss's grace period and
// resumes it: the members start without a quorum for a while, which is no loss. The cluster
// must come back with its cluster ID and member IDs and no AutomaticRecovery.
func pauseGraceTrial(ctx context.Context, t *trialEnv) error {
	before, err := t.c.get(ctx)
	if err != nil {
		return err
	}
	logf("trial %d: paused for more than the %s grace period of spec.quorumLoss, then resumed", t.index, pauseGrace)
	// Both changes are of the spec: a status of its generation shows each was seen (a time of
	// the change would not: a pause is written within the same second, which the API's whole
	// seconds cannot tell from before it).
	if err := t.c.setReplicas(ctx, 0); err != nil {
		return err
	}
	if err := t.c.waitSettled(ctx, 0, time.Time{}); err != nil {
		return err
	}
	err = poll(ctx, time.Minute, "paused for twice the grace period", func(ctx context.Context) error {
		ec, err := t.c.get(ctx)
		if err != nil {
			return err
		}
		av := meta.FindStatusCondition(ec.Status.Conditions, etcdv1.ConditionAvailable)
		if paused := time.Since(av.LastTransitionTime.Time); paused < 2*pauseGrace {
			return fmt.Errorf("paused for %s", paused)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := t.c.setReplicas(ctx, t.replicas); err != nil {
		return err
	}
	if err := t.c.waitSettled(ctx, t.replicas, time.Time{}); err != nil {
		return err
	}
	return t.c.sameClusterWithoutRecovery(ctx, before)
}

func ptrTo[T any](v T) *T { return &v }
