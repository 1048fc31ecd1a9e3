package main

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

// operated is an EtcdCluster: the operator does the work, the bench only changes the spec.
type operated struct {
	b  *bench
	ns string
}

const clusterName = "etcd"

func (o *operated) namespace() string { return o.ns }

func (o *operated) key() client.ObjectKey {
	return client.ObjectKey{Namespace: o.ns, Name: clusterName}
}

func (o *operated) start(ctx context.Context, n int, version string) error {
	return o.b.createCluster(ctx, o.ns, clusterName, n, version)
}

func (b *bench) createCluster(ctx context.Context, ns, name string, n int, version string) error {
	replicas := int32(n)
	return b.k8s.Create(ctx, &etcdv1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       etcdv1.EtcdClusterSpec{Replicas: &replicas, Version: version},
	})
}

func (o *operated) grow(ctx context.Context, n int) error {
	replicas := int32(n)
	return o.editSpec(ctx, func(s *etcdv1.EtcdClusterSpec) { s.Replicas = &replicas })
}

// shrink changes spec.replicas as grow does.
func (o *operated) shrink(ctx context.Context, n int) error { return o.grow(ctx, n) }

func (o *operated) upgrade(ctx context.Context, version string) error {
	return o.editSpec(ctx, func(s *etcdv1.EtcdClusterSpec) { s.Version = version })
}

// replaceWiped: nothing to do, the operator finds the member that lost its data.
func (o *operated) replaceWiped(context.Context, string, uint64) error { return nil }

// editSpec changes the cluster's spec as a user does, with one patch.
func (o *operated) editSpec(ctx context.Context, edit func(*etcdv1.EtcdClusterSpec)) error {
	c := &etcdv1.EtcdCluster{}
	if err := o.b.k8s.Get(ctx, o.key(), c); err != nil {
		return err
	}
	patch := client.MergeFrom(c.DeepCopy())
	edit(&c.Spec)
	return o.b.k8s.Patch(ctx, c, patch)
}

func (o *operated) losePod(ctx context.Context, name string) error {
	return o.b.losePod(ctx, o.ns, name)
}

// losePod deletes the Pod at once, as a crash or a lost node does.
func (b *bench) losePod(ctx context.Context, ns, name string) error {
	return b.k8s.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, lost)
}

// settled is what a user waits for (the status: Available, n ready voters, nothing in
// motion), and what the floor waits for (n members serving): a status that has not yet
// noticed a lost Pod does not count as recovered.
func (o *operated) settled(ctx context.Context, n int) error {
	c := &etcdv1.EtcdCluster{}
	if err := o.b.k8s.Get(ctx, o.key(), c); err != nil {
		return err
	}
	if err := settledStatus(c, n); err != nil {
		return err
	}
	return o.b.serving(ctx, o.ns, n)
}

// settledStatus is nil when the status, written for the current spec, shows n ready voters,
// no learner, and nothing in motion.
func settledStatus(c *etcdv1.EtcdCluster, n int) error {
	s := c.Status
	want := int32(n)
	switch {
	case s.ObservedGeneration != c.Generation:
		return fmt.Errorf("status is of generation %d, spec is %d", s.ObservedGeneration, c.Generation)
	case !meta.IsStatusConditionTrue(s.Conditions, etcdv1.ConditionAvailable):
		return errors.New("not Available")
	case s.ReadyMembers != want || s.Voters != want || s.Learners != 0:
		return fmt.Errorf("ready %d, voters %d, learners %d; want %d voters", s.ReadyMembers, s.Voters, s.Learners, n)
	case meta.IsStatusConditionTrue(s.Conditions, etcdv1.ConditionProgressing):
		return errors.New("still Progressing")
	}
	return nil
}
