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
