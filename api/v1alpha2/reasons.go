package v1alpha2

// The reasons the operator writes into conditions and events. Every one has a row in
// docs/reasons.md saying what it means and what to do (a test holds them together), and the
// code writes no reason but these constants. The values are a compatibility contract (alerts
// and scripts match on them): never change one. A value that serves several conditions or
// events has one constant, listed with its first group.

// Condition types of an EtcdCluster.
const (
	// ConditionAvailable is True while a quorum of members serves requests.
	ConditionAvailable = "Available"
	// ConditionProgressing is True while the operator changes the cluster towards its spec.
	ConditionProgressing = "Progressing"
	// ConditionDegraded is True while some member is unhealthy or missing.
	ConditionDegraded = "Degraded"
	// ConditionTLSReady is True while every certificate Secret that spec.tls needs exists
	// with valid keys; set only on clusters with spec.tls.
	ConditionTLSReady = "TLSReady"
	// ConditionAuthReady is True once authentication is enabled in etcd with the password of
	// spec.auth.rootCredentialsSecretRef; set only on clusters with spec.auth.enabled.
	ConditionAuthReady = "AuthReady"
	// ConditionAlarm is True while etcd has an alarm raised (reason NoSpace or Corrupt; the
	// message names the members); False with reason NoAlarm otherwise.
	ConditionAlarm = "Alarm"
	// ConditionVolumesResized is True while every member's PVC holds spec.storage.size;
	// False while they grow (Expanding, FileSystemResizePending) or when they cannot
	// (ExpansionNotAllowed, StorageClassNotFound). Set only on clusters with PVCs.
	ConditionVolumesResized = "VolumesResized"
	// ConditionDiscardedDataKept is True while PVCs hold data a quorum-loss recovery
	// discarded (annotation discarded-by-recovery): the message names them and when they go.
	// Absent when there are none.
	ConditionDiscardedDataKept = "DiscardedDataKept"
	// ConditionReconcileSuspended is True while the cluster has the annotation
	// etcd-operator.cozystack.io/suspend-reconcile: "true" and the operator leaves it alone
	// (reason ReconcileSuspended); absent otherwise.
	ConditionReconcileSuspended = "ReconcileSuspended"
	// ConditionOperatorConflict is True on a cluster that one operator refuses because another
	// operator, still alive and watching its namespace, claims it (AnnotationOperator); the
	// refusing operator writes it, the claimant keeps it until the refuser no longer watches
	// the namespace, then removes it. Absent otherwise.
	ConditionOperatorConflict = "OperatorConflict"
)

// Condition types of an EtcdMember.
const (
	// MemberConditionReady is True while the member's etcd answers its health check.
	MemberConditionReady = "Ready"
	// MemberConditionJoined is True once the member appears started in etcd's member list.
	MemberConditionJoined = "Joined"
)

// Condition types of an EtcdDefrag.
const (
	// DefragConditionComplete is True once every member has an outcome.
	DefragConditionComplete = "Complete"
	// DefragConditionWaiting is True while the pass waits before it can start (its reason
	// says on what); removed when the pass goes on.
	DefragConditionWaiting = "Waiting"
)

// Condition types of an EtcdSnapshot and an EtcdSnapshotSchedule.
const (
	// SnapshotConditionReady is True once the snapshot is stored and verified.
	SnapshotConditionReady = "Ready"
	// SnapshotScheduleConditionReady says whether the schedule runs (its reason: Scheduled,
	// Waiting, Suspended or InvalidSchedule).
	SnapshotScheduleConditionReady = "Ready"
)

// Condition types of an EtcdDefragPolicy.
const (
	// DefragPolicyConditionActive says whether the policy creates EtcdDefrags: True with
	// reason Scheduled, False with Suspended or InvalidSchedule (Cozystack's condition).
	DefragPolicyConditionActive = "Active"
)

// Reasons of EtcdCluster Available.
const (
	ReasonQuorumHealthy = "QuorumHealthy"
	ReasonPaused        = "Paused"
	ReasonBootstrapping = "Bootstrapping"
	ReasonUnreachable   = "Unreachable"
	// ReasonQuorumLost is Available's reason (and Progressing's) while fewer than a majority of
	// voters answer; the message says what each member still has.
	ReasonQuorumLost = "QuorumLost"
	// ReasonRestoreFailed is Available's reason while the bootstrap snapshot cannot be restored.
	ReasonRestoreFailed = "RestoreFailed"
)

// Reasons of EtcdCluster Progressing (the reason a step waits on, or what changes).
const (
	ReasonIdle    = "Idle"
	ReasonScaling = "Scaling"
	// ReasonChanging is Progressing's reason in the status written by the reconcile that made a
	// change, whose view predates it.
	ReasonChanging = "Changing"
	// ReasonStepFailed is Progressing's reason when a reconcile step failed (not merely waiting).
	ReasonStepFailed = "StepFailed"
	// ReasonProgressDeadlineExceeded is Progressing's reason once no change toward the spec was
	// possible for progressDeadlineSeconds.
	ReasonProgressDeadlineExceeded = "ProgressDeadlineExceeded"
	// ReasonAdoptionPending is Progressing's reason while a cluster has EtcdMembers that another
	// operator created and `kubectl etcd migrate` has not taken over yet.
	ReasonAdoptionPending = "AdoptionPending"
	ReasonRollingUpdate   = "RollingUpdate"
	// ReasonRollQueued: the cluster has members to restart for a changed Pod spec and waits
	// for one of the operator's roll slots (--max-concurrent-rolls).
	ReasonRollQueued = "RollQueued"
	// ReasonRollStuck: the cluster has members to restart for a changed Pod spec and waits for a
	// member whose Pod cannot start (unschedulable, an image that cannot be pulled, a crash
	// loop); it holds no roll slot meanwhile.
	ReasonRollStuck            = "RollStuck"
	ReasonPodSpecChangeBlocked = "PodSpecChangeBlocked"
	ReasonUpgrading            = "Upgrading"
	ReasonUpgradeBlocked       = "UpgradeBlocked"
	// ReasonDowngrading is Progressing's reason while spec.version goes down one minor through
	// etcd's downgrade: waiting to enable it, members restarting on the lower release one at a
	// time (followers first, the leader last), or a member's data migrating to it.
	ReasonDowngrading = "Downgrading"
	// ReasonDowngradeBlocked is Progressing's reason while the downgrade spec.version asks for
	// cannot be made: more than one minor, from 3.5, to a patch too old, or refused by etcd
	// (its message quoted).
	ReasonDowngradeBlocked = "DowngradeBlocked"
	// ReasonDowngradeFinishing is Progressing's reason once every member runs the lower minor
	// and etcd has not ended the downgrade yet (its leader does within seconds).
	ReasonDowngradeFinishing = "DowngradeFinishing"
	// ReasonMembershipUnsafe is Progressing's reason while a member is to be added, promoted or
	// replaced on an etcd patch whose learner promotion is known to be broken: the message
	// names the bug and the patch to move to. Everything else keeps working.
	ReasonMembershipUnsafe = "MembershipUnsafe"
	// ReasonReplacementRefused is Progressing's reason while a damaged member cannot be replaced
	// because the remaining voters would not keep a healthy quorum.
	ReasonReplacementRefused = "ReplacementRefused"
	ReasonQuorumRecovery     = "QuorumRecovery"
	ReasonRecoveryRefused    = "RecoveryRefused"
	// ReasonRetainedDataConflict: kept PVCs of this name come from more than one etcd cluster.
	ReasonRetainedDataConflict = "RetainedDataConflict"
	// ReasonRetainedDataBlocksRestore: a new cluster with spec.bootstrap.restore found PVCs kept
	// from an earlier cluster of its name; it neither adopts them nor restores over them.
	ReasonRetainedDataBlocksRestore = "RetainedDataBlocksRestore"
	// ReasonRetainedDataNewer: kept PVCs hold data an etcd newer than spec.version wrote.
	ReasonRetainedDataNewer = "RetainedDataNewer"
)

// Reasons of EtcdCluster Degraded.
const (
	ReasonAllMembersHealthy = "AllMembersHealthy"
	ReasonMembersUnhealthy  = "MembersUnhealthy"
	// ReasonNodeLost is Degraded's reason, and a Warning event's, while a member's data is pinned
	// to a Node that no longer exists; the message names the member, the node and when the member
	// will be replaced (or why it will not be).
	ReasonNodeLost = "NodeLost"
	// ReasonNameConflict: an object with the name the operator needs exists and is not
	// controlled by this cluster (or member). The operator never takes it over or overwrites
	// it: it may be another cluster's (clusters "db" and "db-client" would both need the
	// Service "db-client") or something a person made.
	ReasonNameConflict = "NameConflict"
	// ReasonObjectRefused: the API server refused to create or update a child object (an
	// admission webhook, a quota, a policy): its message is quoted.
	ReasonObjectRefused = "ObjectRefused"
)

// Reasons of EtcdCluster TLSReady (and Progressing while the cluster waits for them).
const (
	ReasonCertificatesReady   = "CertificatesReady"
	ReasonCertManagerMissing  = "CertManagerMissing"
	ReasonIssuerNotFound      = "IssuerNotFound"
	ReasonIssuerNotReady      = "IssuerNotReady"
	ReasonCertificateNotReady = "CertificateNotReady"
	ReasonCertificateConflict = "CertificateConflict"
	ReasonSecretMissing       = "SecretMissing"
	ReasonSecretKeyMissing    = "SecretKeyMissing"
	ReasonSecretInvalid       = "SecretInvalid"
)

// Reasons of EtcdCluster AuthReady.
const (
	ReasonAuthEnabled       = "AuthEnabled"
	ReasonWaitingForCluster = "WaitingForCluster"
	ReasonInvalidUsername   = "InvalidUsername"
	ReasonAuthFailed        = "AuthFailed"
)

// Reasons of EtcdCluster Alarm.
const (
	ReasonNoAlarm = "NoAlarm"
	ReasonNoSpace = "NoSpace"
	ReasonCorrupt = "Corrupt"
)

// Reasons of EtcdCluster VolumesResized.
const (
	ReasonVolumesAsRequested      = "AsRequested"
	ReasonVolumesExpanding        = "Expanding"
	ReasonFileSystemResizePending = "FileSystemResizePending"
	ReasonExpansionNotAllowed     = "ExpansionNotAllowed"
	ReasonStorageClassNotFound    = "StorageClassNotFound"
)

// Reasons of EtcdCluster DiscardedDataKept.
const (
	// ReasonKeptUntilDeleted: no keepDiscardedDataSeconds; a person deletes the PVCs.
	ReasonKeptUntilDeleted = "KeptUntilDeleted"
	// ReasonKeptUntilServed: keepDiscardedDataSeconds is set; the message says when each goes.
	ReasonKeptUntilServed = "KeptUntilServed"
)

// Reasons of EtcdCluster OperatorConflict, and events of the claim.
const (
	// ReasonClaimedByAnotherOperator: the cluster is another live operator's; this one does
	// nothing to it (the message names both and the fix).
	ReasonClaimedByAnotherOperator = "ClaimedByAnotherOperator"
	// ReasonClaimTakenOver is the Normal event of an operator that took a cluster over from
	// another whose Lease is gone or expired, or that does not watch the namespace any more.
	ReasonClaimTakenOver = "ClaimTakenOver"
	// ReasonOperatorConflictResolved is the Normal event of the claimant removing the
	// OperatorConflict condition: the operator that refused no longer watches the namespace.
	ReasonOperatorConflictResolved = "OperatorConflictResolved"
)

// Reasons of EtcdCluster ReconcileSuspended.
const (
	// ReasonReconcileSuspended: the cluster carries the suspend annotation; nothing is done to it.
	ReasonReconcileSuspended = "ReconcileSuspended"
)

// Reasons of EtcdMember Ready and Joined (Ready also passes the kubelet's own reasons through, such as CrashLoopBackOff).
const (
	ReasonServing             = "Serving"
	ReasonPodReady            = "PodReady"
	ReasonPodPending          = "PodPending"
	ReasonPodNotReady         = "PodNotReady"
	ReasonPodStarting         = "PodStarting"
	ReasonUnschedulable       = "Unschedulable"
	ReasonWaitingForMemberAdd = "WaitingForMemberAdd"
	// ReasonDataLost is a member's Ready reason when it has joined etcd and its data is gone: it
	// is not started again under its ID.
	ReasonDataLost = "DataLost"
	// ReasonImagePullFailed is a member's Ready reason while its etcd image cannot be pulled.
	ReasonImagePullFailed = "ImagePullFailed"
	// ReasonPodTerminal is a member's Ready reason while its Pod is in a terminal phase.
	ReasonPodTerminal = "PodTerminal"
)

// Reasons of EtcdSnapshot Ready: the snapshot controller's own.
const (
	ReasonClusterNotFound           = "ClusterNotFound"
	ReasonPVCNotFound               = "PVCNotFound"
	ReasonCredentialsSecretNotFound = "CredentialsSecretNotFound"
	ReasonServiceAccountNotFound    = "ServiceAccountNotFound"
	ReasonDeadlineExceeded          = "DeadlineExceeded"
	ReasonAgentFailed               = "AgentFailed"
	ReasonInProgress                = "InProgress"
	ReasonSucceeded                 = "Succeeded"
	ReasonImported                  = "Imported" // records a file another operator stored (AnnotationImportedFrom)
	ReasonDeleteFailed              = "DeleteFailed"
	// ReasonStoredFileKept: the snapshot went with deletionPolicy Delete, but the file at
	// its name was not its own (another snapshot's, or stored by something else) and stays.
	ReasonStoredFileKept = "StoredFileKept"
	// ReasonRestoreInProgress: the snapshot is being deleted, but a cluster may still
	// restore it (specs.SnapshotNeededBy); its file stays until none may.
	ReasonRestoreInProgress = "RestoreInProgress"
)

// Reasons of EtcdSnapshot Ready: written by the agent (a failed snapshot, restore or verify; each names what to fix).
const (
	ReasonBucketNotFound        = "BucketNotFound"
	ReasonCredentialsRejected   = "CredentialsRejected"
	ReasonEndpointUnreachable   = "EndpointUnreachable"
	ReasonCertificateNotTrusted = "CertificateNotTrusted"
	ReasonPVCFull               = "PVCFull"
	ReasonSnapshotNotFound      = "SnapshotNotFound"
	ReasonSnapshotCorrupt       = "SnapshotCorrupt"
	ReasonSnapshotFileExists    = "SnapshotFileExists"
	ReasonStorageError          = "StorageError"
	ReasonClusterNotAvailable   = "ClusterNotAvailable"
	ReasonInvalidArguments      = "InvalidArguments"

	// ReasonCredentialsUnavailable: no credentials Secret is named and the default chain
	// gave no credentials (web identity refused, no container endpoint, no instance role).
	ReasonCredentialsUnavailable = "CredentialsUnavailable"
)

// Reasons of EtcdSnapshotSchedule Ready.
const (
	ReasonInvalidSchedule = "InvalidSchedule"
	ReasonSuspended       = "Suspended"
	ReasonWaiting         = "Waiting"
	ReasonScheduled       = "Scheduled"
)

// Reasons of EtcdDefrag Waiting and Complete.
const (
	ReasonAnotherPassRunning = "AnotherPassRunning"
	ReasonNoRunningMember    = "NoRunningMember"
	ReasonEtcdUnreachable    = "EtcdUnreachable"
	ReasonMemberFailed       = "MemberFailed"
	ReasonComplete           = "Complete"
)

// Reasons of EtcdDefrag: a member's outcome.
const (
	ReasonRuleMatched      = "RuleMatched"
	ReasonBelowThreshold   = "BelowThreshold"
	ReasonMemberUnhealthy  = "MemberUnhealthy"
	ReasonWouldLoseQuorum  = "WouldLoseQuorum"
	ReasonDefragmentFailed = "DefragmentFailed"
)

// Event reasons (Normal and Warning events about the objects the operator manages) that no
// condition uses.
const (
	ReasonAdoptedRetainedPVCs   = "AdoptedRetainedPVCs"
	ReasonAlarmCleared          = "AlarmCleared"
	ReasonAlarmRaised           = "AlarmRaised"
	ReasonAutomaticRecovery     = "AutomaticRecovery"
	ReasonCertificateCreated    = "CertificateCreated"
	ReasonCompleted             = "Completed"
	ReasonDataDeleted           = "DataDeleted"
	ReasonDeadMemberRemoved     = "DeadMemberRemoved"
	ReasonDefragScheduled       = "DefragScheduled"
	ReasonDefragStarted         = "DefragStarted"
	ReasonDiscardedDataKept     = "DiscardedDataKept"
	ReasonDiscardedDataReleased = "DiscardedDataReleased"
	ReasonExpired               = "Expired"
	ReasonForcingNewCluster     = "ForcingNewCluster"
	ReasonGrowingVolume         = "GrowingVolume"
	ReasonInvalidDefragSchedule = "InvalidDefragSchedule"
	ReasonLeaderMoved           = "LeaderMoved"
	ReasonMemberAdded           = "MemberAdded"
	ReasonMemberDeletedByHand   = "MemberDeletedByHand"
	ReasonMemberPromoted        = "MemberPromoted"
	ReasonMemberRebuilt         = "MemberRebuilt"
	ReasonMemberRecreated       = "MemberRecreated"
	ReasonMemberRemoved         = "MemberRemoved"
	ReasonMemberReplacing       = "MemberReplacing"
	// ReasonMemberStopping: a voter's Pod is stopped before its removal, so its clients move on.
	ReasonMemberStopping        = "MemberStopping"
	ReasonNoSpaceDisarmed       = "NoSpaceDisarmed"
	ReasonNoSpaceRemediation    = "NoSpaceRemediation"
	ReasonOrphanLearnerRemoved  = "OrphanLearnerRemoved"
	ReasonPVCCreated            = "PVCCreated"
	ReasonPVCExpanding          = "PVCExpanding"
	ReasonPVCsRetained          = "PVCsRetained"
	ReasonPodAdopted            = "PodAdopted"
	ReasonPodCreated            = "PodCreated"
	ReasonPodReplaced           = "PodReplaced"
	ReasonQuorumRecovered       = "QuorumRecovered"
	ReasonReconcileResumed      = "ReconcileResumed"
	ReasonRecoveryKeepsData     = "RecoveryKeepsData"
	ReasonRecoveryNotNeeded     = "RecoveryNotNeeded"
	ReasonRecoveryRemovesMember = "RecoveryRemovesMember"
	ReasonRecoveryStopsMember   = "RecoveryStopsMember"
	ReasonRemoveFailed          = "RemoveFailed"
	ReasonRemoveRefused         = "RemoveRefused"
	// ReasonRemovedMemberAlarmDisarmed is the event of disarmStaleAlarms.
	ReasonRemovedMemberAlarmDisarmed = "RemovedMemberAlarmDisarmed"
	ReasonRestartingWithoutForce     = "RestartingWithoutForce"
	ReasonRestoringSnapshot          = "RestoringSnapshot"
	ReasonResuming                   = "Resuming"
	ReasonRollingMember              = "RollingMember"
	ReasonRootPasswordChanged        = "RootPasswordChanged"
	ReasonScalingIn                  = "ScalingIn"
	ReasonScalingOut                 = "ScalingOut"
	ReasonStarted                    = "Started"
	// ReasonTerminalPodReplaced is the event of a member whose terminal Pod was deleted so that
	// the member starts again.
	ReasonTerminalPodReplaced = "TerminalPodReplaced"
	// ReasonUnmanagedUsersOrRoles is the Warning event naming users and roles the operator did not make.
	ReasonUnmanagedUsersOrRoles = "UnmanagedUsersOrRoles"
	ReasonUpgradingMember       = "UpgradingMember"
	// ReasonDowngradeEnabled is the event of a downgrade enabled in etcd, the first act of a
	// spec.version one minor lower.
	ReasonDowngradeEnabled = "DowngradeEnabled"
	// ReasonDowngradingMember is the event of a member moved to the lower release.
	ReasonDowngradingMember = "DowngradingMember"
	// ReasonDowngradeCancelled is the event of an enabled downgrade cancelled because
	// spec.version no longer names its minor.
	ReasonDowngradeCancelled = "DowngradeCancelled"
	// ReasonDowngraded is the event of a downgrade etcd reports done: every member runs the
	// lower minor and the downgrade is no longer enabled.
	ReasonDowngraded        = "Downgraded"
	ReasonVerifyingSnapshot = "VerifyingSnapshot"
)

// Event reasons of an EtcdDefragPolicy: a due time skipped. Its condition Active uses
// ReasonScheduled, ReasonSuspended and ReasonInvalidSchedule; the EtcdDefrag it creates is
// announced with ReasonDefragScheduled.
const (
	// ReasonMissedSchedule: the due time was found later than spec.startingDeadlineSeconds;
	// skipped, not started late.
	ReasonMissedSchedule = "MissedSchedule"
	// ReasonConcurrencyForbidden: with concurrencyPolicy Forbid, the due time was skipped
	// because an EtcdDefrag of the policy has not finished.
	ReasonConcurrencyForbidden = "ConcurrencyForbidden"
)

// The CARotation condition of an EtcdCluster, set once an issuer of spec.tls changed on a
// running cluster: True while a rotation is under way (reason the stage reached), False with
// CARotated once it is done. The stages, in order (docs/tls.md, "Rotating a CA"):
const (
	// ConditionCARotation says how far the rotation of the cluster's CAs got.
	ConditionCARotation = "CARotation"
	// ReasonTrustingBoth: the new issuers' CAs are learned (a probe Certificate from each) and
	// written with the old ones into <cluster>-ca-bundle; members restart one at a time to
	// trust both. The Certificates still name the old issuers.
	ReasonTrustingBoth = "TrustingBoth"
	// ReasonReissuingOnNewCA: every member trusts both CAs; the Certificates name the new
	// issuers and cert-manager re-issues them. etcd reads the new certificates at the next
	// handshake: no restart.
	ReasonReissuingOnNewCA = "ReissuingOnNewCA"
	// ReasonOperatorClientMoved: every member serves certificates of the new CAs and the
	// operator's client presents its new certificate.
	ReasonOperatorClientMoved = "OperatorClientMoved"
	// ReasonDroppingOldCA: the bundle holds the new CAs alone; members restart one at a time
	// to stop trusting the old ones.
	ReasonDroppingOldCA = "DroppingOldCA"
	// ReasonReloadingCAs: the ca.crt of the cluster's own certificate Secrets changed (a new
	// CA put in beside the old, or the old one taken out); members restart one at a time to
	// load it.
	ReasonReloadingCAs = "ReloadingCAs"
	// ReasonCARotated: the rotation is done (the condition is False: nothing under way).
	ReasonCARotated = "CARotated"
)

// RecoveryKeyPrefix begins the loss statement of a recovery from member source, which
// Progressing's message carries once the operator took the request up (kubectl etcd recover waits for it).
func RecoveryKeyPrefix(source string) string {
	return "recovering from member " + source + " at revision "
}

// SnapshotRecoveryKeyPrefix begins the loss statement of a recovery from EtcdSnapshot name,
// which Progressing's message carries once the operator took the request up (kubectl etcd recover
// waits for it).
func SnapshotRecoveryKeyPrefix(name string) string {
	return "restoring EtcdSnapshot " + name + " at revision "
}

// Point-in-time recovery: the schedule's Archived condition and the reasons of a restore to a
// revision or a time (Available's, through the restore agent's result).
const (
	// SnapshotScheduleConditionArchived says whether the schedule's archive (spec.archive)
	// is continuous: True (Archiving) while every change since the window's start is stored.
	SnapshotScheduleConditionArchived = "Archived"
	// ReasonArchiving: the archiver stores every change; status.archive has the window.
	ReasonArchiving = "Archiving"
	// ReasonArchiveStarting: the archiver has not reported yet, or no full snapshot is at or
	// after the start of its newest unbroken run: nothing can be restored to a point yet.
	ReasonArchiveStarting = "ArchiveStarting"
	// ReasonArchiveGap: etcd compacted revisions before the archiver stored them (it was
	// stopped, or the store was unreachable too long); a full snapshot is taken at once to
	// start a new window, and the time before it cannot be restored to across the gap.
	ReasonArchiveGap = "ArchiveGap"
	// ReasonArchiveStoreFailing: the archiver cannot write to the store; it retries, and etcd
	// keeps the history it still needs until a compaction passes it (then ArchiveGap).
	ReasonArchiveStoreFailing = "ArchiveStoreFailing"
	// ReasonArchiveBehindTarget: a restore's target is after what the archive holds.
	ReasonArchiveBehindTarget = "ArchiveBehindTarget"
	// ReasonArchiveReplayFailed: replaying the archive onto the snapshot failed (a segment
	// unreadable or corrupt, or it did not land at its own revision).
	ReasonArchiveReplayFailed = "ArchiveReplayFailed"
)
