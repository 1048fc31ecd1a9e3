package cluster

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller/children/retention"
	"github.com/quorumkeeper/etcd-operator/internal/controller/kit"
	"github.com/quorumkeeper/etcd-operator/internal/etcdversion"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// A new EtcdCluster of the same name in the same namespace as one deleted with whenDeleted
// Retain (children/retention keeps those PVCs) finds the kept PVCs at its first bootstrap and
// recreates their members (adoptRetainedPVCs): same names, same member IDs (from the PVC
// annotations), same data, so the same etcd cluster ID. Whether it may, and which members it
// makes, are bootstrap decisions: they stay with the cluster reconciler.

// retainedPVCs are PVCs kept from an earlier cluster of this name: no owner, this cluster's
// label, and the member ID the member recorded on them; not the data of members a recovery
// discarded, which is no member's. Sorted by name.
func (r *Reconciler) retainedPVCs(ctx context.Context, c *etcdv1.EtcdCluster) ([]corev1.PersistentVolumeClaim, error) {
	list := &corev1.PersistentVolumeClaimList{}
	if err := r.List(ctx, list, client.InNamespace(c.Namespace), client.MatchingLabels{etcdv1.LabelCluster: c.Name}); err != nil {
		return nil, err
	}
	var out []corev1.PersistentVolumeClaim
	for _, pvc := range list.Items {
		if metav1.GetControllerOf(&pvc) == nil && pvc.Annotations[etcdv1.AnnotationMemberID] != "" &&
			(pvc.Labels[etcdv1.LabelMember] == pvc.Name || specs.AdoptionOf(&pvc) != nil) && pvc.DeletionTimestamp.IsZero() && !retention.DiscardedData(&pvc) {
			out = append(out, pvc)
		}
	}
	slices.SortFunc(out, func(a, b corev1.PersistentVolumeClaim) int { return byOrdinal(a.Name, b.Name) })
	return out, nil
}

// retainedDataRefusal says why a first bootstrap must not adopt the kept PVCs, as a reason and
// a message naming them and the ways out; "" when it may. It is decided on the PVCs alone,
// before any member is made, so that a refusal leaves nothing half-applied.
func retainedDataRefusal(c *etcdv1.EtcdCluster, kept []corev1.PersistentVolumeClaim) (reason, message string) {
	clusterIDs := map[string]bool{}
	names := make([]string, 0, len(kept))
	for _, pvc := range kept {
		if id := pvc.Annotations[etcdv1.AnnotationClusterID]; id != "" {
			clusterIDs[id] = true
		}
		names = append(names, pvc.Name)
	}
	list := strings.Join(names, ", ")
	if len(clusterIDs) > 1 {
		return etcdv1.ReasonRetainedDataConflict, fmt.Sprintf("the kept PVCs %s come from %d different etcd clusters: the operator cannot tell which to bring back; delete the PVCs of the cluster you do not want",
			list, len(clusterIDs))
	}
	// The kept data would be served as if it were the snapshot, or the snapshot written over
	// data someone kept on purpose: neither without a person's word.
	if c.Spec.Bootstrap != nil && c.Spec.Bootstrap.Restore != nil {
		src := "spec.bootstrap.restore"
		if name := specs.BootstrapSnapshot(c); name != "" {
			src += " (EtcdSnapshot " + name + ")"
		}
		return etcdv1.ReasonRetainedDataBlocksRestore, fmt.Sprintf("%s asks for a new cluster from a snapshot, but PVCs %s kept from an earlier EtcdCluster %s (etcd cluster %s) hold data of their own: nothing is created. Delete those PVCs to restore from the snapshot, or delete this EtcdCluster and create it without spec.bootstrap.restore to bring the kept data back",
			src, list, c.Name, firstKey(clusterIDs))
	}
	if want, ok := etcdversion.Parse(c.Spec.Version); ok {
		for _, pvc := range kept {
			have, ok := etcdversion.Parse(pvc.Annotations[etcdv1.AnnotationEtcdVersion])
			if ok && have.NewerMinor(want) {
				return etcdv1.ReasonRetainedDataNewer, fmt.Sprintf("PVC %s kept from an earlier EtcdCluster %s holds data etcd %s wrote (%s), and etcd cannot open data of a newer minor: nothing is created. Set spec.version to %d.%d or later to bring the kept data back, or delete the PVCs %s to start anew",
					pvc.Name, c.Name, have, etcdv1.AnnotationEtcdVersion, have.Major, have.Minor, list)
			}
		}
	}
	return "", ""
}

// adoptRetainedPVCs is the first bootstrap of a cluster that finds PVCs kept from an earlier
// cluster of its name: instead of founding a new etcd cluster next to that data, it
// recreates the kept members, each on its PVC with the member ID annotated there
// (memberFromPVC). Their etcd starts from its data and the old cluster comes back with its
// cluster ID; scaling then goes on to spec.replicas. A crash halfway is finished next time:
// members made from kept PVCs do not count as a bootstrap already under way. It refuses,
// before any member is made, what retainedDataRefusal refuses.
func (r *Reconciler) adoptRetainedPVCs(ctx context.Context, c *etcdv1.EtcdCluster, v *clusterView) (bool, error) {
	if c.Status.ClusterID != "" || v.reachable || c.Spec.Storage.Medium == etcdv1.StorageMediumMemory || foundingBegun(v.members) {
		return false, nil
	}
	// A PVC still being deleted (to let a restore go on, say) holds the name a founding
	// member's new PVC takes, and would be taken for it: wait until it is gone.
	if going := pvcsGoing(v.pvcs); len(going) > 0 {
		return true, waitFor(etcdv1.ReasonBootstrapping, "waiting for PVCs %s, being deleted, to be gone before the first members are made", strings.Join(going, ", "))
	}
	kept, err := r.retainedPVCs(ctx, c)
	if err != nil || len(kept) == 0 {
		return false, err
	}
	if reason, message := retainedDataRefusal(c, kept); reason != "" {
		return true, kit.ChildProblem(reason, "%s", message)
	}
	clusterID, names := "", make([]string, 0, len(kept))
	for _, pvc := range kept {
		if id := pvc.Annotations[etcdv1.AnnotationClusterID]; id != "" {
			clusterID = id
		}
		names = append(names, pvcMember(&pvc))
	}
	adopted := 0
	for i := range kept {
		have := memberNamed(v.members, pvcMember(&kept[i]))
		if !needsMemberFromPVC(have) {
			continue
		}
		if _, err := r.memberFromPVC(ctx, c, have, &kept[i], kept[i].Annotations[etcdv1.AnnotationClusterID], etcdv1.RoleVoter, ptrOr(c.Spec.Replicas, 3) == 0); err != nil {
			return true, err
		}
		adopted++
	}
	if adopted == 0 {
		return false, nil
	}
	r.event(ctx, c, corev1.EventTypeNormal, etcdv1.ReasonAdoptedRetainedPVCs, "Bootstrap", "found PVCs kept from an earlier cluster %s (etcd cluster %s): recreated members %s on them with their data",
		c.Name, clusterID, strings.Join(names, ", "))
	return true, nil
}

// pvcsGoing names the PVCs being deleted, in order.
func pvcsGoing(pvcs map[string]*corev1.PersistentVolumeClaim) []string {
	var out []string
	for _, pvc := range pvcs {
		if !pvc.DeletionTimestamp.IsZero() {
			out = append(out, pvc.Name)
		}
	}
	slices.SortFunc(out, byOrdinal)
	return out
}

// foundingBegun: a first bootstrap of a new etcd cluster has created its founding members.
func foundingBegun(members []*etcdv1.EtcdMember) bool {
	for _, m := range members {
		if m.Spec.Bootstrap.InitialClusterState == etcdv1.InitialClusterStateNew {
			return true
		}
	}
	return false
}

func firstKey(m map[string]bool) string {
	for k := range m {
		return k
	}
	return ""
}
