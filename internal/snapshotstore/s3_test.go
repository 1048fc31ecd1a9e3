package snapshotstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"github.com/minio/minio-go/v7"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/testetcd"
	"github.com/quorumkeeper/etcd-operator/internal/testminio"
)

func s3Config(srv *testminio.Server, bucket string) S3Config {
	return S3Config{Endpoint: srv.Endpoint, Bucket: bucket, Region: "us-east-1", ForcePathStyle: true,
		AccessKeyID: testminio.AccessKey, SecretKey: testminio.SecretKey, CAPEM: srv.CAPEM}
}

func newS3Store(t *testing.T, cfg S3Config) *S3Store {
	t.Helper()
	st, err := NewS3Store(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestS3StoreAgainstMinIO runs the store against one real MinIO over https (it starts in
// about ten seconds on a busy machine, so the cases share it).
func TestS3StoreAgainstMinIO(t *testing.T) {
	srv := testminio.Start(t, testminio.Options{TLS: true})
	srv.Bucket(t, "snapshots")
	t.Run("a snapshot is visible only after commit", func(t *testing.T) { t.Parallel(); testCommit(t, srv) })
	t.Run("failures name what to fix", func(t *testing.T) { t.Parallel(); testFailures(t, srv) })
	t.Run("a broken stream leaves no object", func(t *testing.T) { t.Parallel(); testBrokenStream(t, srv) })
	t.Run("a growing file is uploaded as it grows", func(t *testing.T) { t.Parallel(); testGrowingFile(t, srv) })
	t.Run("a commit retried after it landed succeeds", func(t *testing.T) { t.Parallel(); testCommitRetried(t, srv) })
}

// testCommitRetried: the client retries a completion whose answer it lost; the retry meets
// the object the first try made (PreconditionFailed). The same owner and checksum make it
// that commit, a success, with the partial object gone; the same owner with other content,
// or another owner with the same content, is a collision (ErrAlreadyExists), and the
// stored object stays as the first commit left it.
func testCommitRetried(t *testing.T, srv *testminio.Server) {
	ctx := context.Background()
	st := newS3Store(t, s3Config(srv, "snapshots"))
	name := ObjectKey("retried/", FileOf{Namespace: "ns", Cluster: "c", Name: "one"})
	const owner = "ns/one/uid-1"
	commit := func(data []byte, owner string) (string, error) {
		return writeAndCommit(t, st, name, data, owner)
	}
	data := fakeSnapshot(8192)
	sum, err := commit(data, owner)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := commit(data, owner); err != nil {
		t.Fatalf("the same commit again: %v, want success", err)
	}
	if keys, err := st.List(ctx, "retried/"); err != nil || !slices.Equal(keys, []string{name}) {
		t.Fatalf("objects after the retried commit %v (%v), want only %s", keys, err, name)
	}
	if _, err := commit(fakeSnapshot(4096), owner); !errors.Is(err, ErrAlreadyExists) {
		t.Errorf("the same owner with other content: %v, want ErrAlreadyExists", err)
	}
	if _, err := commit(data, "ns/one/uid-2"); !errors.Is(err, ErrAlreadyExists) {
		t.Errorf("another owner with the same content: %v, want ErrAlreadyExists", err)
	}
	if _, _, err := VerifyStored(ctx, st, name, sum); err != nil {
		t.Errorf("the first commit's object was changed: %v", err)
	}
}

// testCommit: a file larger than one upload part is invisible under its name until Commit,
// Commit records its checksum and removes the partial object, a replaced object fails
// verification against the recorded checksum, and a removed one is reported missing.
func testCommit(t *testing.T, srv *testminio.Server) {
	ctx := context.Background()
	st := newS3Store(t, s3Config(srv, "snapshots"))
	if err := st.CheckBucket(ctx); err != nil {
		t.Fatal(err)
	}
	name := ObjectKey("nightly/", FileOf{Namespace: "ns", Cluster: "c", Name: "one"})
	data := fakeSnapshot(PartSize + PartSize/2) // two parts: the multipart path
	tmp, err := st.WriteTemp(ctx, name, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := st.Exists(ctx, name); ok || err != nil {
		t.Fatalf("the snapshot is visible before commit (exists %v, err %v)", ok, err)
	}
	sum, size, err := VerifyStored(ctx, st, tmp, "")
	if err != nil || size != int64(len(data)) {
		t.Fatalf("verifying the partial object: %v, size %d of %d", err, size, len(data))
	}
	if err := st.Commit(ctx, tmp, name, sum, "ns/one/uid-1"); err != nil {
		t.Fatal(err)
	}
	checkCommitted(t, srv, st, name, sum)
}

// checkCommitted: only the committed object is left, its checksum is recorded, a replaced
// object fails verification, and a removed one is reported missing.
func checkCommitted(t *testing.T, srv *testminio.Server, st *S3Store, name, sum string) {
	ctx := context.Background()
	keys, err := st.List(ctx, "nightly/")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(keys, []string{name}) {
		t.Fatalf("objects after commit %v, want only %s", keys, name)
	}
	if got, err := st.RecordedChecksum(ctx, name); got != sum || err != nil {
		t.Errorf("recorded checksum %q (%v), want %q", got, err, sum)
	}
	if _, _, err := VerifyStored(ctx, st, name, sum); err != nil {
		t.Errorf("the committed object fails verification: %v", err)
	}
	// Something else overwrites the object: the recorded checksum catches it.
	other := fakeSnapshot(4096)
	if _, err := srv.Admin.PutObject(ctx, "snapshots", name, bytes.NewReader(other), int64(len(other)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := VerifyStored(ctx, st, name, sum); !errors.Is(err, ErrCorrupt) {
		t.Errorf("a replaced object passed verification: %v", err)
	}
	if err := st.Remove(ctx, name); err != nil {
		t.Fatal(err)
	}
	if err := st.Remove(ctx, name); err != nil {
		t.Errorf("removing a missing object: %v", err)
	}
	if _, err := st.Open(ctx, name); !errors.Is(err, ErrNotFound) || Reason(err) != etcdv1.ReasonSnapshotNotFound {
		t.Errorf("opening a removed object: %v", err)
	}
}

// testBrokenStream: a reader that fails after more than a part was uploaded fails the upload,
// and no object is left under either name (the agent's stream reports a broken or damaged
// snapshot this way while the upload runs).
func testBrokenStream(t *testing.T, srv *testminio.Server) {
	ctx := context.Background()
	st := newS3Store(t, s3Config(srv, "snapshots"))
	broken := errors.New("the stream broke off")
	r := io.MultiReader(bytes.NewReader(fakeSnapshot(PartSize+PartSize/2)), iotest.ErrReader(broken))
	if _, err := st.WriteTemp(ctx, "broken/a.db", r); !errors.Is(err, broken) {
		t.Fatalf("the upload of a broken stream: %v, want its error", err)
	}
	if keys, err := st.List(ctx, "broken/"); len(keys) > 0 || err != nil {
		t.Errorf("objects left after a broken upload: %v (%v)", keys, err)
	}
}

// growing is a GrowingFile in memory whose writer the test drives.
type growing struct {
	mu    sync.Mutex
	grown *sync.Cond
	data  []byte
	n     int64 // written
	done  bool
	err   error
}

func newGrowing(data []byte) *growing {
	g := &growing{data: data}
	g.grown = sync.NewCond(&g.mu)
	return g
}

// Read is never called: the S3 store reads a GrowingFile by its parts.
func (g *growing) Read([]byte) (int, error) { panic("a GrowingFile was read as a stream") }

func (g *growing) ReadAt(p []byte, off int64) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if off >= g.n {
		return 0, io.EOF
	}
	return copy(p, g.data[off:g.n]), nil
}

func (g *growing) Await(off int64) (int64, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for g.n <= off && !g.done {
		g.grown.Wait()
	}
	switch {
	case g.n > off:
		return g.n, nil
	case g.err != nil:
		return g.n, g.err
	}
	return g.n, io.EOF
}

// write grows the file to its end in pieces of a third of a part, then ends it with err.
func (g *growing) write(err error) {
	for g.n < int64(len(g.data)) {
		time.Sleep(time.Millisecond)
		g.mu.Lock()
		g.n = min(g.n+PartSize/3, int64(len(g.data)))
		g.mu.Unlock()
		g.grown.Broadcast()
	}
	g.mu.Lock()
	g.done, g.err = true, err
	g.mu.Unlock()
	g.grown.Broadcast()
}

// testGrowingFile: a file of several parts is uploaded while it grows, stored whole and
// committed (copied in several parts); one whose writing fails after several parts leaves no
// object and no unfinished upload.
func testGrowingFile(t *testing.T, srv *testminio.Server) {
	ctx := context.Background()
	st := newS3Store(t, s3Config(srv, "snapshots"))
	data := fakeSnapshot(copyPartSize + PartSize + 1000)
	f := newGrowing(data)
	go f.write(nil)
	tmp, err := st.WriteTemp(ctx, "growing/a.db", f)
	if err != nil {
		t.Fatal(err)
	}
	sum := ChecksumPrefix + hexString(sha256.Sum256(data))
	if got, size, err := VerifyStored(ctx, st, tmp, ""); err != nil || size != int64(len(data)) || got != sum {
		t.Fatalf("the stored growing file: %v, %d of %d bytes, checksum %s", err, size, len(data), got)
	}
	// Larger than a part of the server-side copy: the commit copies it in several.
	if err := st.Commit(ctx, tmp, "growing/a.db", sum, "ns/a/uid-a"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := VerifyStored(ctx, st, "growing/a.db", sum); err != nil {
		t.Fatalf("the committed copy: %v", err)
	}
	if got, err := st.RecordedChecksum(ctx, "growing/a.db"); got != sum || err != nil {
		t.Errorf("recorded checksum %q (%v), want %q", got, err, sum)
	}
	failed := errors.New("etcd's hash does not match")
	f = newGrowing(data)
	go f.write(failed)
	if _, err := st.WriteTemp(ctx, "growing/b.db", f); !errors.Is(err, failed) {
		t.Fatalf("the upload of a file whose writing failed: %v, want its error", err)
	}
	if keys, err := st.List(ctx, "growing/b"); len(keys) > 0 || err != nil {
		t.Errorf("objects left after a failed upload: %v (%v)", keys, err)
	}
	for u := range srv.Admin.ListIncompleteUploads(ctx, "snapshots", "growing/", true) {
		t.Errorf("an unfinished upload was left: %+v", u)
	}
}

// testFailures provokes each failure a person fixes outside the operator and checks the
// reason it is reported with.
func testFailures(t *testing.T, srv *testminio.Server) {
	ctx := context.Background()
	plain, secure := srv, srv

	wrongSecret := s3Config(plain, "snapshots")
	wrongSecret.SecretKey = "not-the-secret"
	unknownKey := s3Config(plain, "snapshots")
	unknownKey.AccessKeyID = "nobody"
	untrusted := s3Config(secure, "snapshots")
	untrusted.CAPEM = nil
	closed := s3Config(plain, "snapshots")
	closed.Endpoint = fmt.Sprintf("http://127.0.0.1:%d", testetcd.FreePort(t)) // a CA for http is ignored

	for _, tc := range []struct {
		name string
		cfg  S3Config
		want string
	}{
		{"missing bucket", s3Config(plain, "no-such-bucket"), etcdv1.ReasonBucketNotFound},
		{"wrong secret", wrongSecret, etcdv1.ReasonCredentialsRejected},
		{"unknown access key", unknownKey, etcdv1.ReasonCredentialsRejected},
		{"https without its CA", untrusted, etcdv1.ReasonCertificateNotTrusted},
		{"nothing listening", closed, etcdv1.ReasonEndpointUnreachable},
	} {
		err := newS3Store(t, tc.cfg).CheckBucket(ctx)
		if got := Reason(err); got != tc.want {
			t.Errorf("%s: reason %s (%v), want %s", tc.name, got, err, tc.want)
		}
	}
	// With its CA, the https endpoint works end to end.
	st := newS3Store(t, s3Config(secure, "snapshots"))
	data := fakeSnapshot(1 << 20)
	tmp, err := st.WriteTemp(ctx, "a.db", bytes.NewReader(data))
	if err != nil {
		t.Fatalf("writing over https with the CA: %v", err)
	}
	if _, _, err := VerifyStored(ctx, st, tmp, ""); err != nil {
		t.Fatal(err)
	}
}
