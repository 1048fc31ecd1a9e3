package snapshotstore

import (
	"crypto/x509"
	"errors"
	"net"

	"github.com/minio/minio-go/v7"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

// Errors a person fixes by changing something outside the operator.
var (
	ErrBucketNotFound = errors.New("the bucket does not exist")
	ErrNotFound       = errors.New("the snapshot file does not exist")
	ErrAlreadyExists  = errors.New("a snapshot file of that name exists already")
)

// Reason classifies a storage error into the reason a person acts on.
func Reason(err error) string {
	var unknownAuthority x509.UnknownAuthorityError
	var certInvalid x509.CertificateInvalidError
	var hostname x509.HostnameError
	var netErr net.Error
	switch {
	case errors.Is(err, ErrCredentialsUnavailable):
		// First: the chain's own failure may be a TLS or network error of its endpoint.
		return etcdv1.ReasonCredentialsUnavailable
	case errors.Is(err, ErrBucketNotFound):
		return etcdv1.ReasonBucketNotFound
	case errors.Is(err, ErrNotFound):
		return etcdv1.ReasonSnapshotNotFound
	case errors.Is(err, ErrCorrupt):
		return etcdv1.ReasonSnapshotCorrupt
	case errors.Is(err, ErrNoSpace):
		return etcdv1.ReasonPVCFull
	case errors.Is(err, ErrAlreadyExists):
		return etcdv1.ReasonSnapshotFileExists
	case errors.As(err, &unknownAuthority), errors.As(err, &certInvalid), errors.As(err, &hostname):
		return etcdv1.ReasonCertificateNotTrusted
	}
	switch minio.ToErrorResponse(err).Code {
	case "NoSuchBucket":
		return etcdv1.ReasonBucketNotFound
	case "InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "InvalidToken", "ExpiredToken":
		return etcdv1.ReasonCredentialsRejected
	}
	if errors.As(err, &netErr) {
		return etcdv1.ReasonEndpointUnreachable
	}
	return etcdv1.ReasonStorageError
}
