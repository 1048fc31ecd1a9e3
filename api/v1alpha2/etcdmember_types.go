package v1alpha2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// InitialClusterState is etcd's --initial-cluster-state for a member's first start.
// +kubebuilder:validation:Enum=new;existing
type InitialClusterState string

const (
	// InitialClusterStateNew: the member is one of the cluster's founding members.
	InitialClusterStateNew InitialClusterState = "new"
	// InitialClusterStateExisting: the member joins a running cluster (as a learner).
	InitialClusterStateExisting InitialClusterState = "existing"
)

// MemberBootstrap is what a member needs for its first start; a member that already has data
// ignores it.
type MemberBootstrap struct {
	// InitialCluster is etcd's --initial-cluster: name=peerURL pairs of the members known when
	// this member was added.
	// +kubebuilder:validation:MinLength=1
	InitialCluster string `json:"initialCluster"`

	// InitialClusterState is new for founding members and existing for members added later.
	InitialClusterState InitialClusterState `json:"initialClusterState"`

	// ClusterToken is etcd's --initial-cluster-token.
	// +kubebuilder:validation:MinLength=1
	ClusterToken string `json:"clusterToken"`

	// Restore is the snapshot a founding member starts from: resolved from the cluster's
	// spec.bootstrap.restore.source when the member was created (a snapshotRef becomes its
	// EtcdSnapshot's file and checksum, so that the member's Pod does not depend on the
	// EtcdSnapshot still existing later), or set on the first member of a cluster rebuilt
	// from an EtcdSnapshot after it lost its quorum. Its restore does nothing once the data
	// directory holds a member.
	// +optional
	Restore *MemberRestore `json:"restore,omitempty"`
}

// MemberRestore is one snapshot file to restore and how to check it.
type MemberRestore struct {
	// Source is the file: an exact S3 key or an exact path on a PVC.
	Source SnapshotLocation `json:"source"`

	// Checksum is the "sha256:<hex>" the file must have: the one an EtcdSnapshot recorded in
	// its status. Empty: the checksum stored beside the file, when there is one.
	// +optional
	Checksum string `json:"checksum,omitempty"`

	// Snapshot names the EtcdSnapshot the file came from, when the source was a snapshotRef.
	// +optional
	Snapshot string `json:"snapshot,omitempty"`

	// Archive, for a restore to a target, is the archive replayed on the file up to it.
	// +optional
	Archive *MemberRestoreArchive `json:"archive,omitempty"`
}

// MemberRestoreArchive is an archive (in the same store as the snapshot file) and the target
// to replay it to: exactly one of revision or time.
type MemberRestoreArchive struct {
	// Prefix is the archive's S3 key prefix or directory in the volume.
	Prefix string `json:"prefix"`
	// Revision is the target revision.
	// +optional
	Revision int64 `json:"revision,omitempty"`
	// Time is the target time.
	// +optional
	Time *metav1.Time `json:"time,omitempty"`
}

// MemberTLS names the Secrets a member mounts; empty names mean plaintext on that port.
type MemberTLS struct {
	// ServerSecretName holds the client-port server certificate (tls.crt, tls.key, ca.crt).
	// +optional
	ServerSecretName string `json:"serverSecretName,omitempty"`

	// ClientCertAuth makes etcd require client certificates on the client port.
	// +optional
	ClientCertAuth bool `json:"clientCertAuth,omitempty"`

	// ClientCASecretName holds, under ca.crt, the CA etcd trusts for client certificates
	// (--trusted-ca-file): the CA of the operator's client certificate when cert-manager issues
	// it. Empty: the server Secret's ca.crt, as for members made before this field existed.
	// +optional
	ClientCASecretName string `json:"clientCASecretName,omitempty"`

	// PeerSecretName holds the peer certificate (tls.crt, tls.key, ca.crt).
	// +optional
	PeerSecretName string `json:"peerSecretName,omitempty"`

	// CABundleSecretName holds the CAs etcd trusts, for client certificates under
	// client-ca.crt and for peers under peer-ca.crt, in place of the certificate Secrets'
	// ca.crt: the operator's Secret <cluster>-ca-bundle, set once the cluster's CA was rotated.
	// +optional
	CABundleSecretName string `json:"caBundleSecretName,omitempty"`

	// CABundleHash fingerprints the CAs the member is to start with, those of that Secret or,
	// without it, the ca.crt of the cluster's own certificate Secrets: etcd reads its trusted
	// CA files only at start, so a new value restarts the member (one at a time).
	// +optional
	CABundleHash string `json:"caBundleHash,omitempty"`
}

// EtcdMemberSpec is one member as the cluster controller decided it. The member controller
// realizes it as a PVC (for medium "") and a Pod.
//
// +kubebuilder:validation:XValidation:rule="self.clusterName == oldSelf.clusterName",message="spec.clusterName is immutable: a member belongs to one cluster for its whole life"
// +kubebuilder:validation:XValidation:rule="self.storage.medium == oldSelf.storage.medium",message="spec.storage.medium is immutable: a member's data cannot move between PVC and tmpfs"
type EtcdMemberSpec struct {
	// ClusterName is the EtcdCluster this member belongs to.
	// +kubebuilder:validation:MinLength=1
	ClusterName string `json:"clusterName"`

	// Version is the etcd version this member runs.
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^[0-9]+[.][0-9]+[.][0-9]+$')",message="spec.version must be an etcd release X.Y.Z, for example 3.6.16"
	Version string `json:"version"`

	// Storage of this member's data directory.
	Storage StorageSpec `json:"storage"`

	// Bootstrap is used at the member's first start.
	Bootstrap MemberBootstrap `json:"bootstrap"`

	// TLS names the Secrets the member mounts.
	// +optional
	TLS *MemberTLS `json:"tls,omitempty"`

	// Dormant stops the member's Pod and keeps its data and identity (the cluster is paused).
	// +optional
	Dormant bool `json:"dormant,omitempty"`

	// Adopted is set on a member this operator took over, running, from another operator
	// (`kubectl etcd migrate`): its data stays where that operator put it. Members the
	// operator creates never have it.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.adopted is immutable: an adopted member's data does not move"
	Adopted *MemberAdoption `json:"adopted,omitempty"`
}

// AdoptedFrom names the operator a member was taken over from.
// +kubebuilder:validation:Enum=cozystack-v1alpha2;aenix-v1alpha1
type AdoptedFrom string

const (
	// AdoptedFromCozystack: Cozystack's etcd-operator (etcd-operator.cozystack.io/v1alpha2).
	AdoptedFromCozystack AdoptedFrom = "cozystack-v1alpha2"
	// AdoptedFromAenix: the legacy StatefulSet-based operator (etcd.aenix.io/v1alpha1).
	AdoptedFromAenix AdoptedFrom = "aenix-v1alpha1"
)

// MemberAdoption says where an adopted member keeps its data.
type MemberAdoption struct {
	// From is the operator that created the member.
	From AdoptedFrom `json:"from"`

	// PVCName is the member's PersistentVolumeClaim (Cozystack's operator: data-<member>);
	// empty for a tmpfs member.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	PVCName string `json:"pvcName,omitempty"`

	// DataDir is etcd's --data-dir inside the member's volume, mounted at /var/lib/etcd
	// (Cozystack's operator: the volume root, /var/lib/etcd).
	// +kubebuilder:validation:MaxLength=255
	// +kubebuilder:validation:XValidation:rule="self == '/var/lib/etcd' || (self.startsWith('/var/lib/etcd/') && !self.contains('..'))",message="spec.adopted.dataDir must be /var/lib/etcd or a directory under it"
	DataDir string `json:"dataDir"`
}

// EtcdMemberStatus is what the operator observed of one member.
type EtcdMemberStatus struct {
	// ObservedGeneration is the spec generation the status speaks of.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// MemberID is the etcd member ID in hex, known once the member was added to etcd.
	// +optional
	MemberID string `json:"memberID,omitempty"`

	// ClusterID is the etcd cluster ID in hex the member belongs to.
	// +optional
	ClusterID string `json:"clusterID,omitempty"`

	// PodName is the member's current Pod.
	// +optional
	PodName string `json:"podName,omitempty"`

	// Role is Voter or Learner.
	// +optional
	Role MemberRole `json:"role,omitempty"`

	// Version is the etcd version the member reports.
	// +optional
	Version string `json:"version,omitempty"`

	// Joined is true once etcd has listed the member as started (it published its name): from
	// then on it may hold data etcd counts on, a learner too (etcd may already count it as a
	// voter before the status says so), and it is never started again on an empty data
	// directory with its peers named. Written before etcd is asked to promote the member;
	// never cleared.
	// +optional
	Joined bool `json:"joined,omitempty"`

	// Conditions: Ready and Joined, with reasons.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// EtcdMember is one member of an EtcdCluster, created by the operator; it owns the member's
// Pod and PVC. Deleting it by hand does not delete the member's data: the PVC is released only
// after the member has been removed from etcd on purpose.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=etcdm,categories=etcd-operator
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.clusterName`
// +kubebuilder:printcolumn:name="Member-ID",type=string,JSONPath=`.status.memberID`
// +kubebuilder:printcolumn:name="Role",type=string,JSONPath=`.status.role`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.status.version`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Pod",type=string,JSONPath=`.status.podName`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type EtcdMember struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec   EtcdMemberSpec   `json:"spec"`
	Status EtcdMemberStatus `json:"status,omitempty"`
}

// EtcdMemberList is a list of EtcdMember.
//
// +kubebuilder:object:root=true
type EtcdMemberList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EtcdMember `json:"items"`
}

func init() {
	SchemeBuilder.Register(&EtcdMember{}, &EtcdMemberList{})
}
