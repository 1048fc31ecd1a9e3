package v1alpha2

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// EtcdClusterSpec is the desired state of an etcd cluster.
//
// Rules that couple several fields, or compare with the stored object, live here: a
// transition rule on a pointer field does not fire when the field is added, and we want to
// reject that direction too.
//
// +kubebuilder:validation:XValidation:rule="!(self.replicas == 0 && self.storage.medium == 'Memory')",message="spec.replicas: 0 pauses the cluster, which would discard the data of spec.storage.medium Memory (tmpfs); delete the cluster instead, or use medium \"\" (PVC) to be able to pause"
// +kubebuilder:validation:XValidation:rule="!has(self.auth) || !has(self.auth.enabled) || !self.auth.enabled || (has(self.tls) && has(self.tls.client))",message="spec.auth.enabled requires spec.tls.client: the root password must not cross a plaintext connection; configure client TLS or disable auth"
// +kubebuilder:validation:XValidation:rule="!has(self.auth) || !has(self.auth.enabled) || !self.auth.enabled || has(self.auth.rootCredentialsSecretRef)",message="spec.auth.enabled requires spec.auth.rootCredentialsSecretRef: name a Secret holding the root user's password"
// +kubebuilder:validation:XValidation:rule="!has(self.bootstrap) || !has(self.bootstrap.restore) || self.storage.medium != 'Memory'",message="spec.bootstrap.restore needs persistent storage: with spec.storage.medium Memory a restarted member would restore the snapshot again and lose later writes; use medium \"\" (PVC)"
// +kubebuilder:validation:XValidation:rule="has(self.tls) == has(oldSelf.tls) && (!has(self.tls) || (has(self.tls.client) == has(oldSelf.tls.client) && (!has(self.tls.client) || (has(self.tls.client.certManager) && has(oldSelf.tls.client.certManager) && has(self.tls.client.certManager.operatorClientIssuerRef) == has(oldSelf.tls.client.certManager.operatorClientIssuerRef)) || self.tls.client == oldSelf.tls.client) && has(self.tls.peer) == has(oldSelf.tls.peer) && (!has(self.tls.peer) || (has(self.tls.peer.certManager) && has(oldSelf.tls.peer.certManager)) || self.tls.peer == oldSelf.tls.peer)))",message="spec.tls cannot be added, removed or changed on an existing cluster yet (only its validityDuration and renewBefore can, and the issuers of certManager, which rotates the CA): the operator cannot switch members' transport safely; create a new cluster with the TLS you want (restore it from a snapshot)"
// +kubebuilder:validation:XValidation:rule="has(self.auth) == has(oldSelf.auth) && (!has(self.auth) || self.auth == oldSelf.auth)",message="spec.auth cannot be added, removed or changed on an existing cluster yet; to change the password, edit the Secret that spec.auth.rootCredentialsSecretRef names"
// +kubebuilder:validation:XValidation:rule="has(self.bootstrap) == has(oldSelf.bootstrap) && (!has(self.bootstrap) || self.bootstrap == oldSelf.bootstrap)",message="spec.bootstrap is immutable: it is consulted once, at the first bootstrap; create a new cluster to restore another snapshot"
// +kubebuilder:validation:XValidation:rule="!has(self.quorumLoss) || !has(self.quorumLoss.policy) || self.quorumLoss.policy != 'RecoverFromMostAdvancedMember' || self.storage.medium != 'Memory'",message="spec.quorumLoss.policy RecoverFromMostAdvancedMember needs persistent storage: a tmpfs member loses its data when its Pod restarts with --force-new-cluster; use policy Manual, or medium \"\" (PVC)"
// +kubebuilder:validation:XValidation:rule="has(self.storage.storageClassName) == has(oldSelf.storage.storageClassName) && (!has(self.storage.storageClassName) || self.storage.storageClassName == oldSelf.storage.storageClassName)",message="spec.storage.storageClassName is immutable: a PVC's storage class cannot change; create a new cluster on the other class and restore it from a snapshot"
type EtcdClusterSpec struct {
	// Replicas is the number of members: 1, 3, 5 or 7 are the useful sizes. 0 pauses the
	// cluster: every Pod stops, every member keeps its data and identity. There is no upper
	// bound (etcd has none, and neither has Cozystack's API): more members cost write latency,
	// never data (docs/compatibility.md).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:default=3
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// Version is the etcd version, X.Y.Z with or without a leading "v" (3.6.16, v3.5.21), any
	// release from 3.5.0 on. Changing it upgrades the running members one at a time: to a
	// newer patch, or to the next minor. etcd upgrades to 3.6 only from 3.5.26 and to 3.7
	// only from 3.6.11 (refused with UpgradeBlocked otherwise); before 3.5.20 the operator
	// adds and promotes no member, since etcd's learner promotion is broken there
	// (MembershipUnsafe). It goes down to a version no member has run
	// (status.members[].version): setting back a release that never started (one with no
	// image, say); or by one minor through etcd's downgrade (3.6 to 3.5 from 3.6 on, 3.7 to
	// 3.6), to a patch the cluster can be upgraded from again (3.5.26, 3.6.11 or newer;
	// DowngradeBlocked otherwise). An older patch of what ran, or two minors at once, is refused.
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^v?[0-9]+[.][0-9]+[.][0-9]+$')",message="spec.version must be an etcd release X.Y.Z, with or without a leading 'v', for example 3.6.16 or v3.5.21"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^v?[0-9]+[.][0-9]+[.][0-9]+$') || (int(self.replace('v', '').split('.')[0]) == 3 && int(self.replace('v', '').split('.')[1]) >= 5)",message="spec.version must be etcd 3.5.0 or newer in the 3.x line, for example 3.5.21, 3.6.16 or 3.7.3: the operator does not run older releases; upgrade an older cluster to 3.5 before handing it to the operator"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^v?[0-9]+[.][0-9]+[.][0-9]+$') || !oldSelf.matches('^v?[0-9]+[.][0-9]+[.][0-9]+$') || int(self.replace('v', '').split('.')[1]) <= int(oldSelf.replace('v', '').split('.')[1]) + 1",messageExpression="'spec.version cannot jump from ' + oldSelf + ' to ' + self + ': etcd upgrades one minor version at a time; set the newest patch of the next minor first, wait until status.version shows it, then set ' + self"
	Version string `json:"version"`

	// Storage is each member's data directory. The floor of its size is the cluster's, not the
	// EtcdMember's: members of a cluster created before it keep being made at the size they have.
	// +kubebuilder:default={size: "1Gi", medium: ""}
	// +kubebuilder:validation:XValidation:rule="!has(self.size) || !quantity(string(self.size)).isGreaterThan(quantity('0')) || quantity(string(self.size)).compareTo(quantity('256Mi')) >= 0",message="spec.storage.size must be at least 256Mi: etcd writes its log in 61 MiB segments and prepares the next one ahead, beside the database, so a smaller PVC or tmpfs fills and etcd stops with 'no space left on device'; for example 1Gi"
	// +optional
	Storage StorageSpec `json:"storage,omitempty"`

	// ProgressDeadlineSeconds is how long one change (a member added, promoted, removed) may
	// take before the cluster reports Progressing=False with reason ProgressDeadlineExceeded.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:default=600
	// +optional
	ProgressDeadlineSeconds *int32 `json:"progressDeadlineSeconds,omitempty"`

	// TLS for the client (2379) and peer (2380) ports; absent means plaintext.
	// +optional
	TLS *EtcdClusterTLS `json:"tls,omitempty"`

	// Auth turns on etcd authentication with the single user root.
	// +optional
	Auth *AuthSpec `json:"auth,omitempty"`

	// Bootstrap is consulted once, at the first bootstrap of the cluster.
	// +optional
	Bootstrap *BootstrapSpec `json:"bootstrap,omitempty"`

	// Resources of the etcd container. Default: requests of 100m CPU and 256Mi memory.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`

	// AdditionalMetadata is merged into every object the operator creates for this cluster;
	// the operator's own keys win over these, and keys under etcd-operator.cozystack.io/ are
	// ignored.
	// +optional
	AdditionalMetadata *AdditionalMetadata `json:"additionalMetadata,omitempty"`

	// Affinity of the member Pods.
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`

	// TopologySpreadConstraints of the member Pods. The operator fills an empty labelSelector
	// with the cluster's member selector.
	// +kubebuilder:validation:MaxItems=8
	// +optional
	TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`

	// Options is the typed set of etcd settings the operator passes as flags.
	// +optional
	Options *EtcdOptions `json:"options,omitempty"`

	// Defrag defragments the members on a schedule: at each time the schedule names, the
	// operator creates an EtcdDefrag with this rule.
	// +optional
	Defrag *DefragSchedule `json:"defrag,omitempty"`

	// Alarms says what the operator does about etcd's alarms.
	// +optional
	Alarms *AlarmPolicy `json:"alarms,omitempty"`

	// ImagePullSecrets of the member Pods.
	// +kubebuilder:validation:MaxItems=16
	// +optional
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`

	// Tolerations of the member Pods, e.g. to run etcd on tainted control-plane or dedicated
	// nodes. A change rolls the members one at a time.
	// +kubebuilder:validation:MaxItems=32
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// NodeSelector of the member Pods: they run only on nodes with all these labels. A change
	// rolls the members one at a time.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// PriorityClassName of the member Pods: a high priority keeps etcd from being preempted by
	// less important Pods. A change rolls the members one at a time.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	PriorityClassName string `json:"priorityClassName,omitempty"`

	// PersistentVolumeClaimRetentionPolicy says what happens to the members' PVCs when the
	// EtcdCluster is deleted. Default: whenDeleted Retain, so that a mistaken delete keeps the
	// data; an EtcdCluster created again with the same name adopts the kept PVCs.
	// +kubebuilder:default={whenDeleted: Retain}
	// +optional
	PersistentVolumeClaimRetentionPolicy *PVCRetentionPolicy `json:"persistentVolumeClaimRetentionPolicy,omitempty"`

	// NetworkPolicy, when enabled, makes the operator keep a NetworkPolicy over the member
	// Pods: peers (2380) only from members of this cluster, clients (2379) only from Pods that
	// clientSelector selects (and the operator), metrics (2381) from anywhere.
	// +optional
	NetworkPolicy *NetworkPolicySpec `json:"networkPolicy,omitempty"`

	// QuorumLoss says what the operator does when the cluster loses its quorum. Absent (or
	// policy Manual): nothing until a person asks for a recovery (docs/day-two.md).
	// +optional
	QuorumLoss *QuorumLossPolicy `json:"quorumLoss,omitempty"`

	// NodeLoss says what the operator does about a member whose data lived on a node that is
	// gone for good: its PVC's PersistentVolume is pinned to a Node (a local volume) that no
	// longer exists. Absent: policy ReplaceMember after 600 seconds.
	// +optional
	NodeLoss *NodeLossPolicy `json:"nodeLoss,omitempty"`
}

// NodeLossAction is what the operator does about a member whose node is gone for good.
// +kubebuilder:validation:Enum=ReplaceMember;Manual
type NodeLossAction string

const (
	// NodeLossReplaceMember replaces the member once its node has been gone for the grace
	// period: it is removed from etcd (only while the other voters keep a healthy quorum)
	// and a new member, with a new name, ID and PVC, joins as a learner (the default).
	NodeLossReplaceMember NodeLossAction = "ReplaceMember"
	// NodeLossManual only reports the member (Degraded, reason NodeLost); a person replaces
	// it with the replace annotation.
	NodeLossManual NodeLossAction = "Manual"
)

// NodeLossPolicy is what the operator does about a member whose node is gone for good.
//
// +kubebuilder:validation:XValidation:rule="!has(self.gracePeriodSeconds) || !has(self.policy) || self.policy == 'ReplaceMember'",message="spec.nodeLoss.gracePeriodSeconds applies only to policy ReplaceMember: remove it, or set spec.nodeLoss.policy to ReplaceMember"
type NodeLossPolicy struct {
	// Policy is ReplaceMember (the default: the member is replaced once its node has been
	// gone for gracePeriodSeconds) or Manual (the member is only reported).
	// +kubebuilder:default=ReplaceMember
	// +optional
	Policy NodeLossAction `json:"policy,omitempty"`

	// GracePeriodSeconds is how long the member's node must have been seen gone before the
	// member is replaced, counted from when the operator first saw it gone: long enough for
	// a Node deleted by mistake to register again with its disk. Default 600.
	// +kubebuilder:validation:Minimum=10
	// +kubebuilder:validation:Maximum=86400
	// +optional
	GracePeriodSeconds *int32 `json:"gracePeriodSeconds,omitempty"`
}

// QuorumLossAction is what the operator does about a lost quorum.
// +kubebuilder:validation:Enum=Manual;RecoverFromMostAdvancedMember
type QuorumLossAction string

const (
	// QuorumLossManual waits for a person's recovery request (the default).
	QuorumLossManual QuorumLossAction = "Manual"
	// QuorumLossRecoverFromMostAdvancedMember, once the quorum has been lost for the grace
	// period, asks for the recovery from the most advanced member that answers, exactly as
	// a person does with the recover-from annotation.
	QuorumLossRecoverFromMostAdvancedMember QuorumLossAction = "RecoverFromMostAdvancedMember"
)

// QuorumLossPolicy is what the operator does when the cluster loses its quorum.
//
// +kubebuilder:validation:XValidation:rule="!has(self.gracePeriodSeconds) || (has(self.policy) && self.policy == 'RecoverFromMostAdvancedMember')",message="spec.quorumLoss.gracePeriodSeconds applies only to policy RecoverFromMostAdvancedMember: remove it, or set spec.quorumLoss.policy to RecoverFromMostAdvancedMember"
type QuorumLossPolicy struct {
	// Policy is Manual (the default: a person asks for a recovery) or
	// RecoverFromMostAdvancedMember: once the quorum has been lost for gracePeriodSeconds,
	// the operator rebuilds the cluster from the member that answers with the most applied
	// writes. Writes the lost members had and it has not are lost; members that would have
	// come back with them (a node that returns late) are discarded.
	// +kubebuilder:default=Manual
	// +optional
	Policy QuorumLossAction `json:"policy,omitempty"`

	// GracePeriodSeconds is how long the quorum must have been lost (Available False) before
	// the automatic recovery starts: long enough for members on a rebooting node to come
	// back with their data. Default 300.
	// +kubebuilder:validation:Minimum=10
	// +kubebuilder:validation:Maximum=86400
	// +optional
	GracePeriodSeconds *int32 `json:"gracePeriodSeconds,omitempty"`

	// KeepDiscardedDataSeconds is how long the data of the members a quorum-loss recovery
	// discards (from a member or from an EtcdSnapshot, asked by a person or by the policy) is
	// kept once the recovered cluster serves: each such PVC, annotated
	// etcd-operator.cozystack.io/discarded-by-recovery, is deleted by the operator once
	// Available has been True without a break for this long, counted from the time it was
	// kept at the earliest. Absent: kept until a person deletes it (kubectl delete pvc). The
	// condition DiscardedDataKept names the kept PVCs and when they go.
	// +kubebuilder:validation:Minimum=10
	// +optional
	KeepDiscardedDataSeconds *int32 `json:"keepDiscardedDataSeconds,omitempty"`
}

// PVCRetentionAction is what becomes of the members' PVCs.
// +kubebuilder:validation:Enum=Retain;Delete
type PVCRetentionAction string

const (
	// PVCRetain keeps the PVCs (and the data) when the cluster is deleted.
	PVCRetain PVCRetentionAction = "Retain"
	// PVCDelete deletes the PVCs with the cluster.
	PVCDelete PVCRetentionAction = "Delete"
)

// PVCRetentionPolicy is named and shaped after a StatefulSet's
// persistentVolumeClaimRetentionPolicy. Scale-in always deletes the removed member's PVC: the
// member has left etcd, its data can never serve again.
type PVCRetentionPolicy struct {
	// WhenDeleted is Retain (default: the PVCs outlive the EtcdCluster and a new EtcdCluster
	// of the same name in the same namespace adopts them, with their data and member IDs) or
	// Delete (the PVCs go with the EtcdCluster).
	// +kubebuilder:default=Retain
	// +optional
	WhenDeleted PVCRetentionAction `json:"whenDeleted,omitempty"`
}

// NetworkPolicySpec is the optional NetworkPolicy over the member Pods.
type NetworkPolicySpec struct {
	// Enabled creates the NetworkPolicy <cluster>; false (or absent) removes it.
	// +optional
	Enabled bool `json:"enabled,omitempty"`

	// ClientSelector selects the Pods (in the cluster's namespace) that may reach the client
	// port 2379. Empty selects none; the operator reaches every port regardless.
	// +optional
	ClientSelector *metav1.LabelSelector `json:"clientSelector,omitempty"`

	// ClientNamespaceSelector, if set, lets Pods matching clientSelector in the namespaces it
	// selects reach 2379 too (instead of the cluster's namespace only).
	// +optional
	ClientNamespaceSelector *metav1.LabelSelector `json:"clientNamespaceSelector,omitempty"`
}

// DefragSchedule is a periodic defragmentation of a cluster.
type DefragSchedule struct {
	// Schedule in cron format (minute hour day-of-month month day-of-week, UTC), for
	// example "0 3 * * *" for 03:00 every day; also @daily, @hourly, @every 6h.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	Schedule string `json:"schedule"`

	// Rule selects the members worth defragmenting, as in an EtcdDefrag; absent is the
	// default gate (more than 200Mi to reclaim).
	// +optional
	Rule *DefragRule `json:"rule,omitempty"`

	// KeepFinished is how many finished scheduled EtcdDefrags are kept; older ones are
	// deleted. Default 3.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	KeepFinished *int32 `json:"keepFinished,omitempty"`
}

// AlarmPolicy says what the operator does about etcd's alarms. A CORRUPT alarm is never
// disarmed by the operator.
type AlarmPolicy struct {
	// NoSpace is Remediate (the default: compact to the current revision, defragment every
	// member, disarm the alarm) or Report (only the condition and an event).
	// +kubebuilder:validation:Enum=Remediate;Report
	// +kubebuilder:default=Remediate
	// +optional
	NoSpace NoSpacePolicy `json:"noSpace,omitempty"`
}

// NoSpacePolicy is what the operator does about a NOSPACE alarm.
type NoSpacePolicy string

const (
	// NoSpaceRemediate compacts, defragments and disarms.
	NoSpaceRemediate NoSpacePolicy = "Remediate"
	// NoSpaceReport only reports.
	NoSpaceReport NoSpacePolicy = "Report"
)

// StorageMedium selects the backend of a member's data directory.
// +kubebuilder:validation:Enum="";Memory
type StorageMedium string

const (
	// StorageMediumDefault keeps each member's data on its own PersistentVolumeClaim.
	StorageMediumDefault StorageMedium = ""
	// StorageMediumMemory keeps each member's data on a tmpfs that dies with its Pod.
	StorageMediumMemory StorageMedium = "Memory"
)

// StorageSpec is each member's data directory.
type StorageSpec struct {
	// Size of each member's volume (PVC request, or tmpfs size limit with medium Memory).
	// It may grow on a running cluster: each member's PVC is expanded when its StorageClass
	// allows volume expansion (the VolumesResized condition says when it does not); tmpfs
	// members are restarted one at a time with the new limit. It never shrinks.
	// +kubebuilder:default="1Gi"
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).isGreaterThan(quantity('0'))",message="spec.storage.size must be greater than 0: it is each member's PVC size, or its tmpfs size limit with medium Memory; for example 1Gi"
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).compareTo(quantity(string(oldSelf))) >= 0",message="spec.storage.size cannot shrink: a volume cannot give back space; keep the size or make it larger"
	// +optional
	Size *resource.Quantity `json:"size,omitempty"`

	// Medium is "" (a PVC per member, the default) or Memory (tmpfs; data is lost with the
	// Pod and the operator replaces the member). Immutable.
	// +kubebuilder:default=""
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.storage.medium is immutable: members cannot move between PVC and tmpfs; create a new cluster with the other medium"
	// +optional
	Medium StorageMedium `json:"medium,omitempty"`

	// StorageClassName of the member PVCs; absent means the default StorageClass. Immutable.
	// +optional
	StorageClassName *string `json:"storageClassName,omitempty"`
}

// EtcdClusterTLS configures TLS for each of etcd's two ports independently.
//
// +kubebuilder:validation:XValidation:rule="(!has(self.validityDuration) && !has(self.renewBefore)) || (has(self.client) && has(self.client.certManager)) || (has(self.peer) && has(self.peer.certManager))",message="spec.tls.validityDuration and spec.tls.renewBefore apply only to certificates cert-manager issues: set spec.tls.client.certManager or spec.tls.peer.certManager, or leave them out (your own Secrets' certificates last as long as you made them)"
// +kubebuilder:validation:XValidation:rule="!has(self.renewBefore) || !self.renewBefore.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$') || (has(self.validityDuration) && !self.validityDuration.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$')) || duration(self.renewBefore) < (has(self.validityDuration) ? duration(self.validityDuration) : duration('2160h'))",message="spec.tls.renewBefore must be shorter than spec.tls.validityDuration (2160h when unset): cert-manager refuses a certificate that is due for renewal as soon as it is issued"
type EtcdClusterTLS struct {
	// Client is TLS on the client port 2379.
	// +optional
	Client *ClientTLS `json:"client,omitempty"`

	// Peer is TLS on the peer port 2380; always mutual.
	// +optional
	Peer *PeerTLS `json:"peer,omitempty"`

	// ValidityDuration is how long each certificate cert-manager issues for the cluster
	// (server, peer, the operator's client certificate) is valid: a Go duration in hours,
	// minutes or seconds, such as 8760h for a year; at least 1h (cert-manager's minimum).
	// Absent means 2160h (90 days). The official etcd operator's
	// certManagerCfg.validityDuration. It may change on a running cluster: the Certificates
	// follow, no member restarts.
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$')",message="spec.tls.validityDuration must be a duration in hours, minutes or seconds, such as 8760h (a year) or 2160h (90 days); days are not a unit: write 365 days as 8760h"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$') || duration(self) >= duration('1h')",message="spec.tls.validityDuration must be at least 1h: cert-manager refuses shorter certificates"
	// +optional
	ValidityDuration string `json:"validityDuration,omitempty"`

	// RenewBefore is how long before a certificate expires cert-manager renews it: a Go
	// duration such as 720h; at least 5m (cert-manager's minimum) and shorter than
	// validityDuration. Absent means 720h (30 days), or a third of validityDuration when
	// that is shorter than 90 days (cert-manager's own default ratio).
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$')",message="spec.tls.renewBefore must be a duration in hours, minutes or seconds, such as 720h (30 days)"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$') || duration(self) >= duration('5m')",message="spec.tls.renewBefore must be at least 5m: cert-manager refuses to renew closer to expiry"
	// +optional
	RenewBefore string `json:"renewBefore,omitempty"`
}

// ClientTLS takes the server certificate from a Secret or from cert-manager. A client
// certificate for the operator (operatorClientSecretRef or certManager.operatorClientIssuerRef)
// turns on mutual TLS: etcd then requires a client certificate from everyone.
//
// +kubebuilder:validation:XValidation:rule="has(self.serverSecretRef) != has(self.certManager)",message="spec.tls.client needs exactly one source: serverSecretRef (your own Secret) or certManager (issued for you), not both and not neither"
// +kubebuilder:validation:XValidation:rule="!has(self.certManager) || !has(self.operatorClientSecretRef)",message="spec.tls.client.operatorClientSecretRef cannot be combined with certManager: use certManager.operatorClientIssuerRef instead"
type ClientTLS struct {
	// ServerSecretRef names a kubernetes.io/tls Secret with tls.crt, tls.key and ca.crt.
	// +optional
	ServerSecretRef *corev1.LocalObjectReference `json:"serverSecretRef,omitempty"`

	// OperatorClientSecretRef names a Secret with the operator's client certificate (tls.crt,
	// tls.key); setting it turns on mutual TLS.
	// +optional
	OperatorClientSecretRef *corev1.LocalObjectReference `json:"operatorClientSecretRef,omitempty"`

	// CertManager issues the certificates through cert-manager.
	// +optional
	CertManager *ClientCertManager `json:"certManager,omitempty"`
}

// ClientCertManager names the issuers of the client-side certificates.
type ClientCertManager struct {
	// ServerIssuerRef signs the server certificate, stored in Secret <cluster>-server-tls.
	ServerIssuerRef IssuerReference `json:"serverIssuerRef"`

	// OperatorClientIssuerRef signs the operator's client certificate, stored in Secret
	// <cluster>-operator-client-tls; setting it turns on mutual TLS. Its CA (the Secret's
	// ca.crt) is the one members trust for client certificates: give it an issuer of this
	// cluster's own, from which the applications get theirs too.
	// +optional
	OperatorClientIssuerRef *IssuerReference `json:"operatorClientIssuerRef,omitempty"`
}

// PeerTLS takes the peer certificate from a Secret or from cert-manager, or lets etcd make
// its own (autoTLS).
//
// +kubebuilder:validation:XValidation:rule="(has(self.secretRef) ? 1 : 0) + (has(self.certManager) ? 1 : 0) + ((has(self.autoTLS) && self.autoTLS) ? 1 : 0) == 1",message="spec.tls.peer needs exactly one source: secretRef (your own Secret), certManager (issued for you) or autoTLS: true, not several and not none"
type PeerTLS struct {
	// SecretRef names a kubernetes.io/tls Secret with tls.crt, tls.key and ca.crt; the
	// certificate must allow both server and client authentication.
	// +optional
	SecretRef *corev1.LocalObjectReference `json:"secretRef,omitempty"`

	// CertManager issues the peer certificate, stored in Secret <cluster>-peer-tls.
	// +optional
	CertManager *PeerCertManager `json:"certManager,omitempty"`

	// AutoTLS is etcd's --peer-auto-tls: each member encrypts the peer port with a
	// self-signed certificate and peers do not verify each other, so it protects against
	// eavesdropping only, not against an impostor. It is what clusters of the legacy
	// etcd.aenix.io operator run with, and adopting one keeps it (its members cannot speak
	// to peers that verify certificates); other clusters should use secretRef or certManager.
	// +optional
	AutoTLS bool `json:"autoTLS,omitempty"`
}

// PeerCertManager names the issuer of the peer certificate.
type PeerCertManager struct {
	// IssuerRef signs the peer certificate.
	IssuerRef IssuerReference `json:"issuerRef"`
}

// AuthSpec turns on etcd authentication with the single user root.
type AuthSpec struct {
	// Enabled creates user root with the root role and enables authentication once the
	// cluster is up. Requires spec.tls.client.
	// +optional
	Enabled bool `json:"enabled,omitempty"`

	// RootCredentialsSecretRef names a Secret in the same namespace whose key "password" is
	// root's password (a key "username", if present, must be "root").
	// +optional
	RootCredentialsSecretRef *corev1.LocalObjectReference `json:"rootCredentialsSecretRef,omitempty"`
}

// BootstrapSpec is consulted once, when the cluster is first created.
type BootstrapSpec struct {
	// Restore starts the new cluster from a snapshot instead of empty.
	// +optional
	Restore *RestoreSpec `json:"restore,omitempty"`
}

// RestoreSpec names the snapshot a new cluster starts from.
//
// +kubebuilder:validation:XValidation:rule="!has(self.source.s3) || (has(self.source.s3.key) && size(self.source.s3.key) > 0 && !self.source.s3.key.endsWith('/'))",message="spec.bootstrap.restore.source.s3.key must be the exact key of the snapshot object, not empty and not a prefix ending in '/'"
// +kubebuilder:validation:XValidation:rule="!has(self.source.pvc) || (has(self.source.pvc.subPath) && size(self.source.pvc.subPath) > 0 && !self.source.pvc.subPath.endsWith('/'))",message="spec.bootstrap.restore.source.pvc.subPath must be the exact path of the snapshot file in the volume, not empty and not a directory ending in '/'"
// +kubebuilder:validation:XValidation:rule="has(self.target) == has(self.source.scheduleRef)",message="spec.bootstrap.restore.target and spec.bootstrap.restore.source.scheduleRef go together: a restore to a revision or a time names the EtcdSnapshotSchedule whose snapshots and archive reach it"
type RestoreSpec struct {
	// Source is the snapshot to restore: an S3 object, a file on a PVC, or an EtcdSnapshot;
	// or, with a target, the EtcdSnapshotSchedule whose snapshots and archive reach it.
	Source RestoreSource `json:"source"`

	// Target restores to a revision or a time instead of a snapshot's own: the newest
	// Complete snapshot of source.scheduleRef at or before it, with the schedule's archive
	// replayed on it up to the target. Needs source.scheduleRef.
	// +optional
	Target *RestoreTarget `json:"target,omitempty"`
}

// RestoreTarget is the point a restore reaches: exactly one of revision or time.
//
// +kubebuilder:validation:XValidation:rule="has(self.revision) != has(self.time)",message="spec.bootstrap.restore.target needs exactly one of revision or time"
type RestoreTarget struct {
	// Revision restores every change up to and including this etcd revision.
	// +kubebuilder:validation:Minimum=1
	// +optional
	Revision *int64 `json:"revision,omitempty"`

	// Time restores every change the archiver received at or before this time (RFC 3339),
	// and none after it.
	// +optional
	Time *metav1.Time `json:"time,omitempty"`
}

// RestoreSource is where a restored cluster's snapshot comes from: exactly one of s3, pvc or
// snapshotRef.
//
// +kubebuilder:validation:XValidation:rule="(has(self.s3) ? 1 : 0) + (has(self.pvc) ? 1 : 0) + (has(self.snapshotRef) ? 1 : 0) + (has(self.scheduleRef) ? 1 : 0) == 1",message="spec.bootstrap.restore.source needs exactly one of s3, pvc, snapshotRef or scheduleRef: name an S3 object (s3.key), a file on a PersistentVolumeClaim (pvc.subPath), a Complete EtcdSnapshot in this namespace (snapshotRef.name) or, with a target, an EtcdSnapshotSchedule with spec.archive (scheduleRef.name), not several and not none"
type RestoreSource struct {
	// S3 is the snapshot object in an S3-compatible store; key is its exact key.
	// +optional
	S3 *S3SnapshotLocation `json:"s3,omitempty"`

	// PVC is the snapshot file on a PersistentVolumeClaim in the cluster's namespace; subPath
	// is its exact path.
	// +optional
	PVC *PVCSnapshotLocation `json:"pvc,omitempty"`

	// SnapshotRef names a Complete EtcdSnapshot in the cluster's namespace: its destination
	// (with its credentials) is read, and its file is checked against the checksum in its
	// status.artifact before it is restored.
	// +kubebuilder:validation:XValidation:rule="has(self.name) && size(self.name) > 0",message="spec.bootstrap.restore.source.snapshotRef.name must name an EtcdSnapshot in the cluster's namespace"
	// +optional
	SnapshotRef *corev1.LocalObjectReference `json:"snapshotRef,omitempty"`

	// ScheduleRef names an EtcdSnapshotSchedule with spec.archive in the cluster's namespace,
	// for a restore to a target (spec.bootstrap.restore.target): its newest Complete
	// EtcdSnapshot at or before the target is restored and its archive replayed up to the
	// target.
	// +kubebuilder:validation:XValidation:rule="has(self.name) && size(self.name) > 0",message="spec.bootstrap.restore.source.scheduleRef.name must name an EtcdSnapshotSchedule in the cluster's namespace"
	// +optional
	ScheduleRef *corev1.LocalObjectReference `json:"scheduleRef,omitempty"`
}

// Location is the source as a snapshot location (s3 or pvc); empty for a snapshotRef, whose
// location is its EtcdSnapshot's destination.
func (s RestoreSource) Location() SnapshotLocation {
	return SnapshotLocation{S3: s.S3, PVC: s.PVC}
}

// AdditionalMetadata is merged into every object the operator creates.
type AdditionalMetadata struct {
	// Labels to add.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// Annotations to add.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// AutoCompactionMode is etcd's --auto-compaction-mode.
// +kubebuilder:validation:Enum=periodic;revision
type AutoCompactionMode string

const (
	// AutoCompactionPeriodic keeps the history of the retention period.
	AutoCompactionPeriodic AutoCompactionMode = "periodic"
	// AutoCompactionRevision keeps the last retention revisions.
	AutoCompactionRevision AutoCompactionMode = "revision"
)

// EtcdOptions is the closed set of etcd settings the operator passes to every member. Flags
// the operator owns (names, URLs, data directory, TLS files) are not settable.
//
// +kubebuilder:validation:XValidation:rule="!has(self.autoCompactionMode) || self.autoCompactionMode != 'revision' || !has(self.autoCompactionRetention) || self.autoCompactionRetention.matches('^[0-9]+$')",message="spec.options.autoCompactionRetention must be a number of revisions, for example \"10000\", with autoCompactionMode revision"
// +kubebuilder:validation:XValidation:rule="(has(self.autoCompactionMode) && self.autoCompactionMode == 'revision') || !has(self.autoCompactionRetention) || self.autoCompactionRetention.matches('^([0-9]+([.][0-9]+)?(ms|s|m|h))+$|^[0-9]+$')",message="spec.options.autoCompactionRetention must be a duration such as \"24h\", \"1.5h\", \"30m\" or \"500ms\", or a number of hours, with autoCompactionMode periodic (etcd's default mode)"
type EtcdOptions struct {
	// QuotaBackendBytes is the backend size quota (--quota-backend-bytes), at most 8Gi is
	// etcd's advice; above it etcd raises the NOSPACE alarm. Absent: half of spec.storage.size
	// (512Mi with the default 1Gi volume), at most 8Gi, so that the alarm comes before a full
	// disk. 0 means etcd's own default (2Gi), as it does for etcd and in Cozystack's API; set it
	// at most about half the volume.
	// +optional
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).compareTo(quantity('0')) >= 0 && quantity(string(self)).compareTo(quantity('100Gi')) <= 0",message="spec.options.quotaBackendBytes must be between 0 (etcd's default, 2Gi) and 100Gi (etcd advises 8Gi at most), for example 2Gi"
	QuotaBackendBytes *resource.Quantity `json:"quotaBackendBytes,omitempty"`

	// AutoCompactionMode is periodic or revision (--auto-compaction-mode); etcd's default is
	// periodic.
	// +optional
	AutoCompactionMode AutoCompactionMode `json:"autoCompactionMode,omitempty"`

	// AutoCompactionRetention is a duration for periodic (for example 24h, 1.5h, 500ms; a bare
	// number is hours) or a revision count for revision (--auto-compaction-retention). "0"
	// turns auto-compaction off.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=32
	// +optional
	AutoCompactionRetention string `json:"autoCompactionRetention,omitempty"`

	// SnapshotCount is the number of applied entries between raft snapshots (--snapshot-count).
	// +kubebuilder:validation:Minimum=1
	// +optional
	SnapshotCount *int64 `json:"snapshotCount,omitempty"`
}

// MemberRole is a member's place in the raft group.
// +kubebuilder:validation:Enum=Voter;Learner
type MemberRole string

const (
	// RoleVoter is a full member that counts towards the quorum.
	RoleVoter MemberRole = "Voter"
	// RoleLearner receives the log but does not vote; it is promoted once caught up.
	RoleLearner MemberRole = "Learner"
)

// MemberSummary is one member as the cluster's status shows it.
type MemberSummary struct {
	// Name of the EtcdMember.
	Name string `json:"name"`
	// ID is the etcd member ID in hex.
	// +optional
	ID string `json:"id,omitempty"`
	// Role is Voter or Learner.
	// +optional
	Role MemberRole `json:"role,omitempty"`
	// Version is the etcd version the member reports.
	// +kubebuilder:validation:MaxLength=32
	// +optional
	Version string `json:"version,omitempty"`
	// Ready is true while the member answers its health check.
	// +optional
	Ready bool `json:"ready,omitempty"`
}

// EtcdClusterStatus is what the operator observed of the cluster.
type EtcdClusterStatus struct {
	// ObservedGeneration is the spec generation the status speaks of.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// ReadyMembers counts members that are healthy and serving; the /scale subresource
	// reports it as the current scale.
	// +optional
	ReadyMembers int32 `json:"readyMembers,omitempty"`

	// Voters counts voting members in etcd's member list.
	// +optional
	Voters int32 `json:"voters,omitempty"`

	// Learners counts learners in etcd's member list.
	// +optional
	Learners int32 `json:"learners,omitempty"`

	// Selector is the label selector of the member Pods, for the /scale subresource.
	// +optional
	Selector string `json:"selector,omitempty"`

	// ClusterID is the etcd cluster ID in hex, set once the cluster has bootstrapped.
	// +optional
	ClusterID string `json:"clusterID,omitempty"`

	// ClusterToken is the --initial-cluster-token used at bootstrap and for every later member.
	// +optional
	ClusterToken string `json:"clusterToken,omitempty"`

	// AuthEnabled is true once the operator has enabled authentication in etcd.
	// +optional
	AuthEnabled bool `json:"authEnabled,omitempty"`

	// Version is the lowest etcd version the members report running (from etcd, not from
	// the spec): the version of the cluster. During an upgrade it stays at the old version
	// until every member runs the new one.
	// +kubebuilder:validation:MaxLength=32
	// +optional
	Version string `json:"version,omitempty"`

	// LastProgressTime is when the operator last made a change toward the spec (or began to);
	// progressDeadlineSeconds counts from it.
	// +optional
	LastProgressTime *metav1.Time `json:"lastProgressTime,omitempty"`

	// QuorumLostSince is when the operator first found the quorum missing while it was
	// expected: not paused, and no member that could complete it still starting. It is
	// removed once the quorum answers, the cluster is paused or such a member starts;
	// spec.quorumLoss.gracePeriodSeconds counts from it.
	// +optional
	QuorumLostSince *metav1.Time `json:"quorumLostSince,omitempty"`

	// SnapshotRecovery is a quorum-loss recovery from an EtcdSnapshot under way: written
	// before its first destructive act, removed once the rebuilt cluster answers. It holds
	// everything the recovery still needs once the old members are gone.
	// +optional
	SnapshotRecovery *SnapshotRecoveryStatus `json:"snapshotRecovery,omitempty"`

	// CARotation is the rotation of the cluster's CAs under way, or the last one done: set
	// when an issuer of spec.tls changes on a running cluster (docs/tls.md, "Rotating a CA").
	// Each stage is recorded before it acts, so an operator restarted halfway resumes there.
	// +optional
	CARotation *CARotationStatus `json:"caRotation,omitempty"`

	// CertificatesNotAfter is when the first certificate of the cluster's TLS Secrets expires:
	// the earliest notAfter in status.certificates. Renew or replace that Secret before it;
	// the operator's metric etcd_operator_certificate_expiry_timestamp_seconds and the alert
	// EtcdCertificateExpiresSoon watch the same times (docs/observability.md).
	// +optional
	CertificatesNotAfter *metav1.Time `json:"certificatesNotAfter,omitempty"`

	// Certificates are the expiry times of the certificates in every TLS Secret the cluster
	// uses, cert-manager's or named in spec.tls: each Secret's tls.crt (its leaf, the first
	// certificate) and, when present, ca.crt (the earliest of its bundle), as the operator
	// last read them all. A Secret that is missing or unusable (TLSReady False) leaves the
	// list as it was.
	// +kubebuilder:validation:MaxItems=16
	// +optional
	// +listType=map
	// +listMapKey=secret
	// +listMapKey=key
	Certificates []CertificateExpiry `json:"certificates,omitempty"`

	// Members lists each member's ID, role, version and readiness. The bound, far above any
	// useful cluster size, only lets the apiserver price the rule on spec.version that reads
	// it.
	// +kubebuilder:validation:MaxItems=1000
	// +optional
	// +listType=map
	// +listMapKey=name
	Members []MemberSummary `json:"members,omitempty"`

	// Conditions: Available, Progressing and Degraded, with reasons.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// CozystackCompatibleStatus holds the status fields Cozystack's operator and its tooling
	// write. They are kept, not pruned, so that their patches apply; this operator neither
	// reads nor writes them (docs/compatibility.md).
	CozystackCompatibleStatus `json:",inline"`
}

// CertificateExpiry is when one certificate in one of the cluster's TLS Secrets expires.
type CertificateExpiry struct {
	// Secret is the Secret's name, in the cluster's namespace.
	// +kubebuilder:validation:MaxLength=253
	Secret string `json:"secret"`
	// Key is the Secret's key that holds the certificate: tls.crt or ca.crt.
	// +kubebuilder:validation:MaxLength=64
	Key string `json:"key"`
	// NotAfter is the certificate's notAfter: from then on it is refused.
	NotAfter metav1.Time `json:"notAfter"`
}

// CARotationStatus is how far a CA rotation got.
type CARotationStatus struct {
	// Stage is the stage reached, a reason of the CARotation condition: TrustingBoth,
	// ReissuingOnNewCA, OperatorClientMoved, DroppingOldCA, CARotated; ReloadingCAs for a
	// cluster with its own certificate Secrets.
	Stage string `json:"stage"`

	// From are the issuers the cluster's Certificates named when the rotation began; they go
	// on issuing until every member trusts both the old and the new CAs.
	// +optional
	From []CertificateIssuer `json:"from,omitempty"`

	// To are the issuers of spec.tls the rotation moves the Certificates to. A change of
	// spec.tls during a rotation starts the next one once this one is done.
	// +optional
	To []CertificateIssuer `json:"to,omitempty"`

	// BundleHash fingerprints the CAs of <cluster>-ca-bundle that members load, as last
	// written: a member created meanwhile starts with it.
	// +optional
	BundleHash string `json:"bundleHash,omitempty"`

	// SecretsHash fingerprints the ca.crt of the cluster's own certificate Secrets
	// (serverSecretRef, peer.secretRef) that members are to trust: a new value restarts them
	// one at a time (stage ReloadingCAs), as etcd reads its trusted CA files only at start.
	// +optional
	SecretsHash string `json:"secretsHash,omitempty"`

	// StartedAt is when the rotation began.
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`

	// PodIssuers are the issuers the members' Pods were built with before the first
	// rotation: issuers never reach a Pod (the Secret names stay), so the Pods' fingerprint
	// keeps them, and a rotation restarts members only for the CAs they trust. Copied from
	// one rotation to the next.
	// +optional
	PodIssuers []CertificateIssuer `json:"podIssuers,omitempty"`
}

// CertificateIssuer is the issuer of one of the cluster's cert-manager Certificates.
type CertificateIssuer struct {
	// Certificate is the Certificate's name (the Secret it fills has the same).
	Certificate string `json:"certificate"`
	// Issuer signs it.
	Issuer IssuerReference `json:"issuer"`
}

// SnapshotRecoveryStatus is a recovery from an EtcdSnapshot that the operator has begun.
type SnapshotRecoveryStatus struct {
	// Snapshot is the name of the EtcdSnapshot the cluster is rebuilt from.
	Snapshot string `json:"snapshot"`
	// Revision is the etcd revision the snapshot holds: writes after it are lost.
	// +optional
	Revision int64 `json:"revision,omitempty"`
	// Restore is the snapshot file and its recorded checksum; the rebuilt cluster's first
	// member restores it, checking the checksum.
	Restore MemberRestore `json:"restore"`
	// ReplacedClusterID is the etcd cluster ID (hex) whose members' data is discarded.
	ReplacedClusterID string `json:"replacedClusterID"`
	// Loss is what the recovery loses, as stated before anything was done.
	// +optional
	Loss string `json:"loss,omitempty"`
	// StartTime is when the operator began the recovery.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
}

// CozystackCompatibleStatus are status fields of Cozystack's v1alpha2 API that this operator
// keeps for compatibility and ignores: it has no locked-in target to abandon, and it reports
// broken members in status.members and the Degraded condition.
type CozystackCompatibleStatus struct {
	// Observed is Cozystack's locked-in target spec; kept as written, unused here.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	Observed *runtime.RawExtension `json:"observed,omitempty"`

	// ProgressDeadline is Cozystack's abort-the-current-target time; kept as written, unused
	// here: this operator acts on the newest spec at every step, so there is nothing to abort.
	// +optional
	ProgressDeadline *metav1.Time `json:"progressDeadline,omitempty"`

	// BrokenMembers is Cozystack's count of broken members; kept as written, unused here.
	// +optional
	BrokenMembers int32 `json:"brokenMembers,omitempty"`
}

// EtcdCluster is an etcd cluster the operator runs: members, their Pods and volumes, Services,
// a PodDisruptionBudget and, where configured, certificates.
//
// The name is checked at creation only (existing clusters keep working): it names the
// headless Service <name>, the client Service <name>-client (a DNS-1035 label of at most 63
// characters) and the members <name>-<n>, which are Pod host names.
//
// spec.version may go down only to a version no member has run, or by one whole minor: etcd's
// cluster version moves up once every member runs a newer release and comes back only through
// etcd's downgrade, one minor at a time, which the operator runs (the minor just below the
// newest a member ran, no member more than one minor above it). Until a member has run the
// new release nothing has moved, and setting it back (a release with no image, say) is safe. The rule reads the status, where the operator records what each member reports
// (status.members[].version, the last it said while it does not answer), so it lives on the
// object: a rule on spec.version alone cannot see status. A cluster with no status yet has
// run nothing.
//
// +kubebuilder:validation:XValidation:rule="!self.spec.version.matches('^v?[0-9]+[.][0-9]+[.][0-9]+$') || !oldSelf.spec.version.matches('^v?[0-9]+[.][0-9]+[.][0-9]+$') || (int(oldSelf.spec.version.substring(oldSelf.spec.version.indexOf('v') + 1).split('.')[0]) < int(self.spec.version.substring(self.spec.version.indexOf('v') + 1).split('.')[0]) || (int(oldSelf.spec.version.substring(oldSelf.spec.version.indexOf('v') + 1).split('.')[0]) == int(self.spec.version.substring(self.spec.version.indexOf('v') + 1).split('.')[0]) && (int(oldSelf.spec.version.substring(oldSelf.spec.version.indexOf('v') + 1).split('.')[1]) < int(self.spec.version.substring(self.spec.version.indexOf('v') + 1).split('.')[1]) || (int(oldSelf.spec.version.substring(oldSelf.spec.version.indexOf('v') + 1).split('.')[1]) == int(self.spec.version.substring(self.spec.version.indexOf('v') + 1).split('.')[1]) && int(oldSelf.spec.version.substring(oldSelf.spec.version.indexOf('v') + 1).split('.')[2]) <= int(self.spec.version.substring(self.spec.version.indexOf('v') + 1).split('.')[2]))))) || !has(self.status) || ((!has(self.status.version) || !self.status.version.matches('^[0-9]+[.][0-9]+[.][0-9]+$') || (int(self.status.version.split('.')[0]) < int(self.spec.version.substring(self.spec.version.indexOf('v') + 1).split('.')[0]) || (int(self.status.version.split('.')[0]) == int(self.spec.version.substring(self.spec.version.indexOf('v') + 1).split('.')[0]) && (int(self.status.version.split('.')[1]) < int(self.spec.version.substring(self.spec.version.indexOf('v') + 1).split('.')[1]) || (int(self.status.version.split('.')[1]) == int(self.spec.version.substring(self.spec.version.indexOf('v') + 1).split('.')[1]) && int(self.status.version.split('.')[2]) <= int(self.spec.version.substring(self.spec.version.indexOf('v') + 1).split('.')[2])))))) && (!has(self.status.members) || self.status.members.all(m, !has(m.version) || !m.version.matches('^[0-9]+[.][0-9]+[.][0-9]+$') || (int(m.version.split('.')[0]) < int(self.spec.version.substring(self.spec.version.indexOf('v') + 1).split('.')[0]) || (int(m.version.split('.')[0]) == int(self.spec.version.substring(self.spec.version.indexOf('v') + 1).split('.')[0]) && (int(m.version.split('.')[1]) < int(self.spec.version.substring(self.spec.version.indexOf('v') + 1).split('.')[1]) || (int(m.version.split('.')[1]) == int(self.spec.version.substring(self.spec.version.indexOf('v') + 1).split('.')[1]) && int(m.version.split('.')[2]) <= int(self.spec.version.substring(self.spec.version.indexOf('v') + 1).split('.')[2])))))))) || (has(self.status.members) && self.status.members.exists(m, has(m.version) && m.version.matches('^[0-9]+[.][0-9]+[.][0-9]+$') && int(m.version.split('.')[0]) == int(self.spec.version.substring(self.spec.version.indexOf('v') + 1).split('.')[0]) && int(m.version.split('.')[1]) == int(self.spec.version.substring(self.spec.version.indexOf('v') + 1).split('.')[1]) + 1) && self.status.members.all(m, !has(m.version) || !m.version.matches('^[0-9]+[.][0-9]+[.][0-9]+$') || (int(m.version.split('.')[0]) == int(self.spec.version.substring(self.spec.version.indexOf('v') + 1).split('.')[0]) && int(m.version.split('.')[1]) <= int(self.spec.version.substring(self.spec.version.indexOf('v') + 1).split('.')[1]) + 1)) && (!has(self.status.version) || !self.status.version.matches('^[0-9]+[.][0-9]+[.][0-9]+$') || (int(self.status.version.split('.')[0]) == int(self.spec.version.substring(self.spec.version.indexOf('v') + 1).split('.')[0]) && int(self.status.version.split('.')[1]) <= int(self.spec.version.substring(self.spec.version.indexOf('v') + 1).split('.')[1]) + 1))) || (has(self.status.members) && self.status.members.exists(m, has(m.version) && m.version.matches('^[0-9]+[.][0-9]+[.][0-9]+$') && (int(m.version.split('.')[0]) > int(self.spec.version.substring(self.spec.version.indexOf('v') + 1).split('.')[0]) || (int(m.version.split('.')[0]) == int(self.spec.version.substring(self.spec.version.indexOf('v') + 1).split('.')[0]) && int(m.version.split('.')[1]) > int(self.spec.version.substring(self.spec.version.indexOf('v') + 1).split('.')[1]) + 1))))",messageExpression="'spec.version cannot go down from ' + oldSelf.spec.version + ' to ' + self.spec.version + ': a member has run a newer version (status.members[].version), and etcd goes down a whole minor (3.6 to 3.5, 3.7 to 3.6), not to an older patch of what ran; set the newest version a member has run or a newer one, or create a new cluster at ' + self.spec.version + ' and restore it from a snapshot'"
// +kubebuilder:validation:XValidation:rule="!self.spec.version.matches('^v?[0-9]+[.][0-9]+[.][0-9]+$') || !oldSelf.spec.version.matches('^v?[0-9]+[.][0-9]+[.][0-9]+$') || (int(oldSelf.spec.version.substring(oldSelf.spec.version.indexOf('v') + 1).split('.')[0]) < int(self.spec.version.substring(self.spec.version.indexOf('v') + 1).split('.')[0]) || (int(oldSelf.spec.version.substring(oldSelf.spec.version.indexOf('v') + 1).split('.')[0]) == int(self.spec.version.substring(self.spec.version.indexOf('v') + 1).split('.')[0]) && (int(oldSelf.spec.version.substring(oldSelf.spec.version.indexOf('v') + 1).split('.')[1]) < int(self.spec.version.substring(self.spec.version.indexOf('v') + 1).split('.')[1]) || (int(oldSelf.spec.version.substring(oldSelf.spec.version.indexOf('v') + 1).split('.')[1]) == int(self.spec.version.substring(self.spec.version.indexOf('v') + 1).split('.')[1]) && int(oldSelf.spec.version.substring(oldSelf.spec.version.indexOf('v') + 1).split('.')[2]) <= int(self.spec.version.substring(self.spec.version.indexOf('v') + 1).split('.')[2]))))) || !has(self.status) || !(has(self.status.members) && self.status.members.exists(m, has(m.version) && m.version.matches('^[0-9]+[.][0-9]+[.][0-9]+$') && (int(m.version.split('.')[0]) > int(self.spec.version.substring(self.spec.version.indexOf('v') + 1).split('.')[0]) || (int(m.version.split('.')[0]) == int(self.spec.version.substring(self.spec.version.indexOf('v') + 1).split('.')[0]) && int(m.version.split('.')[1]) > int(self.spec.version.substring(self.spec.version.indexOf('v') + 1).split('.')[1]) + 1))))",messageExpression="'spec.version cannot go down from ' + oldSelf.spec.version + ' to ' + self.spec.version + ' at once: a member has run a release more than one minor above it (status.members[].version), and etcd downgrades one minor at a time; set a patch of the minor just below the one that runs, wait until status.version shows it, then set ' + self.spec.version"
// +kubebuilder:validation:XValidation:rule="oldSelf.hasValue() || (self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$') && size(self.metadata.name) <= 56)",optionalOldSelf=true,message="metadata.name must be a DNS label of at most 56 characters that starts with a letter (a-z, 0-9 and '-'): it names the Services <name> and <name>-client and the member Pods <name>-<n>; for example orders-etcd"
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=etcd,categories=etcd-operator
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.readyMembers,selectorpath=.status.selector
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.spec.replicas`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyMembers`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.spec.version`
// +kubebuilder:printcolumn:name="Available",type=string,JSONPath=`.status.conditions[?(@.type=="Available")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Available")].reason`,priority=1
// +kubebuilder:printcolumn:name="Cluster-ID",type=string,JSONPath=`.status.clusterID`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type EtcdCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec   EtcdClusterSpec   `json:"spec"`
	Status EtcdClusterStatus `json:"status,omitempty"`
}

// EtcdClusterList is a list of EtcdCluster.
//
// +kubebuilder:object:root=true
type EtcdClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EtcdCluster `json:"items"`
}

func init() {
	SchemeBuilder.Register(&EtcdCluster{}, &EtcdClusterList{})
}
