package v1alpha2

// Label keys the operator owns; they win over spec.additionalMetadata. The keys and values are
// a compatibility contract: a value that must change (LabelRole's did, to Cozystack's) keeps
// its old form named here and moves running clusters over without a gap.

// Well-known labels (app.kubernetes.io) and the labels of every object a cluster owns.
const (
	LabelName      = "app.kubernetes.io/name"
	LabelInstance  = "app.kubernetes.io/instance"
	LabelManagedBy = "app.kubernetes.io/managed-by"
	LabelCluster   = "etcd-operator.cozystack.io/cluster"
	LabelMember    = "etcd-operator.cozystack.io/member"
	LabelRole      = "etcd-operator.cozystack.io/role"
)

// LabelGuideController is the label the official etcd operator (operator.etcd.io) puts on its
// Pods, with the cluster's name; its deployment guide selects a cluster's Pods with
// `-l controller=NAME`. Member Pods carry it too, so that those commands find the same
// Pods here. Member Pods only: the guide takes the first Pod it selects as a member.
const LabelGuideController = "controller"

// RoleLabelVoter is LabelRole's value on a voter's Pod, as Cozystack's operator writes it and
// its PodDisruptionBudget selects (`etcd-operator.cozystack.io/role=voter`). A learner's Pod,
// and one whose role is not known yet, carries no LabelRole, as there.
const RoleLabelVoter = "voter"

// LegacyRoleLabelVoter and LegacyRoleLabelLearner are LabelRole's values before it took
// Cozystack's: the member's role as its status shows it. Pods of clusters that ran under that
// operator still carry them until the member controller relabels them in place; the
// PodDisruptionBudget selects both voter values until no Pod carries an old one.
const (
	LegacyRoleLabelVoter   = "Voter"
	LegacyRoleLabelLearner = "Learner"
)

// KeyPrefix is the prefix of the operator's label and annotation keys. spec.additionalMetadata
// never sets a key under it: such a label on an agent Pod would have the operator take it for
// a member, and such an annotation on an EtcdMember would be an order (replace, remove).
const KeyPrefix = "etcd-operator.cozystack.io/"

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

// LabelArchiverOf marks a schedule's archiver Deployment, its Pod, ServiceAccount, Role and
// RoleBinding with the EtcdSnapshotSchedule's name.
const LabelArchiverOf = "etcd-operator.cozystack.io/archiver-of"
