package v1alpha2

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EtcdDefragSpec asks for one defragmentation pass over a cluster's members, one member at a
// time. Without thresholds every member is defragmented; with thresholds, only a member that
// meets at least one of them.
//
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec of an EtcdDefrag is immutable: create a new EtcdDefrag for another pass"
type EtcdDefragSpec struct {
	// ClusterRef names the EtcdCluster in the same namespace.
	// +kubebuilder:validation:XValidation:rule="size(self.name) > 0",message="spec.clusterRef.name must name the EtcdCluster to defragment"
	ClusterRef corev1.LocalObjectReference `json:"clusterRef"`

	// Thresholds select the members worth defragmenting; absent means all members.
	// +optional
	Thresholds *DefragThresholds `json:"thresholds,omitempty"`
}

// DefragThresholds select members by how much space defragmentation would give back, or by
// how close they are to their quota. A member meeting any one of them is defragmented.
//
// +kubebuilder:validation:XValidation:rule="has(self.freeSpacePercent) || has(self.freeSpaceBytes) || has(self.quotaUsagePercent)",message="spec.thresholds needs at least one of freeSpacePercent, freeSpaceBytes or quotaUsagePercent; remove spec.thresholds to defragment every member"
type DefragThresholds struct {
	// FreeSpacePercent selects a member whose database file is at least this percent unused
	// space (dbSize - dbSizeInUse over dbSize).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=99
	// +optional
	FreeSpacePercent *int32 `json:"freeSpacePercent,omitempty"`

	// FreeSpaceBytes selects a member whose database file has at least this much unused space.
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).isGreaterThan(quantity('0'))",message="spec.thresholds.freeSpaceBytes must be greater than 0, for example 100Mi"
	// +optional
	FreeSpaceBytes *resource.Quantity `json:"freeSpaceBytes,omitempty"`

	// QuotaUsagePercent selects a member whose database file uses at least this percent of
	// its backend quota.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	QuotaUsagePercent *int32 `json:"quotaUsagePercent,omitempty"`
}

// DefragPhase is where an EtcdDefrag is in its life.
// +kubebuilder:validation:Enum=Pending;Running;Complete;Failed
type DefragPhase string

const (
	// DefragPending: accepted, not started yet.
	DefragPending DefragPhase = "Pending"
	// DefragRunning: members are being defragmented one at a time.
	DefragRunning DefragPhase = "Running"
	// DefragComplete: every selected member was defragmented.
	DefragComplete DefragPhase = "Complete"
	// DefragFailed: gave up; see the members' messages.
	DefragFailed DefragPhase = "Failed"
)

// DefragMemberResult is what one pass did to one member.
type DefragMemberResult struct {
	// Name of the EtcdMember.
	Name string `json:"name"`
	// Selected is true when the member met the thresholds.
	Selected bool `json:"selected"`
	// Done is true once the member was defragmented.
	// +optional
	Done bool `json:"done,omitempty"`
	// DBSizeBefore is the database file size in bytes before.
	// +optional
	DBSizeBefore int64 `json:"dbSizeBefore,omitempty"`
	// DBSizeAfter is the database file size in bytes after.
	// +optional
	DBSizeAfter int64 `json:"dbSizeAfter,omitempty"`
	// Message explains a skip or a failure.
	// +optional
	Message string `json:"message,omitempty"`
}

// EtcdDefragStatus is the progress and result of the pass.
type EtcdDefragStatus struct {
	// Phase is Pending, Running, Complete or Failed.
	// +optional
	Phase DefragPhase `json:"phase,omitempty"`
	// Members lists each member's result.
	// +optional
	// +listType=map
	// +listMapKey=name
	Members []DefragMemberResult `json:"members,omitempty"`
	// Conditions: Complete, with reasons.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// EtcdDefrag is one defragmentation pass over an EtcdCluster's members.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=etcddefrag,categories=etcd-operator
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.clusterRef.name`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
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
