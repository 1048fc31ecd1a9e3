package v1alpha2

// Label keys the operator owns; they win over spec.additionalMetadata. The values are a
// compatibility contract: never change one.

// Well-known labels (app.kubernetes.io) and the labels of every object a cluster owns.
const (
	LabelName      = "app.kubernetes.io/name"
	LabelInstance  = "app.kubernetes.io/instance"
	LabelManagedBy = "app.kubernetes.io/managed-by"
	LabelCluster   = "etcd-operator.cozystack.io/cluster"
	LabelMember    = "etcd-operator.cozystack.io/member"
	LabelRole      = "etcd-operator.cozystack.io/role"
)

// LabelSnapshotOf marks a snapshot agent's Pod with the cluster it reads: the cluster's
// NetworkPolicy admits such Pods to the client port.
const LabelSnapshotOf = "etcd-operator.cozystack.io/snapshot-of"

// LabelSnapshot marks an agent Job and its Pod with the EtcdSnapshot's name.
const LabelSnapshot = "etcd-operator.cozystack.io/snapshot"

// LabelSnapshotUID marks an agent Job with the EtcdSnapshot's UID.
const LabelSnapshotUID = "etcd-operator.cozystack.io/snapshot-uid"

// LabelAction on an agent Job is its action: "snapshot", "delete" or "verify".
const LabelAction = "etcd-operator.cozystack.io/action"

// LabelVerifyCluster, LabelVerifySnapshotUID and AnnotationVerifiedSum mark a verify Job:
// which file, as which EtcdSnapshot recorded it, it verifies. The cluster controller trusts a
// verdict only for that exact EtcdSnapshot (UID) and checksum. Not LabelSnapshot: the snapshot
// controller has nothing to do with it.
const LabelVerifyCluster = "etcd-operator.cozystack.io/verify-cluster"

// LabelVerifySnapshotUID: see LabelVerifyCluster.
const LabelVerifySnapshotUID = "etcd-operator.cozystack.io/verify-snapshot-uid"

// LabelNoSpaceRemediation marks the EtcdDefrag a NOSPACE remediation of the named cluster created.
const LabelNoSpaceRemediation = "etcd-operator.cozystack.io/nospace-remediation"

// LabelDefragSchedule marks the EtcdDefrags that spec.defrag of the named cluster created.
const LabelDefragSchedule = "etcd-operator.cozystack.io/defrag-schedule"

// LabelDefragPolicy marks the EtcdDefrags that the named EtcdDefragPolicy created (Cozystack's key).
const LabelDefragPolicy = "etcd-operator.cozystack.io/defrag-policy"

// LabelSnapshotSchedule marks the EtcdSnapshots a schedule created.
const LabelSnapshotSchedule = "etcd-operator.cozystack.io/schedule"

// Finalizers the operator puts on its objects.

// FinalizerMember holds an EtcdMember until its removal from etcd (deliberate removal) or the
// rescue of its PVC (deletion by hand) is done.
const FinalizerMember = "etcd-operator.cozystack.io/member"

// FinalizerRetainPVCs holds a cluster with whenDeleted Retain until its PVCs are released.
const FinalizerRetainPVCs = "etcd-operator.cozystack.io/retain-pvcs"

// FinalizerSnapshotFile lets the controller delete the stored file of a snapshot with deletionPolicy Delete.
const FinalizerSnapshotFile = "etcd-operator.cozystack.io/snapshot-file"

// FinalizerKeepSnapshots keeps the snapshots a schedule took when the schedule is deleted: they are
// released (their owner reference removed) instead of garbage-collected with their files.
const FinalizerKeepSnapshots = "etcd-operator.cozystack.io/keep-snapshots"

// FinalizerRestoreSource on an EtcdSnapshot holds its stored file while a cluster is to be
// founded from it: the cluster controller sets it before the act that makes the file
// necessary (the record of a recovery from the snapshot, or the founding member of a cluster
// whose spec.bootstrap.restore names it), so that a deletion of the EtcdSnapshot (with
// deletionPolicy Delete, of its file too) that comes in between waits for the restore, or,
// if it came first, makes the act refused rather than begun on a file about to go. The
// snapshot controller lets it go once SnapshotNeededBy names no cluster.
const FinalizerRestoreSource = "etcd-operator.cozystack.io/restore-source"
