package v1alpha2

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EtcdSnapshotSpec asks for one snapshot of a cluster. What is snapshotted and where it goes
// are immutable: to write elsewhere, create another EtcdSnapshot. Only deletionPolicy may
// change.
//
// +kubebuilder:validation:XValidation:rule="self.clusterRef == oldSelf.clusterRef && self.destination == oldSelf.destination",message="spec.clusterRef and spec.destination of an EtcdSnapshot are immutable: create a new EtcdSnapshot for another cluster or destination"
type EtcdSnapshotSpec struct {
	// ClusterRef names the EtcdCluster in the same namespace.
	// +kubebuilder:validation:XValidation:rule="size(self.name) > 0",message="spec.clusterRef.name must name the EtcdCluster to snapshot"
	ClusterRef corev1.LocalObjectReference `json:"clusterRef"`

	// Destination is exactly one of s3 or pvc.
	Destination SnapshotLocation `json:"destination"`

	// DeletionPolicy says what deleting the EtcdSnapshot does to the stored file: Retain (the
	// default) keeps it, Delete removes it too.
	// +kubebuilder:default=Retain
	// +optional
	DeletionPolicy SnapshotDeletionPolicy `json:"deletionPolicy,omitempty"`

	// ActiveDeadlineSeconds bounds the whole snapshot (taking, uploading, verifying); past it
	// the snapshot fails with reason DeadlineExceeded. Default 1800.
	// +kubebuilder:validation:Minimum=30
	// +kubebuilder:validation:Maximum=86400
	// +optional
	ActiveDeadlineSeconds *int64 `json:"activeDeadlineSeconds,omitempty"`

	// Resources of the agent container of the snapshot's Jobs, as a whole (not merged with
	// the default). Default: requests of 50m CPU and 64Mi memory and a memory limit of 256Mi;
	// the agent streams through fixed buffers and stays near 20 MiB of heap whatever the
	// database's size. The scratch volume holding the file between etcd and the store is sized
	// from the cluster's quota (quota-backend-bytes) apart from these; request
	// ephemeral-storage here to have the scheduler account for it.
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`
}

// SnapshotDeletionPolicy is what happens to the stored file when its EtcdSnapshot is deleted.
// +kubebuilder:validation:Enum=Retain;Delete
type SnapshotDeletionPolicy string

const (
	// SnapshotRetain keeps the stored file.
	SnapshotRetain SnapshotDeletionPolicy = "Retain"
	// SnapshotDelete removes the stored file with the EtcdSnapshot.
	SnapshotDelete SnapshotDeletionPolicy = "Delete"
)

// SnapshotPhase is where an EtcdSnapshot is in its life.
// +kubebuilder:validation:Enum=Pending;Started;Complete;Failed
type SnapshotPhase string

const (
	// SnapshotPending: accepted, not started yet.
	SnapshotPending SnapshotPhase = "Pending"
	// SnapshotStarted: the snapshot is being taken or uploaded.
	SnapshotStarted SnapshotPhase = "Started"
	// SnapshotComplete: stored and verified; see status.artifact.
	SnapshotComplete SnapshotPhase = "Complete"
	// SnapshotFailed: gave up; see the Ready condition's message.
	SnapshotFailed SnapshotPhase = "Failed"
)

// SnapshotArtifact is where a completed snapshot lies and how to check it.
type SnapshotArtifact struct {
	// URI, for example s3://bucket/key.db or pvc://claim/path.db.
	URI string `json:"uri"`
	// SizeBytes of the snapshot file.
	// +optional
	SizeBytes int64 `json:"sizeBytes,omitempty"`
	// Checksum is "sha256:<hex>" of the snapshot file.
	// +optional
	Checksum string `json:"checksum,omitempty"`
}

// SnapshotProgress is how far the snapshot agent got, as it last reported: the agent writes
// it while it runs (at most every 2 seconds, and only after 5 percent more of the work, or 30
// seconds); the operator sets it to the whole file when the snapshot is Complete.
type SnapshotProgress struct {
	// BytesExpected is the database size etcd reported as the snapshot began: what the file
	// will be, near enough (writes meanwhile change it a little); 0 when unknown.
	// +optional
	BytesExpected int64 `json:"bytesExpected,omitempty"`
	// BytesWritten is how much of the snapshot the store has taken: uploaded parts on S3,
	// bytes written to the file on a PVC.
	// +optional
	BytesWritten int64 `json:"bytesWritten,omitempty"`
	// BytesVerified is how much of the stored copy has been read back and checked.
	// +optional
	BytesVerified int64 `json:"bytesVerified,omitempty"`
	// Percent of the work done: writing the file is the first half, reading it back the
	// second. 100 only once the snapshot is Complete.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	Percent int32 `json:"percent,omitempty"`
	// UpdateTime is when the agent (or, at the end, the operator) wrote this progress.
	// +optional
	UpdateTime *metav1.Time `json:"updateTime,omitempty"`
}

// EtcdSnapshotStatus is the progress and result of the snapshot.
type EtcdSnapshotStatus struct {
	// Phase is Pending, Started, Complete or Failed.
	// +optional
	Phase SnapshotPhase `json:"phase,omitempty"`
	// Artifact is set once the snapshot is Complete.
	// +optional
	Artifact *SnapshotArtifact `json:"artifact,omitempty"`
	// Revision is the etcd revision the snapshot holds.
	// +optional
	Revision int64 `json:"revision,omitempty"`
	// ClusterID is the etcd cluster ID (hex) the snapshot was taken from.
	// +optional
	ClusterID string `json:"clusterID,omitempty"`
	// Member is the name of the member the snapshot was taken from.
	// +optional
	Member string `json:"member,omitempty"`
	// EtcdVersion is the version of the member that served the snapshot.
	// +optional
	EtcdVersion string `json:"etcdVersion,omitempty"`
	// Progress is how far the running snapshot got; see SnapshotProgress.
	// +optional
	Progress *SnapshotProgress `json:"progress,omitempty"`
	// StartTime is when the snapshot Job started.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// CompletionTime is when the snapshot became Complete or Failed.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
	// Conditions: Ready, with reasons.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// EtcdSnapshot is one snapshot of an EtcdCluster written to S3 or a PVC.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=etcdsnap,categories=etcd-operator
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.clusterRef.name`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Progress",type=integer,JSONPath=`.status.progress.percent`,description="percent of the work done"
// +kubebuilder:printcolumn:name="Revision",type=integer,JSONPath=`.status.revision`
// +kubebuilder:printcolumn:name="Size",type=integer,JSONPath=`.status.artifact.sizeBytes`
// +kubebuilder:printcolumn:name="URI",type=string,JSONPath=`.status.artifact.uri`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type EtcdSnapshot struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec   EtcdSnapshotSpec   `json:"spec"`
	Status EtcdSnapshotStatus `json:"status,omitempty"`
}

// EtcdSnapshotList is a list of EtcdSnapshot.
//
// +kubebuilder:object:root=true
type EtcdSnapshotList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EtcdSnapshot `json:"items"`
}

func init() {
	SchemeBuilder.Register(&EtcdSnapshot{}, &EtcdSnapshotList{})
}
