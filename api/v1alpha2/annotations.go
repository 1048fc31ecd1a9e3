package v1alpha2

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
