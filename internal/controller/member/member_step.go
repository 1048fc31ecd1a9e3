package member

import (
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// pvcFate is what a reconcile did with the member's PVC, or found of it, for its step line
// (kit.Step): the functions that act on the PVC return it.
type pvcFate string

const (
	pvcAbsent          pvcFate = "absent"          // none of the member's name
	pvcNotTheMembers   pvcFate = "notTheMembers"   // one of its name that is someone else's: left alone
	pvcUnchanged       pvcFate = "unchanged"       // the member's, and as it should be
	pvcDeleting        pvcFate = "deleting"        // going with its data: the cluster reconciler replaces the member
	pvcCreated         pvcFate = "created"         // a new, empty one
	pvcUpdated         pvcFate = "updated"         // its owners, the member's identity or data version recorded
	pvcGrown           pvcFate = "grown"           // its request raised to the member's size
	pvcDeleted         pvcFate = "deleted"         // after a removal from etcd
	pvcKeptAsDiscarded pvcFate = "keptAsDiscarded" // marked as the data a quorum-loss recovery discarded
	pvcReleased        pvcFate = "released"        // off the deleted cluster's owners (whenDeleted Retain)
	pvcGoesWithCluster pvcFate = "goesWithCluster" // left to garbage collection with the deleted cluster
	pvcOwnedPerPolicy  pvcFate = "ownedPerPolicy"  // the member taken off its owners (a deletion by hand)
)

// changed: the reconcile wrote the PVC.
func (f pvcFate) changed() bool {
	switch f {
	case pvcCreated, pvcUpdated, pvcGrown, pvcDeleted, pvcKeptAsDiscarded, pvcReleased, pvcOwnedPerPolicy:
		return true
	}
	return false
}

// afterError is the fate of the member's PVC, and the error to return, when reading or
// writing it failed with err: absent, and no error, when it was not found; else unchanged,
// with err.
func afterError(err error) (pvcFate, error) {
	if apierrors.IsNotFound(err) {
		return pvcAbsent, nil
	}
	return pvcUnchanged, err
}

// pvcFacts are the step line's facts of the member's PVC.
func pvcFacts(m *etcdv1.EtcdMember, fate pvcFate) []any {
	return []any{"pvc", specs.PVCName(m), "pvcFate", string(fate)}
}

// podFacts are the step line's facts of the member's Pod.
func podFacts(pod *corev1.Pod) []any {
	return []any{"pod", pod.Name, "podPhase", string(pod.Status.Phase)}
}
