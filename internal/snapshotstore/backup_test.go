package snapshotstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"testing/iotest"

	"github.com/minio/minio-go/v7"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

func TestStoredNamesAreReproducibleFromTheSpecAndTheName(t *testing.T) {
	f := FileOf{Namespace: "team-a", Cluster: "main", Name: "nightly-1"}
	for _, tc := range []struct{ prefix, want string }{
		{"", "team-a/main/nightly-1.db"},
		{"backups", "backups/team-a/main/nightly-1.db"},
		{"backups/", "backups/team-a/main/nightly-1.db"},
		{"exact/name.db", "exact/name.db"},
	} {
		if got := ObjectKey(tc.prefix, f); got != tc.want {
			t.Errorf("ObjectKey(%q) = %q, want %q", tc.prefix, got, tc.want)
		}
	}
	// Another namespace's, or another cluster's, snapshot of the same name gets another key.
	for _, other := range []FileOf{{"team-b", "main", "nightly-1"}, {"team-a", "other", "nightly-1"}} {
		if ObjectKey("backups/", other) == ObjectKey("backups/", f) {
			t.Errorf("%+v and %+v share the key %s", other, f, ObjectKey("backups/", f))
		}
	}
	if got := FilePath("snaps", FileOf{Name: "a"}); got != "snaps/a.db" {
		t.Errorf("FilePath = %q", got)
	}
	x := FileOf{Namespace: "ns", Cluster: "c", Name: "x"}
	s3 := etcdv1.SnapshotLocation{S3: &etcdv1.S3SnapshotLocation{Bucket: "b", Key: "p/"}}
	if got := DestinationURI(s3, x); got != "s3://b/p/ns/c/x.db" {
		t.Errorf("DestinationURI = %q", got)
	}
	pvc := etcdv1.SnapshotLocation{PVC: &etcdv1.PVCSnapshotLocation{ClaimName: "c", SubPath: "d"}}
	if got := DestinationURI(pvc, x); got != "pvc://c/d/x.db" {
		t.Errorf("DestinationURI = %q", got)
	}
	// The file's own location names what DestinationURI names, and leaves the destination be.
	if f := FileLocation(s3, x); f.S3.Key != "p/ns/c/x.db" || f.S3.Bucket != "b" || s3.S3.Key != "p/" {
		t.Errorf("FileLocation(s3) = %+v (destination now %+v)", f.S3, s3.S3)
	}
	if f := FileLocation(pvc, x); f.PVC.SubPath != "d/x.db" || f.PVC.ClaimName != "c" || pvc.PVC.SubPath != "d" {
		t.Errorf("FileLocation(pvc) = %+v (destination now %+v)", f.PVC, pvc.PVC)
	}
}

// A status.artifact names the snapshot's file under this layout or, for a snapshot completed
// before the namespace and cluster were in the key, under the earlier one; nothing else.
func TestLocationOfKnowsBothKeyLayouts(t *testing.T) {
	x := FileOf{Namespace: "ns", Cluster: "c", Name: "x"}
	s3 := etcdv1.SnapshotLocation{S3: &etcdv1.S3SnapshotLocation{Bucket: "b", Key: "p/"}}
	root := etcdv1.SnapshotLocation{S3: &etcdv1.S3SnapshotLocation{Bucket: "b"}}
	pvc := etcdv1.SnapshotLocation{PVC: &etcdv1.PVCSnapshotLocation{ClaimName: "c", SubPath: "d"}}
	for _, tc := range []struct {
		name string
		loc  etcdv1.SnapshotLocation
		uri  string
		key  string // "" when not the snapshot's
	}{
		{"this layout", s3, "s3://b/p/ns/c/x.db", "p/ns/c/x.db"},
		{"the earlier layout", s3, "s3://b/p/x.db", "p/x.db"},
		{"the earlier layout at the bucket's root", root, "s3://b/x.db", "x.db"},
		{"another snapshot's", s3, "s3://b/p/ns/c/y.db", ""},
		{"another bucket", s3, "s3://other/p/ns/c/x.db", ""},
		{"a PVC file", pvc, "pvc://c/d/x.db", "d/x.db"},
		{"a PVC file elsewhere", pvc, "pvc://c/x.db", ""},
	} {
		got, ok := LocationOf(tc.loc, x, tc.uri)
		var key string
		switch {
		case ok && got.S3 != nil:
			key = got.S3.Key
		case ok:
			key = got.PVC.SubPath
		}
		if ok != (tc.key != "") || key != tc.key {
			t.Errorf("%s: LocationOf(%s) = %q, %v; want %q", tc.name, tc.uri, key, ok, tc.key)
		}
	}
}

// fakeSnapshot is content followed by its sha256, as etcd streams a snapshot.
func fakeSnapshot(size int) []byte {
	body := bytes.Repeat([]byte("etcd"), size/4)
	sum := sha256.Sum256(body)
	return append(body, sum[:]...)
}

func TestSnapshotReaderChecksEtcdsHashAtTheEnd(t *testing.T) {
	good := fakeSnapshot(1 << 20)
	sr := NewSnapshotReader(bytes.NewReader(good))
	if _, err := io.Copy(io.Discard, sr); err != nil || !sr.Verified() {
		t.Fatalf("a good snapshot: err %v, verified %v", err, sr.Verified())
	}
	want := ChecksumPrefix + hexString(sha256.Sum256(good))
	if sr.Size() != int64(len(good)) || sr.Checksum() != want {
		t.Errorf("size %d checksum %s", sr.Size(), sr.Checksum())
	}
	// Reads shorter than etcd's hash take the other path of the bytes held back, reads longer
	// than it but not a multiple of it the first; the sums are the same. (The writer hides
	// io.Discard's ReadFrom, which would read in its own sizes.)
	for name, r := range map[string]io.Reader{
		"one byte": iotest.OneByteReader(bytes.NewReader(good)),
		"23 bytes": iotest.HalfReader(bytes.NewReader(good)),
		"47 bytes": bytes.NewReader(good),
	} {
		sr := NewSnapshotReader(r)
		if _, err := io.CopyBuffer(struct{ io.Writer }{io.Discard}, sr, make([]byte, 47)); err != nil || !sr.Verified() || sr.Checksum() != want {
			t.Errorf("%s: err %v, verified %v, checksum %s", name, err, sr.Verified(), sr.Checksum())
		}
	}
	bad := append([]byte(nil), good...)
	bad[100] ^= 1
	for name, data := range map[string][]byte{"flipped bit": bad, "truncated": good[:len(good)-100], "tiny": good[:10]} {
		sr := NewSnapshotReader(bytes.NewReader(data))
		if _, err := io.Copy(io.Discard, sr); !errors.Is(err, ErrCorrupt) || sr.Verified() {
			t.Errorf("%s: err %v, verified %v; want ErrCorrupt", name, err, sr.Verified())
		}
	}
}

func hexString(sum [sha256.Size]byte) string {
	b := sum[:]
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = append(out, digits[c>>4], digits[c&15])
	}
	return string(out)
}

func TestDirStoreShowsAFileOnlyAfterCommit(t *testing.T) {
	ctx := context.Background()
	st := DirStore{Root: t.TempDir()}
	data := fakeSnapshot(4096)
	tmp, err := st.WriteTemp(ctx, "snaps/a.db", bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if ok, _ := st.Exists(ctx, "snaps/a.db"); ok {
		t.Fatal("the snapshot is visible before it was committed")
	}
	sum, size, err := VerifyStored(ctx, st, tmp, "")
	if err != nil || size != int64(len(data)) {
		t.Fatalf("verify: %v, size %d", err, size)
	}
	if err := st.Commit(ctx, tmp, "snaps/a.db", sum, "ns/a/uid-a"); err != nil {
		t.Fatal(err)
	}
	if ok, _ := st.Exists(ctx, "snaps/a.db"); !ok {
		t.Fatal("the committed snapshot is missing")
	}
	if ok, _ := st.Exists(ctx, tmp); ok {
		t.Error("the partial file stayed after commit")
	}
	if got, _ := st.RecordedChecksum(ctx, "snaps/a.db"); got != sum {
		t.Errorf("recorded checksum %q, want %q", got, sum)
	}
	// A damaged file fails its recorded checksum.
	if err := os.WriteFile(filepath.Join(st.Root, "snaps/a.db"), fakeSnapshot(4000), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := VerifyStored(ctx, st, "snaps/a.db", sum); !errors.Is(err, ErrCorrupt) {
		t.Errorf("a replaced file passed verification: %v", err)
	}
	if err := st.Remove(ctx, "snaps/a.db"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Open(ctx, "snaps/a.db"); !errors.Is(err, ErrNotFound) {
		t.Errorf("open after remove: %v", err)
	}
	if _, err := st.WriteTemp(ctx, "../escape.db", bytes.NewReader(data)); err == nil {
		t.Error("a name outside the volume was accepted")
	}
}

func TestReasonNamesWhatToFix(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{ErrBucketNotFound, etcdv1.ReasonBucketNotFound},
		{minio.ErrorResponse{Code: "NoSuchBucket"}, etcdv1.ReasonBucketNotFound},
		{minio.ErrorResponse{Code: "InvalidAccessKeyId"}, etcdv1.ReasonCredentialsRejected},
		{minio.ErrorResponse{Code: "SignatureDoesNotMatch"}, etcdv1.ReasonCredentialsRejected},
		{ErrNoSpace, etcdv1.ReasonPVCFull},
		{ErrCorrupt, etcdv1.ReasonSnapshotCorrupt},
		{ErrNotFound, etcdv1.ReasonSnapshotNotFound},
		{errors.New("something else"), etcdv1.ReasonStorageError},
	} {
		if got := Reason(tc.err); got != tc.want {
			t.Errorf("Reason(%v) = %s, want %s", tc.err, got, tc.want)
		}
	}
}
