package main

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/test/robustness"
)

// A bootstrap's time is split into milestones, each the first moment all n members reached
// it, seen by polling the namespace every traceInterval: where the operator's time goes
// beyond the floor's shows between two of them (the controllers' chain before the Pods
// exist, or noticing afterwards that etcd formed).
const traceInterval = 100 * time.Millisecond

// sighting is what one poll of a namespace saw. members and cluster stay empty on the floor.
type sighting struct {
	members []etcdv1.EtcdMember
	cluster *etcdv1.EtcdCluster
	pvcs    []corev1.PersistentVolumeClaim
	pods    []corev1.Pod
}

// milestone is reached when reached says so of a sighting of a cluster of n members.
type milestone struct {
	name    string
	reached func(s sighting, n int) bool
}

// bootstrapMilestones are in the order a bootstrap passes them.
var bootstrapMilestones = []milestone{
	{"EtcdMembers created", func(s sighting, n int) bool { return len(s.members) >= n }},
	{"PVCs created", func(s sighting, n int) bool { return len(s.pvcs) >= n }},
	{"PVCs bound", func(s sighting, n int) bool {
		return countOf(s.pvcs, func(p *corev1.PersistentVolumeClaim) bool { return p.Status.Phase == corev1.ClaimBound }) >= n
	}},
	{"Pods created", func(s sighting, n int) bool { return len(s.pods) >= n }},
	{"Pods scheduled", func(s sighting, n int) bool { return countOf(s.pods, scheduled) >= n }},
	{"etcd containers running", func(s sighting, n int) bool { return countOf(s.pods, running) >= n }},
	{"Pods Ready", func(s sighting, n int) bool { return countOf(s.pods, robustness.PodReady) >= n }},
	{"status Available", func(s sighting, _ int) bool {
		return s.cluster != nil && meta.IsStatusConditionTrue(s.cluster.Status.Conditions, etcdv1.ConditionAvailable)
	}},
	{"status settled", func(s sighting, n int) bool { return s.cluster != nil && settledStatus(s.cluster, n) == nil }},
}

func countOf[T any](items []T, pred func(*T) bool) int {
	n := 0
	for i := range items {
		if pred(&items[i]) {
			n++
		}
	}
	return n
}

func scheduled(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func running(p *corev1.Pod) bool {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Running != nil {
			return true
		}
	}
	return false
}

// reachedAt is when each milestone was first reached, after the step's act began; a
// milestone never reached (the floor's EtcdMembers) is absent.
type reachedAt map[string]time.Duration

// trace polls ns until ctx ends and says when each milestone was first reached after began.
// It runs beside the measurement, on both sides alike.
func (b *bench) trace(ctx context.Context, ns string, n int, began time.Time, operated bool) reachedAt {
	at := reachedAt{}
	look := func(ctx context.Context) {
		s, err := b.sight(ctx, ns, operated)
		if err != nil {
			return
		}
		seen := time.Since(began)
		for _, m := range bootstrapMilestones {
			if _, done := at[m.name]; !done && m.reached(s, n) {
				at[m.name] = seen
			}
		}
	}
	for {
		select {
		case <-ctx.Done():
			// One last look: the step may have settled between two polls.
			last, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			look(last)
			return at
		case <-time.After(traceInterval):
			look(ctx)
		}
	}
}

func (b *bench) sight(ctx context.Context, ns string, operated bool) (sighting, error) {
	var s sighting
	pvcs, pods := &corev1.PersistentVolumeClaimList{}, &corev1.PodList{}
	if err := b.k8s.List(ctx, pvcs, client.InNamespace(ns)); err != nil {
		return s, err
	}
	if err := b.k8s.List(ctx, pods, client.InNamespace(ns)); err != nil {
		return s, err
	}
	s.pvcs, s.pods = pvcs.Items, pods.Items
	if !operated {
		return s, nil
	}
	members, cluster := &etcdv1.EtcdMemberList{}, &etcdv1.EtcdCluster{}
	if err := b.k8s.List(ctx, members, client.InNamespace(ns)); err != nil {
		return s, err
	}
	if err := b.k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: clusterName}, cluster); err != nil {
		return s, err
	}
	s.members, s.cluster = members.Items, cluster
	return s, nil
}
