package snapshotstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"strings"
)

// Store holds snapshot files by name (an S3 key or a path relative to a volume's root).
type Store interface {
	// Exists reports whether a complete file of that name is stored.
	Exists(ctx context.Context, name string) (bool, error)
	// WriteTemp streams r to a temporary name next to name; nothing is visible under name.
	WriteTemp(ctx context.Context, name string, r io.Reader) (tmp string, err error)
	// Open reads a stored file (complete or temporary).
	Open(ctx context.Context, name string) (io.ReadCloser, error)
	// Commit makes the temporary file the complete file name, recording its checksum and
	// its owner (the EtcdSnapshot that wrote it, OwnerOf) with it, and removes the temporary
	// one. It never replaces a file: when name exists, or is claimed by another owner, it
	// fails with ErrAlreadyExists, decided by the store itself in one step (a conditional
	// write, a link), so two writers of one name cannot both succeed.
	Commit(ctx context.Context, tmp, name, checksum, owner string) error
	// Remove deletes a file (complete or temporary); a missing one is no error.
	Remove(ctx context.Context, name string) error
	// RecordedChecksum is the checksum Commit recorded for name; "" when none was recorded
	// (a file stored by something else).
	RecordedChecksum(ctx context.Context, name string) (string, error)
	// RecordedOwner is the owner Commit recorded for name; "" when none was recorded (a
	// file stored by an operator before owners were recorded, or by something else), and
	// ErrNotFound when there is no such file.
	RecordedOwner(ctx context.Context, name string) (string, error)
}

// OwnerOf is the owner recorded with a snapshot file: the EtcdSnapshot's namespace, name and
// UID. The UID tells apart two EtcdSnapshots of one name, one deleted and one created again.
func OwnerOf(namespace, name, uid string) string { return namespace + "/" + name + "/" + uid }

// ParseOwner reads an owner OwnerOf wrote; ok is false for anything else.
func ParseOwner(owner string) (namespace, name, uid string, ok bool) {
	parts := strings.Split(owner, "/")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" {
		return "", "", "", false
	}
	return parts[0], parts[1], parts[2], true
}

// MayDelete says whether the EtcdSnapshot owner (OwnerOf), whose status recorded checksum
// for its file ("" when it recorded none), may delete a stored file with recordedOwner and
// recordedChecksum: only the file it wrote. A file with an owner is the owner's alone; a file
// without one (written before owners were recorded) is the snapshot's when it recorded that
// very file's checksum, which a snapshot that failed never did.
func MayDelete(recordedOwner, recordedChecksum, owner, checksum string) bool {
	if recordedOwner != "" {
		return recordedOwner == owner
	}
	return checksum != "" && recordedChecksum == checksum
}

// ChecksumPrefix starts every checksum this package writes.
const ChecksumPrefix = "sha256:"

// etcdHashSize is the length of the sha256 etcd appends to a snapshot it streams.
const etcdHashSize = sha256.Size

// SnapshotReader reads an etcd snapshot file and checks, at its end, etcd's own integrity hash
// (the last 32 bytes are the sha256 of everything before them) besides summing the whole file.
// It holds at most 32 bytes back, so a file of any size streams through it. One sha256 pass
// serves both sums: the whole file's is the body's state continued with those last 32 bytes,
// so hashing, the agents' largest cost in CPU after the copies, is done once.
type SnapshotReader struct {
	r      io.Reader
	body   hash.Hash
	size   int64
	tail   []byte
	done   bool
	failed error
}

// NewSnapshotReader wraps r.
func NewSnapshotReader(r io.Reader) *SnapshotReader {
	return &SnapshotReader{r: r, body: sha256.New(), tail: make([]byte, 0, 2*etcdHashSize)}
}

// ErrCorrupt says a snapshot file fails its integrity check.
var ErrCorrupt = errors.New("snapshot file is corrupt")

func (s *SnapshotReader) Read(p []byte) (int, error) {
	if s.failed != nil {
		return 0, s.failed
	}
	n, err := s.r.Read(p)
	if n > 0 {
		s.size += int64(n)
		s.hold(p[:n])
	}
	if errors.Is(err, io.EOF) {
		s.done = true
		if verr := s.verify(); verr != nil {
			s.failed = verr
			return n, verr
		}
	}
	return n, err
}

// hold hashes what was read except its last 32 bytes, which it keeps back: they may be
// etcd's hash. Hash writes never fail.
func (s *SnapshotReader) hold(p []byte) {
	if len(p) >= etcdHashSize {
		s.body.Write(s.tail)
		s.body.Write(p[:len(p)-etcdHashSize])
		s.tail = append(s.tail[:0], p[len(p)-etcdHashSize:]...)
		return
	}
	s.tail = append(s.tail, p...)
	if over := len(s.tail) - etcdHashSize; over > 0 {
		s.body.Write(s.tail[:over])
		s.tail = append(s.tail[:0], s.tail[over:]...)
	}
}

func (s *SnapshotReader) verify() error {
	if len(s.tail) < etcdHashSize {
		return fmt.Errorf("%w: %d bytes, too short for a snapshot", ErrCorrupt, s.size)
	}
	if got := s.body.Sum(nil); !bytes.Equal(got, s.tail) {
		return fmt.Errorf("%w: etcd's sha256 at its end (%x) does not match its content (%x)", ErrCorrupt, s.tail, got)
	}
	return nil
}

// Checksum is "sha256:<hex>" of the whole file read so far: the body's sum continued, in a
// copy, with the bytes held back.
func (s *SnapshotReader) Checksum() string {
	whole, err := s.body.(hash.Cloner).Clone()
	if err != nil {
		panic(err) // crypto/sha256 always clones
	}
	whole.Write(s.tail)
	return ChecksumPrefix + hex.EncodeToString(whole.Sum(nil))
}

// Size is the number of bytes read so far.
func (s *SnapshotReader) Size() int64 { return s.size }

// Verified reports whether the whole file was read and passed etcd's integrity check.
func (s *SnapshotReader) Verified() bool { return s.done && s.failed == nil }

// VerifyStored reads a stored file back to its end and checks etcd's integrity hash and, when
// want is not empty, the file's checksum; it returns the checksum and size it read.
func VerifyStored(ctx context.Context, st Store, name, want string) (string, int64, error) {
	rc, err := st.Open(ctx, name)
	if err != nil {
		return "", 0, err
	}
	defer rc.Close() // read-only
	sr := NewSnapshotReader(rc)
	if _, err := Copy(io.Discard, sr); err != nil {
		return "", 0, fmt.Errorf("reading back %s: %w", name, err)
	}
	if want != "" && sr.Checksum() != want {
		return "", 0, fmt.Errorf("%w: %s has checksum %s, %s was recorded", ErrCorrupt, name, sr.Checksum(), want)
	}
	return sr.Checksum(), sr.Size(), nil
}

// copyBufferSize is the buffer a snapshot file is copied through: large enough that each read
// and write moves much at once (io.Copy's 32 KiB, and io.Discard's 8 KiB, made every copy of
// a large file cost more in calls than in bytes), small beside the agents' memory.
const copyBufferSize = 256 << 10

// Copy copies src to dst through a buffer of copyBufferSize, never through dst's ReadFrom or
// src's WriteTo, which would choose their own, smaller, sizes.
func Copy(dst io.Writer, src io.Reader) (int64, error) {
	return io.CopyBuffer(struct{ io.Writer }{dst}, struct{ io.Reader }{src}, make([]byte, copyBufferSize))
}
