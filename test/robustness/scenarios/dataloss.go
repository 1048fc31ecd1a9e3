package main

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumkeeper/etcd-operator/test/robustness"
)

// dataLossTrial takes the data of a member chosen at random, in one of two ways chosen at
// random: its PVC deleted, or its local volume emptied; then its Pod is deleted. The member
// must be replaced under a new ID (never restarted empty under its old one) and the cluster
// settle again at the same size, with no acknowledged write lost.
func dataLossTrial(ctx context.Context, t *trialEnv) error {
	victim, err := t.pickMember(ctx)
	if err != nil {
		return err
	}
	pvc := &corev1.PersistentVolumeClaim{}
	if err := t.c.e.k8s.Get(ctx, client.ObjectKey{Namespace: victim.Namespace, Name: victim.Name}, pvc); err != nil {
		return err
	}
	since := time.Now()
	if t.rnd.IntN(2) == 0 {
		logf("trial %d: PVC of %s deleted, then its Pod", t.index, victim.Name)
		if err := t.c.e.k8s.Delete(ctx, pvc); err != nil {
			return err
		}
	} else {
		logf("trial %d: volume of %s emptied, then its Pod deleted", t.index, victim.Name)
		if err := robustness.EmptyVolume(ctx, t.c.e.k8s, pvc); err != nil {
			return err
		}
	}
	if err := t.c.e.k8s.Delete(ctx, victim); client.IgnoreNotFound(err) != nil {
		return err
	}
	return t.c.waitSettled(ctx, t.replicas, since)
}
