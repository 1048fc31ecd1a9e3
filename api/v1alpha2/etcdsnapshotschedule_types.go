package v1alpha2

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EtcdSnapshotScheduleSpec takes EtcdSnapshots of one cluster on a cron schedule and keeps a
// bounded number of them.
type EtcdSnapshotScheduleSpec struct {
	// ClusterRef names the EtcdCluster in the same namespace.
	// +kubebuilder:validation:XValidation:rule="size(self.name) > 0",message="spec.clusterRef.name must name the EtcdCluster to snapshot"
	ClusterRef corev1.LocalObjectReference `json:"clusterRef"`

	// Schedule is a standard 5-field cron expression (minute hour day-of-month month
	// day-of-week), for example "0 3 * * *" for every day at 03:00.
	// +kubebuilder:validation:MinLength=9
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:XValidation:rule="self.split(' ').filter(f, f != '').size() == 5",message="spec.schedule must be a 5-field cron expression (minute hour day-of-month month day-of-week), for example \"0 3 * * *\""
	Schedule string `json:"schedule"`

	// TimeZone is the IANA time zone the schedule is read in, for example Europe/Berlin.
	// Default UTC.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	TimeZone string `json:"timeZone,omitempty"`

	// Destination is where every snapshot goes: an S3 key prefix or a PVC directory; each
	// snapshot is stored as <prefix>/<namespace>/<cluster>/<snapshot name>.db on S3,
	// <directory>/<snapshot name>.db on a PVC.
	// +kubebuilder:validation:XValidation:rule="!has(self.s3) || !has(self.s3.key) || !self.s3.key.endsWith('.db')",message="spec.destination.s3.key of a schedule is a key prefix: every snapshot gets its own key <prefix>/<namespace>/<cluster>/<snapshot name>.db; a key ending in .db would be overwritten"
	Destination SnapshotLocation `json:"destination"`

	// Retention says which complete snapshots to keep; failed ones are deleted with the next
	// complete one.
	// +optional
	Retention SnapshotRetention `json:"retention,omitempty"`

	// Suspend stops new runs; the snapshots already taken stay.
	// +optional
	Suspend bool `json:"suspend,omitempty"`

	// DeletionPolicy of the EtcdSnapshots the schedule creates. Delete (the default here)
	// removes the stored file of an expired snapshot with it.
	// +kubebuilder:default=Delete
	// +optional
	DeletionPolicy SnapshotDeletionPolicy `json:"deletionPolicy,omitempty"`

	// Resources of the snapshot agent of every EtcdSnapshot the schedule creates (their
	// spec.resources).
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`
}

// SnapshotRetention bounds the complete snapshots a schedule keeps. Without either field every
// snapshot is kept.
type SnapshotRetention struct {
	// KeepLast keeps the newest N complete snapshots.
	// +kubebuilder:validation:Minimum=1
	// +optional
	KeepLast *int32 `json:"keepLast,omitempty"`

	// MaxAge deletes complete snapshots older than this (a duration such as 168h); the newest
	// complete snapshot is always kept.
	// +optional
	MaxAge *metav1.Duration `json:"maxAge,omitempty"`
}

// EtcdSnapshotScheduleStatus is what the schedule did last and will do next.
type EtcdSnapshotScheduleStatus struct {
	// LastScheduleTime is the scheduled time of the last run started.
	// +optional
	LastScheduleTime *metav1.Time `json:"lastScheduleTime,omitempty"`
	// NextScheduleTime is the next run, unless suspended.
	// +optional
	NextScheduleTime *metav1.Time `json:"nextScheduleTime,omitempty"`
	// LastSuccessfulSnapshot names the newest Complete EtcdSnapshot.
	// +optional
	LastSuccessfulSnapshot string `json:"lastSuccessfulSnapshot,omitempty"`
	// LastSuccessfulTime is when that snapshot completed.
	// +optional
	LastSuccessfulTime *metav1.Time `json:"lastSuccessfulTime,omitempty"`
	// LastFailure names the newest Failed EtcdSnapshot and its reason, newer than the last
	// success; empty once a later snapshot succeeded.
	// +optional
	LastFailure *SnapshotFailure `json:"lastFailure,omitempty"`
	// Active names the EtcdSnapshot running now.
	// +optional
	Active string `json:"active,omitempty"`
	// Conditions: Ready.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// SnapshotFailure is a failed snapshot and why.
type SnapshotFailure struct {
	// Snapshot is the EtcdSnapshot's name.
	Snapshot string `json:"snapshot"`
	// Reason is its Ready condition's reason.
	Reason string `json:"reason"`
	// Message is its Ready condition's message.
	// +optional
	Message string `json:"message,omitempty"`
	// Time is when it failed.
	// +optional
	Time *metav1.Time `json:"time,omitempty"`
}

// EtcdSnapshotSchedule takes EtcdSnapshots of a cluster on a cron schedule with retention.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=etcdsnapsched,categories=etcd-operator
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.clusterRef.name`
// +kubebuilder:printcolumn:name="Schedule",type=string,JSONPath=`.spec.schedule`
// +kubebuilder:printcolumn:name="Suspend",type=boolean,JSONPath=`.spec.suspend`
// +kubebuilder:printcolumn:name="Last",type=date,JSONPath=`.status.lastScheduleTime`
// +kubebuilder:printcolumn:name="Next",type=date,JSONPath=`.status.nextScheduleTime`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type EtcdSnapshotSchedule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec   EtcdSnapshotScheduleSpec   `json:"spec"`
	Status EtcdSnapshotScheduleStatus `json:"status,omitempty"`
}

// EtcdSnapshotScheduleList is a list of EtcdSnapshotSchedule.
//
// +kubebuilder:object:root=true
type EtcdSnapshotScheduleList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EtcdSnapshotSchedule `json:"items"`
}

func init() {
	SchemeBuilder.Register(&EtcdSnapshotSchedule{}, &EtcdSnapshotScheduleList{})
}
