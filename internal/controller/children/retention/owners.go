package retention

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// Whose a PVC is, and the mark of data a quorum-loss recovery discarded: the member
// reconciler asks both before it uses or keeps a PVC, the cluster reconciler before it
// releases or deletes one.

// PVCOfMember says whether an existing PVC holds the data of the member named member, and
// may be taken over: it is controlled by that member or an earlier EtcdMember of the same
// name (deleted by hand), by the cluster (the member finalizer's rescue), or by nothing while
// its labels name this cluster and member (kept when an EtcdCluster of this name was deleted
// with whenDeleted Retain). Anything else is someone else's and is never taken.
func PVCOfMember(pvc *corev1.PersistentVolumeClaim, c *etcdv1.EtcdCluster, member string) bool {
	ref := metav1.GetControllerOf(pvc)
	switch {
	case ref == nil:
		return pvc.Labels[etcdv1.LabelCluster] == c.Name && pvc.Labels[etcdv1.LabelMember] == member &&
			pvc.Labels[etcdv1.LabelManagedBy] == specs.ManagerName
	case ref.Kind == "EtcdMember":
		return ref.Name == member
	case ref.Kind == "EtcdCluster":
		return ref.UID == c.UID
	}
	return false
}

// DiscardedData: the PVC holds the data of a member a recovery discarded (the cluster
// reconciler's discarded.go says what becomes of it).
func DiscardedData(pvc *corev1.PersistentVolumeClaim) bool {
	return pvc.Annotations[etcdv1.AnnotationDiscardedByRecovery] != ""
}

// MarkDiscarded annotates the PVC as kept discarded data (at now, unless it already says
// when) and takes cluster c's and its members' owner references off it, so that garbage
// collection of the cluster, whatever its retention policy, leaves the salvage copy. True
// when it changed the PVC, which the caller then writes.
func MarkDiscarded(c *etcdv1.EtcdCluster, pvc *corev1.PersistentVolumeClaim, now time.Time) bool {
	changed := dropClusterOwners(c, pvc)
	if DiscardedData(pvc) {
		return changed
	}
	if pvc.Annotations == nil {
		pvc.Annotations = map[string]string{}
	}
	pvc.Annotations[etcdv1.AnnotationDiscardedByRecovery] = now.UTC().Format(time.RFC3339)
	return true
}
