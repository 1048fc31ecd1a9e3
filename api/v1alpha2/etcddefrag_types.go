package v1alpha2

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EtcdDefragSpec asks for one defragmentation pass over a cluster's members, one member at a
// time, the leader last. The shape is Cozystack's, so their documented manifests apply.
//
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec of an EtcdDefrag is immutable: create a new EtcdDefrag for another pass"
type EtcdDefragSpec struct {
	// ClusterRef names the EtcdCluster in the same namespace.
	// +kubebuilder:validation:XValidation:rule="size(self.name) > 0",message="spec.clusterRef.name must name the EtcdCluster to defragment"
	ClusterRef corev1.LocalObjectReference `json:"clusterRef"`

	// Rule selects the members worth defragmenting. Absent is the empty rule: members with
	// more than 200Mi to reclaim. rule.all defragments every member.
	// +optional
	Rule *DefragRule `json:"rule,omitempty"`

	// TTLSecondsAfterFinished deletes the EtcdDefrag this long after it completed or failed;
	// absent keeps it.
	// +kubebuilder:validation:Minimum=0
	// +optional
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`
}

// DefragRule decides, from a member's database sizes, whether defragmenting it is worth a
// pause of that member. Reclaimable space is dbSize - dbSizeInUse: the most a defragmentation
// can give back.
//
// +kubebuilder:validation:XValidation:rule="!(has(self.all) && self.all) || (!has(self.freeSpaceAbove) && !has(self.quotaUsageAbove) && !has(self.minReclaim))",message="rule.all defragments every member and cannot be combined with freeSpaceAbove, quotaUsageAbove or minReclaim; remove those or remove all"
// +kubebuilder:validation:XValidation:rule="!has(self.freeSpaceAbove) || quantity(string(self.freeSpaceAbove)).isGreaterThan(quantity('0'))",message="rule.freeSpaceAbove must be greater than 0, for example 200Mi"
// +kubebuilder:validation:XValidation:rule="!has(self.minReclaim) || quantity(string(self.minReclaim)).isGreaterThan(quantity('0'))",message="rule.minReclaim must be greater than 0, for example 32Mi"
// +kubebuilder:validation:XValidation:rule="!has(self.minReclaim) || has(self.quotaUsageAbove)",message="rule.minReclaim applies only with rule.quotaUsageAbove; add quotaUsageAbove (for example \"80%\") or remove minReclaim"
// +kubebuilder:validation:XValidation:rule="!(has(self.minReclaim) && has(self.freeSpaceAbove)) || quantity(string(self.minReclaim)).compareTo(quantity(string(self.freeSpaceAbove))) <= 0",message="rule.minReclaim must not be larger than rule.freeSpaceAbove: under quota pressure the floor can only go down"
type DefragRule struct {
	// All defragments every member whatever its sizes.
	// +optional
	All bool `json:"all,omitempty"`

	// FreeSpaceAbove selects a member with more reclaimable space than this; default 200Mi.
	// +optional
	FreeSpaceAbove *resource.Quantity `json:"freeSpaceAbove,omitempty"`

	// QuotaUsageAbove, a percent such as "80%": a member whose database file is above this
	// share of its backend quota is selected with as little as minReclaim to reclaim.
	// +kubebuilder:validation:Pattern=`^([1-9][0-9]?|100)%$`
	// +optional
	QuotaUsageAbove string `json:"quotaUsageAbove,omitempty"`

	// MinReclaim is the least reclaimable space that selects a member over quotaUsageAbove;
	// default 32Mi.
	// +optional
	MinReclaim *resource.Quantity `json:"minReclaim,omitempty"`
}

// EtcdDefragPhase is where an EtcdDefrag is in its life.
type EtcdDefragPhase string

const (
	// EtcdDefragPhasePending: accepted; waiting for its turn (one pass per cluster at a time).
	EtcdDefragPhasePending EtcdDefragPhase = "Pending"
	// EtcdDefragPhaseRunning: members are being looked at one at a time.
	EtcdDefragPhaseRunning EtcdDefragPhase = "Running"
	// EtcdDefragPhaseComplete: every member has an outcome, none failed.
	EtcdDefragPhaseComplete EtcdDefragPhase = "Complete"
	// EtcdDefragPhaseFailed: a member's defragmentation failed, or the cluster is gone.
	EtcdDefragPhaseFailed EtcdDefragPhase = "Failed"
)

// DefragOutcome is what the pass did to one member.
type DefragOutcome string

const (
	// DefragOutcomePending: not looked at yet.
	DefragOutcomePending DefragOutcome = "Pending"
	// DefragOutcomeSkipped: not defragmented; the reason says why.
	DefragOutcomeSkipped DefragOutcome = "Skipped"
	// DefragOutcomeDefragmented: defragmented.
	DefragOutcomeDefragmented DefragOutcome = "Defragmented"
	// DefragOutcomeFailed: etcd's defragment call failed.
	DefragOutcomeFailed DefragOutcome = "Failed"
)

// DefragMemberRole is a member's raft role when it was looked at.
type DefragMemberRole string

const (
	// DefragRoleLeader: the member led the cluster.
	DefragRoleLeader DefragMemberRole = "leader"
	// DefragRoleFollower: the member followed (a voter or a learner).
	DefragRoleFollower DefragMemberRole = "follower"
)

// EtcdDefragStatus is the progress and result of the pass.
type EtcdDefragStatus struct {
	// Phase is Pending, Running, Complete or Failed.
	// +optional
	Phase EtcdDefragPhase `json:"phase,omitempty"`

	// StartedAt is when the pass began.
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`

	// CompletedAt is when the pass completed or failed.
	// +optional
	CompletedAt *metav1.Time `json:"completedAt,omitempty"`

	// Defragmented counts the members defragmented.
	// +optional
	Defragmented int32 `json:"defragmented,omitempty"`

	// Members lists each member's outcome.
	// +optional
	// +listType=map
	// +listMapKey=name
	Members []MemberDefragStatus `json:"members,omitempty"`

	// Conditions: Complete, with a reason, and why a pass waits.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// MemberDefragStatus is what the pass did to one member.
type MemberDefragStatus struct {
	// Name of the EtcdMember.
	Name string `json:"name"`

	// Role is leader or follower when the member was looked at.
	// +optional
	Role DefragMemberRole `json:"role,omitempty"`

	// Outcome is Pending, Skipped, Defragmented or Failed.
	// +optional
	Outcome DefragOutcome `json:"outcome,omitempty"`

	// Reason qualifies the outcome: BelowThreshold, MemberUnhealthy, WouldLoseQuorum,
	// DefragmentFailed, RuleMatched.
	// +optional
	Reason string `json:"reason,omitempty"`

	// Message says the same for a person, with the figures.
	// +optional
	Message string `json:"message,omitempty"`

	// DBSizeBefore is the database file size in bytes before.
	// +optional
	DBSizeBefore int64 `json:"dbSizeBefore,omitempty"`

	// DBSizeAfter is the database file size in bytes after.
	// +optional
	DBSizeAfter int64 `json:"dbSizeAfter,omitempty"`

	// ReclaimedBytes is dbSizeBefore - dbSizeAfter.
	// +optional
	ReclaimedBytes int64 `json:"reclaimedBytes,omitempty"`

	// FinishedAt is when the member got its outcome.
	// +optional
	FinishedAt *metav1.Time `json:"finishedAt,omitempty"`
}

// EtcdDefrag is one defragmentation pass over an EtcdCluster's members; it never runs twice.
// spec.defrag on the EtcdCluster creates them on a schedule.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=etcddefrag,categories=etcd-operator
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.clusterRef.name`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Defragmented",type=integer,JSONPath=`.status.defragmented`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type EtcdDefrag struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec   EtcdDefragSpec   `json:"spec"`
	Status EtcdDefragStatus `json:"status,omitempty"`
}

// EtcdDefragList is a list of EtcdDefrag.
//
// +kubebuilder:object:root=true
type EtcdDefragList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EtcdDefrag `json:"items"`
}

func init() {
	SchemeBuilder.Register(&EtcdDefrag{}, &EtcdDefragList{})
}
