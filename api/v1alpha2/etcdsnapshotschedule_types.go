package v1alpha2

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
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

	// Archive, when set, archives every change of the cluster between the full snapshots, so
	// that a new cluster can be restored to any revision or time the archive covers
	// (spec.bootstrap.restore.target). An archiver Deployment watches the cluster and stores
	// segments of changes next to the snapshots, under <snapshot prefix>/<schedule
	// name>.archive; the schedule's snapshots are the bases they are replayed on.
	// +optional
	Archive *SnapshotArchive `json:"archive,omitempty"`
}

// SnapshotArchive is how the archiver closes its segments.
type SnapshotArchive struct {
	// SegmentInterval closes a segment that holds changes at least this often: at most this
	// much of the newest changes is not stored yet. Default 5s.
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('10m')",message="spec.archive.segmentInterval must be between 1s and 10m"
	// +optional
	SegmentInterval *metav1.Duration `json:"segmentInterval,omitempty"`

	// SegmentMaxBytes closes a segment earlier once its changes reach this size. Default 8Mi.
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).isGreaterThan(quantity('64Ki')) && quantity(string(self)).isLessThan(quantity('1Gi'))",message="spec.archive.segmentMaxBytes must be more than 64Ki and less than 1Gi"
	// +optional
	SegmentMaxBytes *resource.Quantity `json:"segmentMaxBytes,omitempty"`

	// Resources of the archiver's container.
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`
}

// Defaults of spec.archive.
const (
	DefaultArchiveSegmentInterval = 5 * time.Second
	DefaultArchiveSegmentMaxBytes = 8 << 20
)

// ArchiveStatus is the archive's state: what the archiver reported, and the window one can
// restore to that the operator works out from it and the schedule's snapshots.
type ArchiveStatus struct {
	// Window is what a restore can reach: from Earliest (the oldest Complete snapshot of the
	// schedule inside the archive's newest unbroken run) to Latest (the newest change
	// stored). Absent while no snapshot is inside that run.
	// +optional
	Window *RestoreWindow `json:"window,omitempty"`

	// Lag is how far the archive runs behind: the time between the archiver's last report and
	// the newest moment it has stored everything up to.
	// +optional
	Lag *metav1.Duration `json:"lag,omitempty"`

	// Archived is the archive's newest unbroken run of segments, as the archiver reported it.
	// +optional
	Archived *ArchivedRun `json:"archived,omitempty"`

	// LastGap is the newest gap the archiver met: revisions etcd compacted before they were
	// stored. No restore crosses it.
	// +optional
	LastGap *ArchiveGap `json:"lastGap,omitempty"`

	// StoreError is why the archiver's last write to the store failed; empty once one
	// succeeded.
	// +optional
	StoreError string `json:"storeError,omitempty"`

	// RetainFromRevision is the revision of the oldest Complete snapshot kept: the archiver
	// deletes the segments that end before it.
	// +optional
	RetainFromRevision int64 `json:"retainFromRevision,omitempty"`

	// UpdateTime is when the archiver last reported.
	// +optional
	UpdateTime *metav1.Time `json:"updateTime,omitempty"`
}

// RestoreWindow is the first and the last point a restore can reach.
type RestoreWindow struct {
	// Earliest is the oldest point: a full snapshot's revision and completion time.
	Earliest RestorePoint `json:"earliest"`
	// Latest is the newest: the newest revision stored, and the time up to which every
	// change the archiver received is stored.
	Latest RestorePoint `json:"latest"`
}

// RestorePoint is a revision and a time.
type RestorePoint struct {
	// Revision is the etcd revision.
	Revision int64 `json:"revision"`
	// Time is the moment of that revision (see RestoreWindow).
	// +optional
	Time *metav1.Time `json:"time,omitempty"`
}

// ArchivedRun is an unbroken run of segments: every revision from FirstRevision to
// LastRevision is stored, and every change the archiver received before Until.
type ArchivedRun struct {
	// FirstRevision is the run's first revision.
	FirstRevision int64 `json:"firstRevision"`
	// LastRevision is the newest revision stored (FirstRevision-1 before any change).
	LastRevision int64 `json:"lastRevision"`
	// Until is when the newest segment was closed.
	// +optional
	Until *metav1.Time `json:"until,omitempty"`
}

// ArchiveGap is revisions lost to the archive.
type ArchiveGap struct {
	// FromRevision and ToRevision are the revisions lost, both included.
	FromRevision int64 `json:"fromRevision"`
	ToRevision   int64 `json:"toRevision"`
	// Time is when the archiver met the gap.
	// +optional
	Time *metav1.Time `json:"time,omitempty"`
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
	// Conditions: Ready; Archived with spec.archive.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Archive is the archive's state with spec.archive.
	// +optional
	Archive *ArchiveStatus `json:"archive,omitempty"`
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
