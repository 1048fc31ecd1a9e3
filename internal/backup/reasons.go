package backup

import (
	"crypto/x509"
	"errors"
	"net"

	"github.com/minio/minio-go/v7"
)

// Errors a person fixes by changing something outside the operator.
var (
	ErrBucketNotFound = errors.New("the bucket does not exist")
	ErrNotFound       = errors.New("the snapshot file does not exist")
	ErrAlreadyExists  = errors.New("a snapshot file of that name exists already")
)

// Reasons of a failed snapshot or restore; each names what to fix.
const (
	ReasonBucketNotFound        = "BucketNotFound"
	ReasonCredentialsRejected   = "CredentialsRejected"
	ReasonEndpointUnreachable   = "EndpointUnreachable"
	ReasonCertificateNotTrusted = "CertificateNotTrusted"
	ReasonPVCFull               = "PVCFull"
	ReasonSnapshotNotFound      = "SnapshotNotFound"
	ReasonSnapshotCorrupt       = "SnapshotCorrupt"
	ReasonAlreadyExists         = "SnapshotFileExists"
	ReasonStorageError          = "StorageError"
)

// Reason classifies a storage error into the reason a person acts on.
func Reason(err error) string {
	var unknownAuthority x509.UnknownAuthorityError
	var certInvalid x509.CertificateInvalidError
	var hostname x509.HostnameError
	var netErr net.Error
	switch {
	case errors.Is(err, ErrBucketNotFound):
		return ReasonBucketNotFound
	case errors.Is(err, ErrNotFound):
		return ReasonSnapshotNotFound
	case errors.Is(err, ErrCorrupt):
		return ReasonSnapshotCorrupt
	case errors.Is(err, ErrNoSpace):
		return ReasonPVCFull
	case errors.Is(err, ErrAlreadyExists):
		return ReasonAlreadyExists
	case errors.As(err, &unknownAuthority), errors.As(err, &certInvalid), errors.As(err, &hostname):
		return ReasonCertificateNotTrusted
	}
	switch minio.ToErrorResponse(err).Code {
	case "NoSuchBucket":
		return ReasonBucketNotFound
	case "InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "InvalidToken", "ExpiredToken":
		return ReasonCredentialsRejected
	}
	if errors.As(err, &netErr) {
		return ReasonEndpointUnreachable
	}
	return ReasonStorageError
}
