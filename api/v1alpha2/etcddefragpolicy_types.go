package v1alpha2

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DefragConcurrencyPolicy says what a due time of an EtcdDefragPolicy does while an
// EtcdDefrag the policy created before has not finished.
// +kubebuilder:validation:Enum=Allow;Forbid
type DefragConcurrencyPolicy string

const (
	// DefragConcurrencyAllow creates the due EtcdDefrag anyway; it waits as Pending behind the
	// running one (one pass per cluster at a time).
	DefragConcurrencyAllow DefragConcurrencyPolicy = "Allow"
	// DefragConcurrencyForbid skips the due time (event ConcurrencyForbidden) while one of the
	// policy's EtcdDefrags has not finished. The default.
	DefragConcurrencyForbid DefragConcurrencyPolicy = "Forbid"
)

// EtcdDefragPolicySpec creates an EtcdDefrag of one cluster at each time of a cron schedule.
// The shape is Cozystack's (v0.5.5), so their documented manifests apply.
type EtcdDefragPolicySpec struct {
	// ClusterRef names the EtcdCluster in the same namespace.
	// +kubebuilder:validation:XValidation:rule="size(self.name) > 0",message="spec.clusterRef.name must name the EtcdCluster to defragment"
	ClusterRef corev1.LocalObjectReference `json:"clusterRef"`

	// Schedule is a 5-field cron expression (minute hour day-of-month month day-of-week) read
	// in UTC, for example "0 3 * * *" for 03:00 every day; also @daily, @hourly, @every 6h. A
	// prefix CRON_TZ=<IANA zone> reads it in that zone.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:XValidation:rule="self.trim().startsWith('@') || self.split(' ').filter(f, f != '' && !f.startsWith('CRON_TZ=') && !f.startsWith('TZ=')).size() == 5",message="spec.schedule must be a 5-field cron expression (minute hour day-of-month month day-of-week), for example \"0 3 * * *\", or @daily, @hourly, @every 6h"
	Schedule string `json:"schedule"`

	// Suspend stops new EtcdDefrags; those already created go on. The times that pass while
	// suspended are skipped: clearing it waits for the next time.
	// +optional
	Suspend *bool `json:"suspend,omitempty"`

	// ConcurrencyPolicy is Forbid (the default: a due time is skipped while an EtcdDefrag of
	// the policy has not finished) or Allow (it is created and waits its turn).
	// +kubebuilder:default=Forbid
	// +optional
	ConcurrencyPolicy DefragConcurrencyPolicy `json:"concurrencyPolicy,omitempty"`

	// StartingDeadlineSeconds: a due time found more than this late (the operator was down)
	// is skipped with a MissedSchedule event, not started late. Absent: no deadline.
	// +kubebuilder:validation:Minimum=0
	// +optional
	StartingDeadlineSeconds *int64 `json:"startingDeadlineSeconds,omitempty"`

	// HistoryLimit is how many finished (Complete or Failed) EtcdDefrags of the policy are
	// kept; older ones are deleted. Absent: all are kept (until their
	// ttlSecondsAfterFinished).
	// +kubebuilder:validation:Minimum=0
	// +optional
	HistoryLimit *int32 `json:"historyLimit,omitempty"`

	// Rule is the rule of every EtcdDefrag the policy creates: the members worth
	// defragmenting. Absent is the empty rule: members with more than 200Mi to reclaim.
	// +optional
	Rule *DefragRule `json:"rule,omitempty"`

	// TTLSecondsAfterFinished is that of every EtcdDefrag the policy creates: it is deleted
	// this long after it finished. Absent keeps it (within historyLimit).
	// +kubebuilder:validation:Minimum=0
	// +optional
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`
}

// EtcdDefragPolicyStatus is what the policy did last.
type EtcdDefragPolicyStatus struct {
	// LastScheduleTime is the last due time the policy acted on: created its EtcdDefrag, or
	// skipped it (missed deadline, Forbid, suspended). The next run is the first time after it.
	// +optional
	LastScheduleTime *metav1.Time `json:"lastScheduleTime,omitempty"`

	// LastSuccessfulTime is when an EtcdDefrag of the policy last completed.
	// +optional
	LastSuccessfulTime *metav1.Time `json:"lastSuccessfulTime,omitempty"`

	// Active names the EtcdDefrags of the policy that have not finished.
	// +optional
	// +listType=atomic
	Active []corev1.LocalObjectReference `json:"active,omitempty"`

	// Conditions: Active (reason Scheduled, Suspended or InvalidSchedule).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// EtcdDefragPolicy creates EtcdDefrags of a cluster on a cron schedule (Cozystack's kind).
// spec.defrag on the EtcdCluster does the same inside the cluster's own spec.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=etcddefragpol,categories=etcd-operator
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.clusterRef.name`
// +kubebuilder:printcolumn:name="Schedule",type=string,JSONPath=`.spec.schedule`
// +kubebuilder:printcolumn:name="Suspend",type=boolean,JSONPath=`.spec.suspend`
// +kubebuilder:printcolumn:name="Last Schedule",type=date,JSONPath=`.status.lastScheduleTime`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type EtcdDefragPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec   EtcdDefragPolicySpec   `json:"spec"`
	Status EtcdDefragPolicyStatus `json:"status,omitempty"`
}

// EtcdDefragPolicyList is a list of EtcdDefragPolicy.
//
// +kubebuilder:object:root=true
type EtcdDefragPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EtcdDefragPolicy `json:"items"`
}

func init() {
	SchemeBuilder.Register(&EtcdDefragPolicy{}, &EtcdDefragPolicyList{})
}
