package v1alpha2

import (
	corev1 "k8s.io/api/core/v1"
)

// IssuerReference names a cert-manager Issuer (in the cluster's namespace) or ClusterIssuer.
type IssuerReference struct {
	// Name of the Issuer or ClusterIssuer.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`

	// Kind is Issuer (the default, namespaced next to the EtcdCluster) or ClusterIssuer.
	// +kubebuilder:validation:Enum=Issuer;ClusterIssuer
	// +kubebuilder:default=Issuer
	// +optional
	Kind string `json:"kind,omitempty"`
}

// SnapshotLocation is where a snapshot is written (EtcdSnapshot) or read from (a restore
// source): exactly one of s3 or pvc.
//
// +kubebuilder:validation:XValidation:rule="has(self.s3) != has(self.pvc)",message="exactly one of s3 or pvc must be set: name an S3 bucket or a PersistentVolumeClaim, not both and not neither"
type SnapshotLocation struct {
	// S3 is an S3-compatible object store.
	// +optional
	S3 *S3SnapshotLocation `json:"s3,omitempty"`

	// PVC is a PersistentVolumeClaim in the cluster's namespace.
	// +optional
	PVC *PVCSnapshotLocation `json:"pvc,omitempty"`
}

// S3SnapshotLocation is an object in an S3-compatible store.
type S3SnapshotLocation struct {
	// Endpoint is the store's URL, for example https://s3.eu-central-1.amazonaws.com or
	// http://minio.storage.svc:9000.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:XValidation:rule="self.startsWith('http://') || self.startsWith('https://')",message="endpoint must be a URL starting with http:// or https://, for example https://s3.amazonaws.com"
	Endpoint string `json:"endpoint"`

	// Bucket is the bucket's name.
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9][a-z0-9.-]*[a-z0-9]$')",message="bucket must be a valid S3 bucket name: lowercase letters, digits, '.' and '-', starting and ending with a letter or digit"
	Bucket string `json:"bucket"`

	// Key is, for a snapshot destination, a key prefix to which the operator appends
	// "<namespace>/<cluster>/<snapshot-name>.db" (a key ending in ".db" is used as it is);
	// for a restore source, the exact key of the snapshot object.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Key string `json:"key,omitempty"`

	// CredentialsSecretRef names a Secret in the same namespace holding static keys,
	// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, and optionally the CA bundle ca.crt of an
	// https endpoint. Leave it out to use the default credential chain instead: web identity
	// (AWS_WEB_IDENTITY_TOKEN_FILE and AWS_ROLE_ARN, as IRSA injects them for the
	// serviceAccountName below), the container credentials endpoint (ECS, EKS Pod Identity),
	// or the node's instance role (instance metadata).
	// +optional
	CredentialsSecretRef corev1.LocalObjectReference `json:"credentialsSecretRef,omitzero"`

	// ServiceAccountName is the ServiceAccount in the same namespace that the agents reading
	// or writing this location run as (the snapshot and delete Jobs, the verify Job, the
	// restoring member's Pod), for workload identity: IRSA's eks.amazonaws.com/role-arn
	// annotation, or an EKS Pod Identity association. It must exist before they start, and
	// for a restore source as long as the restored member's Pod does. Absent: the snapshot
	// Job runs as a ServiceAccount the operator makes for it, the others as the namespace's
	// default; none gets a cloud identity.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$')",message="serviceAccountName must be the name of a ServiceAccount: lowercase letters, digits, '-' and '.', for example etcd-backup"
	// +optional
	ServiceAccountName string `json:"serviceAccountName,omitempty"`

	// Region of the bucket; stores that ignore regions accept any value.
	// +optional
	Region string `json:"region,omitempty"`

	// ForcePathStyle addresses the bucket in the path instead of the host name (MinIO, Ceph).
	// +optional
	ForcePathStyle bool `json:"forcePathStyle,omitempty"`
}

// PVCSnapshotLocation is a path on a PersistentVolumeClaim.
type PVCSnapshotLocation struct {
	// ClaimName is a PersistentVolumeClaim in the same namespace.
	// +kubebuilder:validation:MinLength=1
	ClaimName string `json:"claimName"`

	// SubPath is, for a snapshot destination, a directory in the volume; for a restore source,
	// the exact snapshot file. Relative, without "..".
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('/') && !self.split('/').exists(p, p == '..')",message="subPath must be a relative path inside the volume without '..' components, for example snapshots/etcd.db"
	// +optional
	SubPath string `json:"subPath,omitempty"`
}
