package v1alpha2

// Annotations a user sets on the operator's objects.
const (
	// AnnotationSuspendReconcile set to "true" on an EtcdCluster keeps the operator's hands
	// off the cluster and its members: no member is created, started, replaced or removed,
	// no membership or status changes, until it is removed. Deleting the cluster still
	// works. For repairs by hand; the ReconcileSuspended condition says it is in force.
	AnnotationSuspendReconcile = "etcd-operator.cozystack.io/suspend-reconcile"
)

// ReconcileSuspended: the operator leaves the cluster alone (AnnotationSuspendReconcile).
func (c *EtcdCluster) ReconcileSuspended() bool {
	return c.Annotations[AnnotationSuspendReconcile] == "true"
}

// AnnotationDiscardedByRecovery on a PVC says that a quorum-loss recovery discarded the
// member whose data it holds (a recovery from a member, which forces a new cluster from
// another, or from an EtcdSnapshot, which replaces every member): the data is kept as a
// salvage copy instead of deleted. Its value is the time it was kept (RFC 3339). Such a PVC
// is no member's any more: the operator never starts a member on it, never rebuilds an
// EtcdMember from it and never adopts it into a cluster of its name, and it has no owner, so
// that garbage collection of the cluster leaves it. It goes when a person deletes it, or when
// spec.quorumLoss.keepDiscardedDataSeconds has passed with the recovered cluster Available.
//
// On an EtcdMember, "true" beside the removal mark tells its finalizer to keep the member's
// PVC that way instead of deleting it; set by the recovery only.
const AnnotationDiscardedByRecovery = "etcd-operator.cozystack.io/discarded-by-recovery"

// AnnotationNodeLostSince, on an EtcdMember, is when the operator first saw the node its data
// is pinned to gone (RFC 3339): spec.nodeLoss.gracePeriodSeconds counts from it, across
// operator restarts. The operator writes it and removes it when the node is back or the
// member serves again.
const AnnotationNodeLostSince = "etcd-operator.cozystack.io/node-lost-since"
