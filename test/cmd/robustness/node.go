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

// nodeCrashTrial crashes the node of a member chosen at random: every container of every Pod
// on it is killed at once, the node stops answering for 5 to 20 s, and then comes back and
// starts its Pods again (a machine that lost power and rebooted). The member must rejoin
// under its ID with its data, and the cluster settle again.
func nodeCrashTrial(ctx context.Context, t *trialEnv) error {
	victim, err := t.pickMember(ctx)
	if err != nil {
		return err
	}
	down := 5 + t.rnd.IntN(16)
	logf("trial %d: node %s (holding %s) crashed, back after %d s", t.index, victim.Spec.NodeName, victim.Name, down)
	since := time.Now()
	if err := robustness.CrashNode(victim.Spec.NodeName, down); err != nil {
		return err
	}
	if err := t.c.waitPodsReady(ctx, int(t.replicas)); err != nil {
		return err
	}
	return t.c.waitSettled(ctx, t.replicas, since)
}

// evictTrial has the node of a member chosen at random evict the member's Pod as a kubelet
// does under memory pressure: its containers stopped within their grace period, the Pod
// left Failed (reason Evicted) and never started again. The operator must delete it and
// start the member again on its PVC under the same member ID.
func evictTrial(ctx context.Context, t *trialEnv) error {
	victim, err := t.pickMember(ctx)
	if err != nil {
		return err
	}
	logf("trial %d: %s evicted by its node %s", t.index, victim.Name, victim.Spec.NodeName)
	return t.c.comesBackUnderItsID(ctx, t.replicas, victim, func() error { return robustness.EvictUnderPressure(victim) })
}

// nodeShutdownTrial shuts the node of a member chosen at random down gracefully, as a
// kubelet's graceful node shutdown does (every Pod on it stopped within its grace period and
// left Failed, reason Terminated), and starts it again 5 to 20 s later; it starts none of
// those Pods. The operator must start the member again on its PVC under the same ID.
func nodeShutdownTrial(ctx context.Context, t *trialEnv) error {
	victim, err := t.pickMember(ctx)
	if err != nil {
		return err
	}
	down := 5 + t.rnd.IntN(16)
	logf("trial %d: node %s (holding %s) shut down gracefully, back after %d s", t.index, victim.Spec.NodeName, victim.Name, down)
	return t.c.comesBackUnderItsID(ctx, t.replicas, victim, func() error { return robustness.ShutDownNode(victim.Spec.NodeName, down) })
}

// comesBackUnderItsID does fault, which stops the victim Pod for good, and waits until the
// Pod was replaced, every member Pod is Ready and the cluster has settled, with the victim
// under the member ID it had.
func (c *cluster) comesBackUnderItsID(ctx context.Context, replicas int32, victim *corev1.Pod, fault func() error) error {
	m := &etcdv1.EtcdMember{}
	if err := c.e.k8s.Get(ctx, client.ObjectKeyFromObject(victim), m); err != nil {
		return err
	}
	since := time.Now()
	if err := fault(); err != nil {
		return err
	}
	err := poll(ctx, 5*time.Minute, "Pod "+victim.Name+" replaced", func(ctx context.Context) error {
		pod := &corev1.Pod{}
		if err := c.e.k8s.Get(ctx, client.ObjectKeyFromObject(victim), pod); client.IgnoreNotFound(err) != nil {
			return err
		} else if err == nil && pod.UID == victim.UID {
			return fmt.Errorf("still the Pod of before (%s, %s)", pod.Status.Phase, pod.Status.Reason)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := c.waitPodsReady(ctx, int(replicas)); err != nil {
		return err
	}
	return c.waitSettled(ctx, replicas, since, func(ec *etcdv1.EtcdCluster) error {
		for _, s := range ec.Status.Members {
			if s.Name == victim.Name && s.ID != m.Status.MemberID {
				return fmt.Errorf("member %s came back as %s, was %s: it must keep its ID and data", s.Name, s.ID, m.Status.MemberID)
			}
		}
		return nil
	})
}
