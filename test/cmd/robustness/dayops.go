package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

// upgradePath is the versions the upgrade scenario's cluster goes through, one per trial,
// from upgradeStart: a minor upgrade, then a patch upgrade. The local cluster's image map has
// each (hack/images.sh).
const upgradeStart = "3.5.35"

var upgradePath = []string{"3.6.15", etcdVersion}

// upgradeTrial raises spec.version to the next version of upgradePath while the workload runs
// and waits until every member runs it and the cluster has settled.
func upgradeTrial(ctx context.Context, t *trialEnv) error {
	version := upgradePath[t.index]
	ec, err := t.c.get(ctx)
	if err != nil {
		return err
	}
	logf("trial %d: version %s -> %s, every member restarts in turn", t.index, ec.Spec.Version, version)
	patch := client.MergeFrom(ec.DeepCopy())
	ec.Spec.Version = version
	since := time.Now()
	if err := t.c.e.k8s.Patch(ctx, ec, patch); err != nil {
		return err
	}
	if err := t.c.waitSettled(ctx, t.replicas, since); err != nil {
		return err
	}
	return poll(ctx, time.Minute, "every member reported at "+version, func(ctx context.Context) error {
		ec, err := t.c.get(ctx)
		if err != nil {
			return err
		}
		for _, m := range ec.Status.Members {
			if m.Version != version {
				return fmt.Errorf("member %s runs %q", m.Name, m.Version)
			}
		}
		return nil
	})
}

// snapshotClaim is the PVC the snapshot scenario writes its snapshots to.
const snapshotClaim = "backups"

// snapshotTrial takes an EtcdSnapshot to a PVC while the workload runs. It must complete,
// verified by the agent, at a revision no older than one etcd served before it was asked,
// and a cluster restored from it must hold exactly what the scenario's cluster held at the
// snapshot's revision (checkRestored).
func snapshotTrial(ctx context.Context, t *trialEnv) error {
	s, err := takeSnapshot(ctx, t)
	if err != nil {
		return err
	}
	return t.c.checkRestored(ctx, s, t.prefix)
}

// takeSnapshot is the snapshot of snapshotTrial, complete.
func takeSnapshot(ctx context.Context, t *trialEnv) (*etcdv1.EtcdSnapshot, error) {
	if err := t.c.ensureClaim(ctx, snapshotClaim); err != nil {
		return nil, err
	}
	floor, err := t.c.revision(ctx)
	if err != nil {
		return nil, err
	}
	name := fmt.Sprintf("trial-%d", t.index)
	logf("trial %d: EtcdSnapshot %s to PVC %s, etcd at revision %d", t.index, name, snapshotClaim, floor)
	s := &etcdv1.EtcdSnapshot{ObjectMeta: metav1.ObjectMeta{Namespace: t.c.ns, Name: name}, Spec: etcdv1.EtcdSnapshotSpec{
		ClusterRef:  corev1.LocalObjectReference{Name: t.c.name},
		Destination: etcdv1.SnapshotLocation{PVC: &etcdv1.PVCSnapshotLocation{ClaimName: snapshotClaim, SubPath: name}},
	}}
	if err := t.c.e.k8s.Create(ctx, s); err != nil {
		return nil, err
	}
	return s, poll(ctx, 4*time.Minute, "EtcdSnapshot "+name+" complete", func(ctx context.Context) error {
		if err := t.c.e.k8s.Get(ctx, client.ObjectKeyFromObject(s), s); err != nil {
			return err
		}
		switch s.Status.Phase {
		case etcdv1.SnapshotComplete:
			if s.Status.Revision < floor {
				return fmt.Errorf("complete at revision %d, older than %d which etcd served before the snapshot was asked for", s.Status.Revision, floor)
			}
			return nil
		case etcdv1.SnapshotFailed:
			return fmt.Errorf("failed: %+v", s.Status.Conditions)
		}
		return fmt.Errorf("phase %q", s.Status.Phase)
	})
}

// checkRestored creates a one-member cluster bootstrapped from snapshot s (its snapshotRef),
// waits until it serves, and compares the workload's keys in it with what the scenario's
// cluster held at the snapshot's revision, read there at that revision: every key, value,
// create and mod revision and version the same. The restored cluster is deleted after.
func (c *cluster) checkRestored(ctx context.Context, s *etcdv1.EtcdSnapshot, prefix string) error {
	ec, err := c.get(ctx)
	if err != nil {
		return err
	}
	restored := &cluster{e: c.e, ns: c.ns, name: s.Name + "-restored"}
	one := int32(1)
	spec := etcdv1.EtcdClusterSpec{Replicas: &one, Version: ec.Spec.Version, Bootstrap: &etcdv1.BootstrapSpec{Restore: &etcdv1.RestoreSpec{
		Source: etcdv1.RestoreSource{SnapshotRef: &corev1.LocalObjectReference{Name: s.Name}}}}}
	logf("EtcdCluster %s restored from EtcdSnapshot %s (revision %d)", restored.name, s.Name, s.Status.Revision)
	rec := &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: c.ns, Name: restored.name}, Spec: spec}
	if err := c.e.k8s.Create(ctx, rec); err != nil {
		return err
	}
	defer func() { _ = c.e.k8s.Delete(context.WithoutCancel(ctx), rec) }()
	if err := restored.waitSettled(ctx, 1, time.Time{}); err != nil {
		return err
	}
	want, err := c.keyspace(ctx, prefix, s.Status.Revision)
	if err != nil {
		return fmt.Errorf("the scenario's cluster at revision %d: %w", s.Status.Revision, err)
	}
	got, err := restored.keyspace(ctx, prefix, 0)
	if err != nil {
		return fmt.Errorf("the restored cluster: %w", err)
	}
	return sameKeyspace(want, got)
}

// keyspace is every key under prefix in the cluster at revision rev (0: now), each with its
// value and revisions.
func (c *cluster) keyspace(ctx context.Context, prefix string, rev int64) (map[string]string, error) {
	clients, err := c.dial(ctx, 1)
	if err != nil {
		return nil, err
	}
	defer func() { _ = clients[0].Close() }()
	readCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resp, err := clients[0].Get(readCtx, prefix+"/", clientv3.WithPrefix(), clientv3.WithRev(rev))
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		out[string(kv.Key)] = fmt.Sprintf("%q created %d modified %d version %d", kv.Value, kv.CreateRevision, kv.ModRevision, kv.Version)
	}
	return out, nil
}

// sameKeyspace says how two keyspaces differ, nil when they do not; an empty one is refused
// (a restore that lost everything must not pass as equal to a workload that wrote nothing).
func sameKeyspace(want, got map[string]string) error {
	if len(want) == 0 {
		return errors.New("the workload had written no key by the snapshot's revision: nothing to compare")
	}
	for k, w := range want {
		if g, ok := got[k]; !ok || g != w {
			return fmt.Errorf("key %s: restored %q, the cluster had %s at the snapshot's revision", k, g, w)
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			return fmt.Errorf("key %s (%s) is in the restored cluster but was not in the cluster at the snapshot's revision", k, g)
		}
	}
	return nil
}

// defragTrial defragments every member (rule all) while the workload runs: one member at a
// time, the leader last. Every member must be defragmented and the cluster stay settled.
func defragTrial(ctx context.Context, t *trialEnv) error {
	name := fmt.Sprintf("trial-%d", t.index)
	logf("trial %d: EtcdDefrag %s of every member", t.index, name)
	d := &etcdv1.EtcdDefrag{ObjectMeta: metav1.ObjectMeta{Namespace: t.c.ns, Name: name}, Spec: etcdv1.EtcdDefragSpec{
		ClusterRef: corev1.LocalObjectReference{Name: t.c.name}, Rule: &etcdv1.DefragRule{All: true},
	}}
	if err := t.c.e.k8s.Create(ctx, d); err != nil {
		return err
	}
	err := poll(ctx, 4*time.Minute, "EtcdDefrag "+name+" complete", func(ctx context.Context) error {
		if err := t.c.e.k8s.Get(ctx, client.ObjectKeyFromObject(d), d); err != nil {
			return err
		}
		switch d.Status.Phase {
		case etcdv1.EtcdDefragPhaseComplete:
			if int(d.Status.Defragmented) != int(t.replicas) {
				return fmt.Errorf("complete with %d of %d members defragmented: %+v", d.Status.Defragmented, t.replicas, d.Status.Members)
			}
			return nil
		case etcdv1.EtcdDefragPhaseFailed:
			return fmt.Errorf("failed: %+v", d.Status.Members)
		}
		return fmt.Errorf("phase %q", d.Status.Phase)
	})
	if err != nil {
		return err
	}
	return t.c.waitSettled(ctx, t.replicas, time.Time{})
}

// ensureClaim creates a 1Gi PVC of the default class in the cluster's namespace unless it
// is there.
func (c *cluster) ensureClaim(ctx context.Context, name string) error {
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: c.ns, Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
	if err := c.e.k8s.Create(ctx, pvc); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// revision is the revision etcd serves now, read through the client Service.
func (c *cluster) revision(ctx context.Context) (int64, error) {
	clients, err := c.dial(ctx, 1)
	if err != nil {
		return 0, err
	}
	defer func() { _ = clients[0].Close() }()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := clients[0].Get(ctx, "robustness-revision-probe")
	if err != nil {
		return 0, err
	}
	return resp.Header.Revision, nil
}
