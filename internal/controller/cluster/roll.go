package cluster

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller/kit"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// rollOutdatedPods applies a changed Pod spec (resources, affinity, options, metadata, ...)
// by restarting one member at a time, and only when the whole cluster is healthy: every
// member's Pod is up, Ready and not terminating, read live from the API so that a deletion
// a moment ago is seen, and every voter answers. A PVC member comes back with its data and
// ID; a tmpfs member is replaced, which needs another member to hold the data. Leadership
// moves away first, so the cluster never waits for an election.
//
// A version upgrade goes through here too: once no Pod is outdated, the next member is moved
// to spec.version (upgradeNextMember), which makes its Pod outdated.
func (r *Reconciler) rollOutdatedPods(ctx context.Context, c *etcdv1.EtcdCluster, v *clusterView) (bool, error) {
	rolled, err := r.restartOutdatedPod(ctx, c, v)
	if rolled || err != nil {
		return rolled, err
	}
	return r.upgradeNextMember(ctx, c, v)
}

// restartOutdatedPod restarts the next member whose Pod is outdated; false when none is.
func (r *Reconciler) restartOutdatedPod(ctx context.Context, c *etcdv1.EtcdCluster, v *clusterView) (bool, error) {
	// The Pods observe read from the cache answer the question asked at every reconcile, "is
	// anything outdated?"; only a restart about to happen pays for a live read.
	key := client.ObjectKeyFromObject(c)
	if outdated, _ := r.classifyPods(c, v, v.pods); len(outdated) == 0 {
		r.RollSlots.Release(key)
		return false, nil
	}
	reader := r.APIReader
	if reader == nil {
		reader = r.Client
	}
	pods, err := r.memberPods(ctx, reader, c)
	if err != nil {
		return false, err
	}
	outdated, down := r.classifyPods(c, v, pods)
	if len(outdated) == 0 {
		r.RollSlots.Release(key)
		return false, nil
	}
	if len(down) > 0 {
		if stuck := podsThatCannotStart(pods, down); len(stuck) > 0 {
			// Its slot would be held for as long as a person takes to fix the spec, and
			// every other cluster's roll would wait with it.
			r.RollSlots.Release(key)
			return false, waitFor(etcdv1.ReasonRollStuck, "%d members to restart for the new Pod spec; waiting for %s, whose Pod cannot start: see the member's Ready condition (the roll slot is given back meanwhile)", len(outdated), strings.Join(stuck, ", "))
		}
		return false, waitFor(etcdv1.ReasonRollingUpdate, "%d members to restart for the new Pod spec; waiting for %s to be up first", len(outdated), strings.Join(down, ", "))
	}
	if total, healthy := v.voters(); healthy < total {
		return false, waitFor(etcdv1.ReasonMembersUnhealthy, "not restarting members for the new Pod spec: %d of %d voters healthy", healthy, total)
	}
	if c.Spec.Storage.Medium == etcdv1.StorageMediumMemory && len(v.members) == 1 {
		return false, waitFor(etcdv1.ReasonPodSpecChangeBlocked, "the new Pod spec is not applied: restarting the only member of a tmpfs cluster would lose its data; scale to 3 first, or recreate the cluster")
	}
	if ok, rolling := r.RollSlots.Take(key); !ok {
		return false, kit.Waiting{Reason: etcdv1.ReasonRollQueued, RetryIn: rollSlotRetry, Message: fmt.Sprintf(
			"%d members to restart for the new Pod spec; waiting for a slot: %d clusters are restarting members (--max-concurrent-rolls)", len(outdated), rolling)}
	}
	victim := r.pickRollVictim(c, v, outdated)
	if moved, err := r.moveLeaderAwayFrom(ctx, c, v, victim); moved || err != nil {
		return moved, err
	}
	pod := pods[victim.Name]
	if err := r.Delete(ctx, pod, client.Preconditions{UID: &pod.UID}); client.IgnoreNotFound(err) != nil {
		return false, err
	}
	r.eventAbout(ctx, c, victim, corev1.EventTypeNormal, etcdv1.ReasonRollingMember, "RestartMember", "restarting member %s to apply the changed Pod spec (etcd %s; %d of %d outdated)", victim.Name, victim.Spec.Version, len(outdated), len(v.members))
	return true, nil
}

// podsThatCannotStart names the members among down whose Pods cannot start without someone
// acting: no node can take it, or a container waits for a reason other than being created
// (kit.StuckWaiting). A Pod still starting, or gone, is not stuck: the roll's own restart looks
// like that for a while.
func podsThatCannotStart(pods map[string]*corev1.Pod, down []string) []string {
	var stuck []string
	for _, name := range down {
		if pod := pods[name]; pod != nil && pod.DeletionTimestamp.IsZero() && (kit.PodUnschedulable(pod) || kit.StuckWaiting(pod) != "") {
			stuck = append(stuck, name)
		}
	}
	return stuck
}

// rollSlotRetry is how soon a cluster waiting for a roll slot looks again.
const rollSlotRetry = 10 * time.Second

// memberPods maps member names to their Pods as reader sees them.
func (r *Reconciler) memberPods(ctx context.Context, reader client.Reader, c *etcdv1.EtcdCluster) (map[string]*corev1.Pod, error) {
	list := &corev1.PodList{}
	if err := reader.List(ctx, list, client.InNamespace(c.Namespace), client.MatchingLabels{etcdv1.LabelCluster: c.Name}); err != nil {
		return nil, err
	}
	pods := make(map[string]*corev1.Pod, len(list.Items))
	for i := range list.Items {
		pods[list.Items[i].Name] = &list.Items[i]
	}
	return pods, nil
}

// classifyPods sorts the members whose Pods are up into those built from an older spec, and
// names the members whose Pods are missing, terminating or not Ready.
func (r *Reconciler) classifyPods(c *etcdv1.EtcdCluster, v *clusterView, pods map[string]*corev1.Pod) (outdated []*etcdv1.EtcdMember, down []string) {
	for _, m := range v.members {
		pod := pods[m.Name]
		if !podServes(pod) {
			down = append(down, m.Name)
			continue
		}
		if specs.AdoptedPodIsCurrent(m, pod) {
			continue
		}
		if pod.Annotations[etcdv1.AnnotationPodTemplateHash] != specs.Pod(c, m, r.PodOptions).Annotations[etcdv1.AnnotationPodTemplateHash] ||
			joinedWithPeerFlags(c, m, pod) {
			outdated = append(outdated, m)
		}
	}
	return outdated, down
}

// joinedWithPeerFlags: a voter added by scale-out still runs in the Pod an earlier operator
// release built for it to join with, whose --initial-cluster flag would let it rejoin under
// its ID on an emptied data directory (specs.RefillsEmptyData). Its one restart gets it a Pod
// that refuses empty data. A Pod built now takes its initial cluster from an annotation
// instead, which requireDataInPlace changes without a restart. tmpfs members are left alone:
// their data survives container restarts and goes only with the Pod, which is never
// recreated under their ID.
func joinedWithPeerFlags(c *etcdv1.EtcdCluster, m *etcdv1.EtcdMember, pod *corev1.Pod) bool {
	return m.Status.Role == etcdv1.RoleVoter && m.Status.MemberID != "" &&
		m.Spec.Storage.Medium != etcdv1.StorageMediumMemory && specs.RefillsEmptyData(pod, c, m) &&
		!specs.ReadsInitialClusterAnnotation(pod)
}

// podServes: the member's Pod, as this look saw it, is Ready and not going.
func podServes(pod *corev1.Pod) bool {
	return pod != nil && pod.DeletionTimestamp.IsZero() && kit.PodReady(pod)
}

// pickRollVictim takes followers before the leader.
func (r *Reconciler) pickRollVictim(c *etcdv1.EtcdCluster, v *clusterView, outdated []*etcdv1.EtcdMember) *etcdv1.EtcdMember {
	for _, m := range outdated {
		if em, ok := v.etcdMemberFor(c, m); !ok || em.ID != v.leader {
			return m
		}
	}
	return outdated[0]
}

// moveLeaderAwayFrom hands leadership to another healthy voter when m leads; true when it did.
func (r *Reconciler) moveLeaderAwayFrom(ctx context.Context, c *etcdv1.EtcdCluster, v *clusterView, m *etcdv1.EtcdMember) (bool, error) {
	em, ok := v.etcdMemberFor(c, m)
	if !ok || em.ID != v.leader {
		return false, nil
	}
	for _, other := range v.etcdMembers {
		if other.ID == em.ID || other.IsLearner || !v.healthy[other.ID] {
			continue
		}
		if err := v.etcd.MoveLeader(ctx, other.ID); err != nil {
			return false, fmt.Errorf("moving leadership away from %s before restarting it: %w", m.Name, err)
		}
		r.eventAbout(ctx, c, m, corev1.EventTypeNormal, etcdv1.ReasonLeaderMoved, "MoveLeader", "moved leadership from %s to %s before restarting it", m.Name, other.Name)
		return true, nil
	}
	return false, nil // the only voter: it restarts as leader
}
