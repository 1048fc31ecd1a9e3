package cluster

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// requireDataInPlace makes the Pod of a member added by scale-out, whose initial cluster
// still names the peers it joined with, refuse an empty data directory from its next
// container start on, without restarting it: a metadata patch of the annotation the etcd
// container reads its initial cluster from (specs.RequireDataInPlace), which the kubelet
// reads afresh at every container start. True when it patched. A Pod that needs nothing, one
// of an older release (its flag changes only with a new Pod: joinedWithPeerFlags rolls it),
// and one gone (the member controller builds its next Pod with specs.RequireData) are left
// alone.
func (r *Reconciler) requireDataInPlace(ctx context.Context, c *etcdv1.EtcdCluster, m *etcdv1.EtcdMember, pod *corev1.Pod) (bool, error) {
	if pod == nil || !specs.RequireDataInPlaceChanges(pod, c, m) {
		return false, nil
	}
	// pod is the view's, as listed through the cache, and every later step of this look reads
	// it (as the cache's own object would be, were the cache read without copies): it stays
	// as listed. The patch is made on a copy, taken only now that there is something to
	// change; this runs for every voter at every look, and almost always changes nothing.
	patched := pod.DeepCopy()
	specs.RequireDataInPlace(patched, c, m)
	if err := r.Patch(ctx, patched, client.MergeFrom(pod)); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("making the Pod of %s refuse an empty data directory: %w", m.Name, err)
	}
	log.FromContext(ctx).V(1).Info("the member's Pod now names only the member as its initial cluster: from its next container start on, etcd refuses an empty data directory",
		"member", m.Name, "pod", pod.Name)
	return true, nil
}

// requireDataOfVoters does for a voter what promoteLearners does before each promotion
// (requireDataInPlace), for a voter whose Pod still names its peers all the same: promoted by
// an operator release before this one, or whose Pod was recreated naming its peers (the
// member controller could not ask etcd whether it had joined).
func (r *Reconciler) requireDataOfVoters(ctx context.Context, c *etcdv1.EtcdCluster, v *clusterView) (bool, error) {
	for _, m := range v.members {
		em, ok := v.etcdMemberFor(c, m)
		if !ok || em.IsLearner || !em.IsStarted() {
			continue
		}
		if done, err := r.requireDataInPlace(ctx, c, m, v.pods[m.Name]); done || err != nil {
			return done, err
		}
	}
	return false, nil
}
