package snapshotstore

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/minio/minio-go/v7"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/testminio"
)

// Who may delete which file: the owner recorded with it, or, for a file stored before
// owners were recorded, the snapshot whose status recorded that very file's checksum.
func TestMayDelete(t *testing.T) {
	const a, b, sum, other = "ns1/nightly/uid-a", "ns2/nightly/uid-b", "sha256:aa", "sha256:bb"
	for _, tc := range []struct {
		name                       string
		recordedOwner, recordedSum string
		owner, checksum            string
		want                       bool
	}{
		{"its own file", a, sum, a, sum, true},
		{"its own file, no checksum in its status (Failed after the commit)", a, sum, a, "", true},
		{"another namespace's snapshot of the same name", a, sum, b, "", false},
		{"another snapshot, even with the same checksum", a, sum, b, sum, false},
		{"an earlier snapshot of the same name (another UID)", "ns1/nightly/uid-old", sum, a, sum, false},
		{"no owner recorded, its checksum recorded in its status", "", sum, a, sum, true},
		{"no owner recorded, another checksum", "", other, a, sum, false},
		{"no owner recorded, nothing in its status (it failed)", "", sum, a, "", false},
		{"no owner, no checksum anywhere", "", "", a, "", false},
	} {
		if got := MayDelete(tc.recordedOwner, tc.recordedSum, tc.owner, tc.checksum); got != tc.want {
			t.Errorf("%s: MayDelete = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// testOwnedCommit runs against a real store: the owner is recorded with the file; a second
// writer of the same name, with another owner, is refused at commit (ErrAlreadyExists) and
// leaves the first file, its checksum and its owner as they were; a file stored without an
// owner is not overwritten either. plant stores a file by other means, as an operator that
// recorded no owner did.
func testOwnedCommit(t *testing.T, st Store, plant func(name string, data []byte)) {
	t.Helper()
	ctx := context.Background()
	const name, first, second = "shared/nightly.db", "ns1/nightly/uid-1", "ns2/nightly/uid-2"
	commit := func(size int, owner string) (string, error) {
		return writeAndCommit(t, st, name, fakeSnapshot(size), owner)
	}
	if _, err := st.RecordedOwner(ctx, name); !errors.Is(err, ErrNotFound) {
		t.Fatalf("owner of a missing file: %v, want ErrNotFound", err)
	}
	sum1, err := commit(8192, first)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := st.RecordedOwner(ctx, name); got != first || err != nil {
		t.Fatalf("recorded owner %q (%v), want %q", got, err, first)
	}
	if _, err := commit(4096, second); !errors.Is(err, ErrAlreadyExists) || Reason(err) != etcdv1.ReasonSnapshotFileExists {
		t.Fatalf("a second writer's commit: %v, want ErrAlreadyExists", err)
	}
	if got, _ := st.RecordedOwner(ctx, name); got != first {
		t.Errorf("owner after the refused commit %q, want %q", got, first)
	}
	if _, _, err := VerifyStored(ctx, st, name, sum1); err != nil {
		t.Errorf("the first file was changed by the refused commit: %v", err)
	}
	if err := st.Remove(ctx, name); err != nil {
		t.Fatal(err)
	}
	if _, err := st.RecordedOwner(ctx, name); !errors.Is(err, ErrNotFound) {
		t.Errorf("owner after remove: %v, want ErrNotFound", err)
	}
	checkCommitKeepsAFileWithoutOwner(ctx, t, st, plant, commit)
}

// checkCommitKeepsAFileWithoutOwner plants shared/nightly.db as an operator that recorded no
// owner did, and checks that it reports no owner and that a commit over it (by commit, with
// another owner) is refused and leaves it, and no owner, as it was.
func checkCommitKeepsAFileWithoutOwner(ctx context.Context, t *testing.T, st Store, plant func(name string, data []byte), commit func(size int, owner string) (string, error)) {
	t.Helper()
	const name, second = "shared/nightly.db", "ns2/nightly/uid-2"
	// A file of an operator that recorded no owner.
	old := fakeSnapshot(2048)
	plant(name, old)
	if got, err := st.RecordedOwner(ctx, name); got != "" || err != nil {
		t.Errorf("owner of a file stored without one: %q (%v)", got, err)
	}
	if _, err := commit(4096, second); !errors.Is(err, ErrAlreadyExists) {
		t.Fatalf("commit over a file without an owner: %v, want ErrAlreadyExists", err)
	}
	if got, _ := st.RecordedOwner(ctx, name); got != "" {
		t.Errorf("the refused commit left its owner %q on a file it did not write", got)
	}
	rc, err := st.Open(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var have bytes.Buffer
	if _, err := have.ReadFrom(rc); err != nil || !bytes.Equal(have.Bytes(), old) {
		t.Errorf("the file without an owner was overwritten (%v)", err)
	}
}

func TestDirStoreRecordsTheOwnerAndNeverOverwrites(t *testing.T) {
	root := t.TempDir()
	testOwnedCommit(t, DirStore{Root: root}, func(name string, data []byte) {
		p := filepath.Join(root, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
	})
}

func TestS3StoreRecordsTheOwnerAndNeverOverwrites(t *testing.T) {
	srv := testminio.Start(t, testminio.Options{})
	srv.Bucket(t, "snapshots")
	st := newS3Store(t, s3Config(srv, "snapshots"))
	testOwnedCommit(t, st, func(name string, data []byte) {
		if _, err := srv.Admin.PutObject(context.Background(), "snapshots", name, bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	})
}

// writeAndCommit stores data under name as the agent does (a partial object, verified, then
// committed for owner): the checksum, and Commit's error.
func writeAndCommit(t *testing.T, st Store, name string, data []byte, owner string) (string, error) {
	t.Helper()
	ctx := context.Background()
	tmp, err := st.WriteTemp(ctx, name, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	sum, _, err := VerifyStored(ctx, st, tmp, "")
	if err != nil {
		t.Fatal(err)
	}
	return sum, st.Commit(ctx, tmp, name, sum, owner)
}
