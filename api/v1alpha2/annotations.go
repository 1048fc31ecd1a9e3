package v1alpha2

// Annotation keys: every annotation the operator or the kubectl plugin reads or writes. The
// values are a compatibility contract: never change one.

// Annotations a user (or `kubectl etcd`) sets on the operator's objects.
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

// AnnotationOperator on an EtcdCluster names the operator that manages it (its claim), as
// "<namespace>/<name>" of that operator's leader election Lease. An operator acts on a
// cluster, its members, snapshots and defragmentations only under its own claim; it takes an
// unclaimed cluster, or one whose claimant's Lease is gone, expired or published without the
// cluster's namespace (AnnotationWatchNamespaces) or with a selector its labels do not match
// (AnnotationClusterSelector), and refuses the others with the OperatorConflict condition. A
// cluster its own --cluster-selector does not match it neither takes, refuses nor acts on,
// even under its own claim. Written once, with the resourceVersion read, so that of two
// operators taking one cluster at once only one succeeds. A person may set it (kubectl
// annotate --overwrite) to hand a cluster to another operator.
const AnnotationOperator = "etcd-operator.cozystack.io/operator"

// AnnotationWatchNamespaces on an operator's leader election Lease publishes the namespaces
// that operator watches (comma-separated; "*" for all), so that another operator may take
// over its claims in a namespace it no longer watches. It counts only while
// AnnotationWatchNamespacesHolder equals the Lease's holderIdentity: a list written by a
// former leader may be out of date. Each leader writes both once, when it is elected.
const AnnotationWatchNamespaces = "etcd-operator.cozystack.io/watch-namespaces"

// AnnotationWatchNamespacesHolder: see AnnotationWatchNamespaces and AnnotationClusterSelector.
const AnnotationWatchNamespacesHolder = "etcd-operator.cozystack.io/watch-namespaces-holder"

// AnnotationClusterSelector on an operator's leader election Lease publishes the label
// selector of the EtcdClusters that operator manages (--cluster-selector, in the form of
// labels.Selector's String; "" or absent for all), so that another operator may take over
// its claims on clusters whose labels it no longer matches. Like AnnotationWatchNamespaces,
// written by each leader when it is elected, and counted only while
// AnnotationWatchNamespacesHolder equals the Lease's holderIdentity. A value that does not
// parse counts as all: the claimant keeps its clusters.
const AnnotationClusterSelector = "etcd-operator.cozystack.io/cluster-selector"

// Annotations a user (or `kubectl etcd`) sets, continued.

// AnnotationRecoverFrom on an EtcdCluster asks the operator to rebuild a cluster that lost
// its quorum from one member's data (the operator's own mechanism: it states what is lost,
// removes and stops the other members, restarts that member with --force-new-cluster and adds
// new members as learners).
const AnnotationRecoverFrom = "etcd-operator.cozystack.io/recover-from"

// AnnotationRecoverFromSnapshot on an EtcdCluster that lost its quorum asks the operator to
// rebuild it from the named EtcdSnapshot: every member is stopped and its data discarded
// (EtcdMembers deleted, PVCs kept as discarded data: AnnotationDiscardedByRecovery),
// and the cluster bootstraps again, under new member names, from one member that
// restores the snapshot (a new cluster ID), the others joining as learners. Only a person
// sets it; it is refused while etcd has a quorum.
const AnnotationRecoverFromSnapshot = "etcd-operator.cozystack.io/recover-from-snapshot"

// AnnotationAllowOtherClusterSnapshot set to "true" beside AnnotationRecoverFromSnapshot
// allows a snapshot of another etcd cluster (another EtcdCluster, or this one before a
// cluster ID change such as an earlier recovery from a snapshot).
const AnnotationAllowOtherClusterSnapshot = "etcd-operator.cozystack.io/recover-from-snapshot-allow-other-cluster"

// AnnotationReplace on an EtcdMember asks the operator to replace that member with a new one
// on empty storage (the operator's own mechanism: it removes the member from etcd, deletes
// its Pod and volume and adds a new member, one step at a time).
const AnnotationReplace = "etcd-operator.cozystack.io/replace"

// AnnotationRestartedAt on an EtcdCluster asks the operator for a rolling restart of every
// member: its value (`kubectl etcd restart` writes the time, RFC 3339) is part of each member
// Pod's fingerprint (AnnotationPodTemplateHash), so a new value makes every Pod outdated and
// the operator's own roll restarts them, one at a time, followers first, the leader last after
// handing leadership away, each only while every member is up and every voter healthy. Like
// kubectl's restartedAt of a Deployment; the value is not read otherwise.
const AnnotationRestartedAt = "etcd-operator.cozystack.io/restarted-at"

// AnnotationPausedReplicas on an EtcdCluster remembers the member count `kubectl etcd pause`
// stopped, so that `resume` brings back the same size.
const AnnotationPausedReplicas = "etcd-operator.cozystack.io/paused-replicas"

// AnnotationAdoptedSubdomain on an EtcdCluster names the members whose stable DNS names live
// under another headless Service than the cluster's, as "SERVICE=MEMBER,MEMBER,...". A
// member adopted from the legacy etcd.aenix.io operator is known to its peers (etcd's
// membership) as <member>.<cluster>-headless.<namespace>.svc, and its running Pod's
// subdomain cannot change: the operator reaches it, and builds its later Pods, under that
// Service. `kubectl etcd migrate aenix` writes it; nothing else should.
//
// A list that ends with AdoptedSubdomainEveryMember puts every member under SERVICE, those
// the operator adds later too, and keeps the Service named after the cluster a client Service
// (ready members only), as the legacy operator had it: no member then lives under that name,
// so it never resolves to a learner or a member that is not ready. Without it (adoptions by
// an earlier plugin) the members the operator adds live under the cluster's own headless
// Service of that name, as in a cluster it created.
const AnnotationAdoptedSubdomain = "etcd-operator.cozystack.io/adopted-subdomain"

// AdoptedSubdomainEveryMember, last in AnnotationAdoptedSubdomain's member list, stands for
// every member, the ones the operator adds included.
const AdoptedSubdomainEveryMember = "*"

// AnnotationCARotationStage on an archiver's Pod template is the cluster's CA rotation stage
// and bundle (status.caRotation) the archiver's TLS was read for: the archiver reads its
// certificates and trusted CA once, at start, so each stage of a rotation starts it again on
// the Secrets as they are then, rather than leave it refused by members that moved on.
const AnnotationCARotationStage = "etcd-operator.cozystack.io/ca-rotation-stage"

// AnnotationCrashAfter lists, comma-separated, the steps after which the operator crashes for
// this cluster; read only when failpoints are on (package failpoint), by the robustness tests.
const AnnotationCrashAfter = "etcd-operator.cozystack.io/crash-after"

// Annotations the operator writes for its own bookkeeping; not for people to set.

// AnnotationForceNewCluster marks the EtcdMember whose next Pod starts etcd with
// --force-new-cluster; set and cleared by the recovery only.
const AnnotationForceNewCluster = "etcd-operator.cozystack.io/force-new-cluster"

// AnnotationRemove marks an EtcdMember the operator is taking out of the cluster on purpose.
// Only with it does the member's finalizer remove the member from etcd and delete its PVC;
// an EtcdMember deleted by hand keeps its data and is recreated.
const AnnotationRemove = "etcd-operator.cozystack.io/remove"

// AnnotationDiscard marks an EtcdMember whose whole etcd cluster is being replaced (a
// recovery from a snapshot): its finalizer deletes its PVC without asking etcd, which has no
// quorum to remove it with and will not exist afterwards. Set by the operator only.
const AnnotationDiscard = "etcd-operator.cozystack.io/discard"

// AnnotationMemberID and AnnotationClusterID record a member's etcd identity on its PVC,
// so that an EtcdMember deleted by accident can be recreated with the same identity.
const AnnotationMemberID = "etcd-operator.cozystack.io/member-id"

// AnnotationClusterID records a member's etcd cluster ID on its PVC (see AnnotationMemberID).
const AnnotationClusterID = "etcd-operator.cozystack.io/cluster-id"

// AnnotationEtcdVersion records on a member's PVC the etcd version the member last
// reported running on that data: etcd cannot open data of a newer minor, so kept PVCs
// are not adopted by a cluster whose spec.version is older.
const AnnotationEtcdVersion = "etcd-operator.cozystack.io/etcd-version"

// AnnotationAdoptedFrom and AnnotationDataDir on an adopted member's PVC repeat its
// spec.adopted, so that the member can be recreated from its PVC alone (an EtcdMember deleted
// by hand) with its data where the other operator put it.
const AnnotationAdoptedFrom = "etcd-operator.cozystack.io/adopted-from"

// AnnotationDataDir: see AnnotationAdoptedFrom.
const AnnotationDataDir = "etcd-operator.cozystack.io/data-dir"

// AnnotationInitialCluster on a member's Pod is the value etcd gets as --initial-cluster: the
// etcd container reads it as ETCD_INITIAL_CLUSTER through the downward API, and has no such
// flag. etcd reads it only on an empty data directory. A kubelet works a container's
// environment out from the Pod as it is at each start of the container, and learns of a
// changed annotation through its watch at once (a running container's environment never
// changes): so the operator, once a member added by scale-out has joined, changes this value
// from the peers it joined with to the member alone, and the member refuses an empty data
// directory from its next container start on, without a restart for it (specs.RequireData).
const AnnotationInitialCluster = "etcd-operator.cozystack.io/initial-cluster"

// AnnotationPodTemplateHash on a member's Pod fingerprints what the Pod was built from, so a
// spec change (resources, affinity, options, metadata, ...) shows as a mismatch with the Pod
// the spec would build now.
const AnnotationPodTemplateHash = "etcd-operator.cozystack.io/pod-template-hash"

// AnnotationRestoreHeldBy on an EtcdSnapshot says which cluster last held it with
// FinalizerRestoreSource, and when. Written on every hold, even one the finalizer already
// marks, so that each hold changes the EtcdSnapshot's resourceVersion: a release decided on
// an older read of it then fails instead of taking a hold it did not see.
const AnnotationRestoreHeldBy = "etcd-operator.cozystack.io/restore-held-by"

// AnnotationVerifiedSum on a verify Job is the checksum of the file it verifies, as the
// EtcdSnapshot recorded it (see LabelVerifyCluster).
const AnnotationVerifiedSum = "etcd-operator.cozystack.io/verify-checksum"

// AnnotationScheduledTime on a scheduled EtcdDefrag is the time it was due (RFC 3339).
const AnnotationScheduledTime = "etcd-operator.cozystack.io/scheduled-time"

// AnnotationImportedFrom on an EtcdSnapshot says that `kubectl etcd migrate aenix-backups`
// made it from another operator's record of a stored file, for example
// "EtcdBackup.etcd.aenix.io/nightly-1": the file was written by that operator, the
// EtcdSnapshot is created Complete with its location and checksum, and the operator never
// runs a snapshot Job for it (which would write over the file). On an EtcdSnapshotSchedule
// it names the legacy schedule it was made from, and changes nothing.
const AnnotationImportedFrom = "etcd-operator.cozystack.io/imported-from"

// SnapshotImported: the EtcdSnapshot records a file another operator wrote
// (AnnotationImportedFrom).
func SnapshotImported(s *EtcdSnapshot) bool { return s.Annotations[AnnotationImportedFrom] != "" }
