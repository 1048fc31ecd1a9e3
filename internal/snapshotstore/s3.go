package snapshotstore

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// S3Config says how to reach a bucket.
type S3Config struct {
	// Endpoint is http(s)://host[:port].
	Endpoint       string
	Bucket         string
	Region         string
	ForcePathStyle bool
	// AccessKeyID and SecretKey, when both set, are the credentials; else the default chain
	// finds them (ChooseCredentials).
	AccessKeyID string
	SecretKey   string
	// CAPEM, when set, is the only CA trusted for an https endpoint.
	CAPEM []byte
}

// S3Store keeps snapshot files as objects of one bucket. A snapshot is uploaded (in parts of
// PartSize bytes, so memory stays flat) to "<key>.partial", read back and verified, and only
// then copied to its key server-side with its checksum in the object's metadata.
type S3Store struct {
	cli    *minio.Client
	bucket string
}

// PartSize is the size of one multipart upload part; a reader that is no GrowingFile is
// uploaded through a buffer of that size.
const PartSize = 16 << 20

// checksumMeta and ownerMeta are the user metadata keys (x-amz-meta-sha256,
// x-amz-meta-owner) holding a snapshot's checksum and owner.
const (
	checksumMeta = "Sha256"
	ownerMeta    = "Owner"
)

// NewS3Store builds a client; it does not connect yet.
func NewS3Store(cfg S3Config) (*S3Store, error) {
	u, err := url.Parse(cfg.Endpoint)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("S3 endpoint %q is no http:// or https:// URL", cfg.Endpoint)
	}
	secure := u.Scheme == "https"
	transport, err := minio.DefaultTransport(secure)
	if err != nil {
		return nil, err
	}
	// A CA means something only for https: over http the transport has no TLS settings.
	if secure && len(cfg.CAPEM) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(cfg.CAPEM) {
			return nil, errors.New("the S3 CA bundle holds no PEM certificate")
		}
		transport.TLSClientConfig.RootCAs = pool
	}
	lookup := minio.BucketLookupAuto
	if cfg.ForcePathStyle {
		lookup = minio.BucketLookupPath
	}
	cli, err := minio.New(u.Host, &minio.Options{
		Creds:        credentials.New(ChooseCredentials(cfg, os.Getenv).provider(cfg.Region)),
		Secure:       secure,
		Transport:    transport,
		Region:       cfg.Region,
		BucketLookup: lookup,
	})
	if err != nil {
		return nil, err
	}
	return &S3Store{cli: cli, bucket: cfg.Bucket}, nil
}

// CheckBucket fails with ErrBucketNotFound when the bucket does not exist, and with the
// store's error when the credentials are refused or the endpoint is unreachable.
func (s *S3Store) CheckBucket(ctx context.Context) error {
	ok, err := s.cli.BucketExists(ctx, s.bucket)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: %s", ErrBucketNotFound, s.bucket)
	}
	return nil
}

// Exists implements Store.
func (s *S3Store) Exists(ctx context.Context, name string) (bool, error) {
	_, err := s.cli.StatObject(ctx, s.bucket, name, minio.StatObjectOptions{})
	if isNoSuchKey(err) {
		return false, nil
	}
	return err == nil, err
}

// contentType is every snapshot object's.
const contentType = "application/octet-stream"

// WriteTemp implements Store. A GrowingFile is uploaded from the file as it grows; a reader of
// known length at once; any other reader through minio-go's buffer of one part.
func (s *S3Store) WriteTemp(ctx context.Context, name string, r io.Reader) (string, error) {
	tmp := PartialName(name)
	var err error
	if f, ok := r.(GrowingFile); ok {
		err = s.writeGrowing(ctx, tmp, f)
	} else {
		// A reader that knows its length (an archive segment in memory) is sent in one
		// request, without a part buffer of its own.
		size := int64(-1)
		if l, ok := r.(interface{ Len() int }); ok {
			size = int64(l.Len())
		}
		_, err = s.cli.PutObject(ctx, s.bucket, tmp, r, size, minio.PutObjectOptions{PartSize: PartSize, ContentType: contentType})
	}
	if err != nil {
		return "", err
	}
	return tmp, nil
}

// Open implements Store: the object's body is streamed as the server sends it. minio-go's
// Object (Client.GetObject) would pass every read through a goroutine of its own and ask for a
// stat first; with the small reads of a copy that cost more than the transfer.
func (s *S3Store) Open(ctx context.Context, name string) (io.ReadCloser, error) {
	body, _, _, err := minio.Core{Client: s.cli}.GetObject(ctx, s.bucket, name, minio.GetObjectOptions{})
	if isNoSuchKey(err) {
		return nil, fmt.Errorf("%w: s3://%s/%s", ErrNotFound, s.bucket, name)
	}
	return body, err
}

// Commit implements Store with a server-side copy in parts, several at once (ComposeObject
// copied the object in one request, one stream on the server). The upload is completed
// with If-None-Match: *, so the store itself refuses it when the key exists (S3 and MinIO
// answer 412 PreconditionFailed); a store that ignores the header leaves only the agent's
// look before the snapshot started between two writers.
//
// The client retries a completion whose answer it did not get (a timeout, a 5xx): when the
// first try landed, the retry meets the object it made and is refused. An object recorded
// with this owner and this checksum is that one, so the commit succeeded; calling it a
// collision would fail the snapshot and leave its file behind as if it were another's.
func (s *S3Store) Commit(ctx context.Context, tmp, name, checksum, owner string) error {
	info, err := s.cli.StatObject(ctx, s.bucket, tmp, minio.StatObjectOptions{})
	if err != nil {
		return err
	}
	opts := minio.PutObjectOptions{ContentType: contentType, UserMetadata: map[string]string{checksumMeta: checksum, ownerMeta: owner}}
	err = s.copyObject(ctx, tmp, name, info.Size, opts, true)
	if minio.ToErrorResponse(err).Code == "PreconditionFailed" && !s.committedBy(ctx, name, checksum, owner) {
		_ = s.Remove(ctx, tmp)
		return fmt.Errorf("%w: s3://%s/%s", ErrAlreadyExists, s.bucket, name)
	}
	if err != nil && minio.ToErrorResponse(err).Code != "PreconditionFailed" {
		return err
	}
	return s.Remove(ctx, tmp)
}

// committedBy: name's object was written by owner with checksum (an earlier try of this very
// commit). An empty owner or checksum proves nothing.
func (s *S3Store) committedBy(ctx context.Context, name, checksum, owner string) bool {
	if owner == "" || checksum == "" {
		return false
	}
	gotOwner, err := s.RecordedOwner(ctx, name)
	if err != nil || gotOwner != owner {
		return false
	}
	gotSum, err := s.RecordedChecksum(ctx, name)
	return err == nil && gotSum == checksum
}

// Remove implements Store.
func (s *S3Store) Remove(ctx context.Context, name string) error {
	err := s.cli.RemoveObject(ctx, s.bucket, name, minio.RemoveObjectOptions{})
	if isNoSuchKey(err) {
		return nil
	}
	return err
}

// RecordedChecksum implements Store.
func (s *S3Store) RecordedChecksum(ctx context.Context, name string) (string, error) {
	return s.recorded(ctx, name, checksumMeta)
}

// RecordedOwner implements Store.
func (s *S3Store) RecordedOwner(ctx context.Context, name string) (string, error) {
	return s.recorded(ctx, name, ownerMeta)
}

// recorded is the user metadata key of name's object; "" when it has none.
func (s *S3Store) recorded(ctx context.Context, name, key string) (string, error) {
	info, err := s.cli.StatObject(ctx, s.bucket, name, minio.StatObjectOptions{})
	if err != nil {
		if isNoSuchKey(err) {
			return "", fmt.Errorf("%w: s3://%s/%s", ErrNotFound, s.bucket, name)
		}
		return "", err
	}
	for k, v := range info.UserMetadata {
		if strings.EqualFold(k, key) {
			return v, nil
		}
	}
	return "", nil
}

// List returns the keys under prefix (for tests and retention checks).
func (s *S3Store) List(ctx context.Context, prefix string) ([]string, error) {
	var keys []string
	for obj := range s.cli.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if obj.Err != nil {
			return nil, obj.Err
		}
		keys = append(keys, obj.Key)
	}
	return keys, nil
}

func isNoSuchKey(err error) bool {
	if err == nil {
		return false
	}
	code := minio.ToErrorResponse(err).Code
	return code == "NoSuchKey" || code == "NoSuchObject"
}
