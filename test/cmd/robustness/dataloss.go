package main

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
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
	before, err := t.c.get(ctx)
	if err != nil {
		return err
	}
	lostID := memberID(before, victim.Name)
	if lostID == "" {
		return fmt.Errorf("the status shows no member ID for %s", victim.Name)
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
	// Settled is not enough: a status written before the operator saw this fault may look
	// settled while an earlier trial's last restart changes a condition after since. The
	// fault's own outcome is waited for: the lost ID gone, its place taken by a new member.
	// A member restarted empty under its old ID never gets there, and the wait fails.
	return t.c.waitSettled(ctx, t.replicas, since, func(c *etcdv1.EtcdCluster) error {
		for _, m := range c.Status.Members {
			if m.ID == lostID {
				return fmt.Errorf("member %s lost its data and is still listed under its ID %s: it was not replaced yet", m.Name, lostID)
			}
		}
		return nil
	})
}

// memberID is the etcd member ID the status shows for the named member ("" if none).
func memberID(c *etcdv1.EtcdCluster, name string) string {
	for _, m := range c.Status.Members {
		if m.Name == name {
			return m.ID
		}
	}
	return ""
}
