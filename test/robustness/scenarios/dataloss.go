package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
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
		if err := t.c.e.emptyVolume(ctx, pvc); err != nil {
			return err
		}
	}
	if err := t.c.e.k8s.Delete(ctx, victim); client.IgnoreNotFound(err) != nil {
		return err
	}
	return t.c.waitSettled(ctx, t.replicas, since)
}

// emptyVolume removes everything in the PVC's volume: a local directory of this machine on
// the local cluster.
func (e *env) emptyVolume(ctx context.Context, pvc *corev1.PersistentVolumeClaim) error {
	pv := &corev1.PersistentVolume{}
	if err := e.k8s.Get(ctx, client.ObjectKey{Name: pvc.Spec.VolumeName}, pv); err != nil {
		return err
	}
	if pv.Spec.Local == nil {
		return fmt.Errorf("volume %s of %s is no local directory: this trial needs the local cluster's provisioner", pv.Name, pvc.Name)
	}
	entries, err := os.ReadDir(pv.Spec.Local.Path)
	if err != nil {
		return err
	}
	for _, entry := range entries {
		if err := os.RemoveAll(filepath.Join(pv.Spec.Local.Path, entry.Name())); err != nil {
			return err
		}
	}
	return nil
}
