package agent

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/snapshotstore"
	"github.com/quorumkeeper/etcd-operator/internal/testminio"
)

// snapshotSize is the size of the files snapshotLike makes.
const snapshotSize = 3 << 20

// snapshotLike is a file that passes etcd's integrity check (its last 32 bytes are the sha256
// of what precedes them), and its checksum as the snapshot agent records it.
func snapshotLike(content string) ([]byte, string) {
	body := bytes.Repeat([]byte(content), snapshotSize/len(content))
	sum := sha256.Sum256(body)
	file := append(slices.Clip(body), sum[:]...)
	whole := sha256.Sum256(file)
	return file, snapshotstore.ChecksumPrefix + hex.EncodeToString(whole[:])
}

// The verification of a file in a volume (a PVC's directory): the file as recorded passes
// and reports its checksum and size; a file overwritten with another valid snapshot, a
// truncated one and a removed one fail with the reason a person acts on; a verification
// without the recorded checksum is refused rather than passed.
func TestVerifyAFileInAVolume(t *testing.T) {
	ctx := context.Background()
	store := snapshotstore.DirStore{Root: t.TempDir()}
	path := filepath.Join(store.Root, "snaps", "one.db")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	file, recorded := snapshotLike("the snapshot ")
	write := func(data []byte) {
		t.Helper()
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	job := VerifyJob{Store: store, Name: "snaps/one.db", URI: "pvc://c/snaps/one.db", Checksum: recorded}
	write(file)
	if r := Verify(ctx, job); r.Reason != "" || r.Checksum != recorded || r.SizeBytes != int64(len(file)) || r.URI != job.URI {
		t.Fatalf("the file as recorded: %+v", r)
	}
	if r := Verify(ctx, VerifyJob{Store: store, Name: job.Name, URI: job.URI}); r.Reason != etcdv1.ReasonInvalidArguments {
		t.Fatalf("without the recorded checksum: %+v, want %s", r, etcdv1.ReasonInvalidArguments)
	}
	other, _ := snapshotLike("another snapshot ")
	for name, tc := range map[string]struct {
		data   []byte // nil: removed
		reason string
	}{
		"overwritten": {other, etcdv1.ReasonSnapshotCorrupt},
		"truncated":   {file[:len(file)/2], etcdv1.ReasonSnapshotCorrupt},
		"removed":     {nil, etcdv1.ReasonSnapshotNotFound},
	} {
		if tc.data == nil {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
		} else {
			write(tc.data)
		}
		if r := Verify(ctx, job); r.Reason != tc.reason || r.Checksum != "" || !strings.Contains(r.Message, job.URI) {
			t.Errorf("%s: %+v, want %s naming %s", name, r, tc.reason, job.URI)
		}
		write(file)
	}
}

// The verify agent as its Job runs it, against a real MinIO: the stored object passes; the
// object overwritten behind the operator's back (metadata kept, so only the checksum the
// EtcdSnapshot recorded tells), removed (a bucket lifecycle rule), or read with rotated
// credentials fails, each with its reason in the result file and exit status 1.
func TestVerifyAgentAgainstS3(t *testing.T) {
	ctx := context.Background()
	srv := testminio.Start(t, testminio.Options{})
	bucket := srv.Bucket(t, "snapshots")
	file, recorded := snapshotLike("the snapshot ")
	other, _ := snapshotLike("another snapshot ")
	const key = "db/snap.db"
	put := func(data []byte) {
		t.Helper()
		if _, err := srv.Admin.PutObject(ctx, bucket, key, bytes.NewReader(data), int64(len(data)),
			minio.PutObjectOptions{UserMetadata: map[string]string{"Checksum": recorded}}); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv(EnvAccessKeyID, testminio.AccessKey)
	run := func(secret string) (int, Result) {
		t.Helper()
		return runVerifyAgentForResult(t, srv.Endpoint, bucket, key, recorded, secret)
	}
	put(file)
	if code, r := run(testminio.SecretKey); code != 0 || r.Reason != "" || r.Checksum != recorded || r.SizeBytes != int64(len(file)) {
		t.Fatalf("the stored object: exit %d, %+v", code, r)
	}
	if code, r := run("rotated-away"); code != 1 || r.Reason != etcdv1.ReasonCredentialsRejected {
		t.Errorf("rotated credentials: exit %d, %+v, want %s", code, r, etcdv1.ReasonCredentialsRejected)
	}
	put(other)
	if code, r := run(testminio.SecretKey); code != 1 || r.Reason != etcdv1.ReasonSnapshotCorrupt || !strings.Contains(r.Message, recorded+" was recorded") {
		t.Errorf("overwritten: exit %d, %+v, want %s", code, r, etcdv1.ReasonSnapshotCorrupt)
	}
	if err := srv.Admin.RemoveObject(ctx, bucket, key, minio.RemoveObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	if code, r := run(testminio.SecretKey); code != 1 || r.Reason != etcdv1.ReasonSnapshotNotFound {
		t.Errorf("removed: exit %d, %+v, want %s", code, r, etcdv1.ReasonSnapshotNotFound)
	}
}

// runVerifyAgentForResult runs the verify agent as its Job does, against key in bucket at
// endpoint with the secret key secret, and returns its exit status and the result it wrote.
func runVerifyAgentForResult(t *testing.T, endpoint, bucket, key, recorded, secret string) (int, Result) {
	t.Helper()
	t.Setenv(EnvSecretKey, secret)
	out := filepath.Join(t.TempDir(), "result")
	code := RunVerifyAgent([]string{"--result-file=" + out, "--s3-endpoint=" + endpoint, "--s3-bucket=" + bucket,
		"--s3-path-style", "--name=" + key, "--uri=s3://snapshots/" + key, "--checksum=" + recorded})
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	res, ok := ParseResult(string(data))
	if !ok {
		t.Fatalf("no result in %q", data)
	}
	return code, res
}
