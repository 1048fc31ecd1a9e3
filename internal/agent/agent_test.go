package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/agent/request"
	"github.com/quorumkeeper/etcd-operator/internal/snapshotstore"
	"github.com/quorumkeeper/etcd-operator/internal/testetcd"
	"github.com/quorumkeeper/etcd-operator/internal/testminio"
	"github.com/quorumkeeper/etcd-operator/internal/testrestore"
)

func TestChooseMemberTakesAnUpToDateFollower(t *testing.T) {
	down := errors.New("down")
	for _, tc := range []struct {
		name    string
		members []MemberState
		want    string
	}{
		{"follower before leader", []MemberState{{Name: "a", ClientURL: "u", Leader: true, AppliedIndex: 100}, {Name: "b", ClientURL: "u", AppliedIndex: 100}}, "b"},
		{"lagging follower skipped", []MemberState{{Name: "a", ClientURL: "u", Leader: true, AppliedIndex: 5000}, {Name: "b", ClientURL: "u", AppliedIndex: 10}}, "a"},
		{"unreachable skipped", []MemberState{{Name: "a", ClientURL: "u", Err: down, AppliedIndex: 9000}, {Name: "b", ClientURL: "u", Leader: true, AppliedIndex: 10}}, "b"},
		{"most applied follower", []MemberState{{Name: "a", ClientURL: "u", AppliedIndex: 98}, {Name: "b", ClientURL: "u", AppliedIndex: 100}, {Name: "c", ClientURL: "u", Leader: true, AppliedIndex: 100}}, "b"},
		{"none answers", []MemberState{{Name: "a", Err: down}}, ""},
	} {
		got, ok := ChooseMember(tc.members)
		if got.Name != tc.want || ok != (tc.want != "") {
			t.Errorf("%s: chose %q (%v), want %q", tc.name, got.Name, ok, tc.want)
		}
	}
}

// TestSnapshotAndRestoreKeepEveryKeyAndTheRevision takes a snapshot of a real etcd while a
// writer runs, stores it in a directory, restores it with the real etcdutl into a new member,
// and compares every key, value and the revision with the source at the snapshot's revision.
func TestSnapshotAndRestoreKeepEveryKeyAndTheRevision(t *testing.T) {
	ctx := context.Background()
	src := testetcd.Start(t, t.TempDir(), "src", testetcd.FreePort(t))
	putKeys(t, src, 2000, 200)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // a writer during the snapshot, bounded in count
		defer wg.Done()
		for i := 0; i < 5000; i++ {
			select {
			case <-stop:
				return
			default:
			}
			_, _ = src.Put(ctx, fmt.Sprintf("/w/%05d", i), "x")
		}
	}()
	store := snapshotstore.DirStore{Root: t.TempDir()}
	cfg := clientv3.Config{Endpoints: src.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()}
	res := TakeSnapshot(ctx, SnapshotJob{Etcd: cfg, Store: store, Name: "snaps/one.db", URI: "pvc://x/snaps/one.db", Owner: "ns/one/uid-1"})
	close(stop)
	wg.Wait()
	if res.Reason != "" {
		t.Fatalf("snapshot failed: %s: %s", res.Reason, res.Message)
	}
	if res.Revision == 0 || res.Member != "src" || !strings.HasPrefix(res.Checksum, "sha256:") || res.EtcdVersion != "3.6.16" {
		t.Fatalf("incomplete result %+v", res)
	}
	// A second snapshot to the same name never overwrites the first.
	if again := TakeSnapshot(ctx, SnapshotJob{Etcd: cfg, Store: store, Name: "snaps/one.db"}); again.Reason != etcdv1.ReasonSnapshotFileExists {
		t.Errorf("second snapshot to the same name: %+v", again)
	}

	peerPort := testetcd.FreePort(t)
	volume := t.TempDir()
	job := RestoreJob{
		Store: store, Name: "snaps/one.db", URI: res.URI,
		DataDir: filepath.Join(volume, "data"), Staging: filepath.Join(volume, "restore"),
		Etcdutl: testetcd.Bin(t, "etcdutl"), MemberName: "dst", ClusterToken: "tok",
		InitialCluster: fmt.Sprintf("dst=http://127.0.0.1:%d", peerPort), PeerURL: fmt.Sprintf("http://127.0.0.1:%d", peerPort),
	}
	// A file that is not the one whose checksum was recorded is refused, leaving no member.
	wrong := job
	wrong.Checksum = snapshotstore.ChecksumPrefix + strings.Repeat("0", 64)
	if r := Restore(ctx, wrong); r.Reason != etcdv1.ReasonSnapshotCorrupt {
		t.Fatalf("restore with another checksum: %+v, want %s", r, etcdv1.ReasonSnapshotCorrupt)
	}
	if _, err := os.Stat(job.DataDir); !os.IsNotExist(err) {
		t.Fatalf("a refused restore left a data directory: %v", err)
	}
	if r := Restore(ctx, job); r.Reason != "" || r.Checksum != res.Checksum {
		t.Fatalf("restore: %+v", r)
	}
	// Restoring again over a member's data does nothing.
	if r := Restore(ctx, job); r.Reason != "" || r.Checksum != "" {
		t.Fatalf("second restore touched the data: %+v", r)
	}
	dst := testetcd.Start(t, job.DataDir, "dst", peerPort)
	assertRestored(t, src, dst, res.Revision, 2000)
}

// The delete agent deletes only the file its snapshot wrote: another snapshot's file of the
// same name stays (the agent succeeds, saying so), its own goes with what is recorded
// beside it, and a file stored without an owner goes only for the snapshot that recorded
// its checksum.
func TestDeleteRemovesOnlyTheSnapshotsOwnFile(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	store := snapshotstore.DirStore{Root: root}
	flags := request.Store{Dir: root}
	const name, uri, first, second = "shared/nightly.db", "pvc://b/shared/nightly.db", "ns1/nightly/uid-1", "ns2/nightly/uid-2"
	data := []byte("a snapshot")
	tmp, err := store.WriteTemp(ctx, name, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Commit(ctx, tmp, name, "sha256:first", first); err != nil {
		t.Fatal(err)
	}
	exists := func() bool {
		ok, err := store.Exists(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if r := removeSnapshot(ctx, fileOwner{name: name, uri: uri, owner: second}, flags); r.Reason != "" || r.Message == MessageDeleted || !exists() {
		t.Fatalf("another snapshot's delete: %+v; the file exists: %v", r, exists())
	}
	if r := removeSnapshot(ctx, fileOwner{name: name, uri: uri, owner: second, checksum: "sha256:first"}, flags); r.Message == MessageDeleted || !exists() {
		t.Fatalf("another snapshot's delete with the same checksum: %+v", r)
	}
	if r := removeSnapshot(ctx, fileOwner{name: name, uri: uri, owner: first}, flags); r.Reason != "" || r.Message != MessageDeleted || exists() {
		t.Fatalf("the owner's delete: %+v; the file exists: %v", r, exists())
	}
	if owner, err := store.RecordedOwner(ctx, name); !errors.Is(err, snapshotstore.ErrNotFound) {
		t.Fatalf("the owner record outlived the file: %q, %v", owner, err)
	}
	checkDeleteOfAFileWithoutOwner(ctx, t, root, flags, exists)
}

// checkDeleteOfAFileWithoutOwner stores, as an operator that recorded no owner would, the file
// shared/nightly.db with only its checksum, and checks that only the snapshot that recorded
// that checksum deletes it.
func checkDeleteOfAFileWithoutOwner(ctx context.Context, t *testing.T, root string, flags request.Store, exists func() bool) {
	t.Helper()
	const name, uri, first, second = "shared/nightly.db", "pvc://b/shared/nightly.db", "ns1/nightly/uid-1", "ns2/nightly/uid-2"
	data := []byte("a snapshot")
	// A file stored by an operator that recorded no owner, only its checksum.
	if err := os.MkdirAll(filepath.Join(root, "shared"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, name), data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, name+".sha256"), []byte("sha256:old\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := removeSnapshot(ctx, fileOwner{name: name, uri: uri, owner: second}, flags); r.Message == MessageDeleted || !exists() {
		t.Fatalf("a failed snapshot (no checksum) deleted a file without an owner: %+v", r)
	}
	if r := removeSnapshot(ctx, fileOwner{name: name, uri: uri, owner: first, checksum: "sha256:old"}, flags); r.Message != MessageDeleted || exists() {
		t.Fatalf("the snapshot that recorded the file's checksum: %+v; the file exists: %v", r, exists())
	}
}

// putKeys writes n keys /k/00000.., every bigEvery-th value 100 KiB.
func putKeys(t *testing.T, cli *clientv3.Client, n, bigEvery int) {
	t.Helper()
	big := strings.Repeat("v", 100<<10)
	for i := range n {
		val := fmt.Sprintf("value-%d", i)
		if i%bigEvery == 0 {
			val = big + val
		}
		if _, err := cli.Put(context.Background(), fmt.Sprintf("/k/%05d", i), val); err != nil {
			t.Fatal(err)
		}
	}
}

// assertRestored compares every key, value and mod revision of dst with src at revision, and
// checks dst is a new cluster exactly at that revision holding at least minKeys keys.
func assertRestored(t *testing.T, src, dst *clientv3.Client, revision int64, minKeys int) {
	t.Helper()
	if got := testrestore.Compare(t, src, dst, revision, minKeys); got != revision {
		t.Errorf("restored revision %d, snapshot revision %d", got, revision)
	}
}

func TestRestoreRefusesACorruptSnapshot(t *testing.T) {
	ctx := context.Background()
	store := snapshotstore.DirStore{Root: t.TempDir()}
	if err := os.WriteFile(filepath.Join(store.Root, "bad.db"), bytes.Repeat([]byte("x"), 4096), 0o600); err != nil {
		t.Fatal(err)
	}
	volume := t.TempDir()
	r := Restore(ctx, RestoreJob{Store: store, Name: "bad.db", URI: "pvc://c/bad.db", DataDir: filepath.Join(volume, "data"),
		Staging: filepath.Join(volume, "restore"), Etcdutl: testetcd.Bin(t, "etcdutl"), MemberName: "m",
		InitialCluster: "m=http://127.0.0.1:1", PeerURL: "http://127.0.0.1:1", ClusterToken: "t"})
	if r.Reason != etcdv1.ReasonSnapshotCorrupt {
		t.Errorf("corrupt snapshot: %+v", r)
	}
	if _, err := os.Stat(filepath.Join(volume, "data")); !os.IsNotExist(err) {
		t.Error("a failed restore left a data directory")
	}
	if r := Restore(ctx, RestoreJob{Store: store, Name: "missing.db", DataDir: filepath.Join(volume, "data"), Staging: filepath.Join(volume, "restore")}); r.Reason != etcdv1.ReasonSnapshotNotFound {
		t.Errorf("missing snapshot: %+v", r)
	}
}

// TestSnapshotThroughS3 takes a snapshot of a real etcd into a real MinIO bucket over https
// with a private CA (given as the agents get it, in the environment) and restores it from
// there: only the complete object is left in the bucket, its recorded checksum is the
// snapshot's, and the restored member holds every key at the snapshot's revision.
func TestSnapshotThroughS3(t *testing.T) {
	ctx := context.Background()
	srv := testminio.Start(t, testminio.Options{TLS: true})
	bucket := srv.Bucket(t, "snapshots")
	t.Setenv(EnvAccessKeyID, testminio.AccessKey)
	t.Setenv(EnvSecretKey, testminio.SecretKey)
	flags := request.Store{S3Endpoint: srv.Endpoint, S3Bucket: bucket, S3PathStyle: true}
	untrusted, err := openStore(flags)
	if err != nil {
		t.Fatal(err)
	}
	if err := untrusted.(*snapshotstore.S3Store).CheckBucket(ctx); snapshotstore.Reason(err) != etcdv1.ReasonCertificateNotTrusted {
		t.Fatalf("without the CA: %v; want %s", err, etcdv1.ReasonCertificateNotTrusted)
	}
	t.Setenv(EnvS3CA, string(srv.CAPEM))
	opened, err := openStore(flags)
	if err != nil {
		t.Fatal(err)
	}
	store := opened.(*snapshotstore.S3Store)
	src := testetcd.Start(t, t.TempDir(), "src", testetcd.FreePort(t))
	putKeys(t, src, 500, 100)
	cfg := clientv3.Config{Endpoints: src.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()}
	key := snapshotstore.ObjectKey("nightly/", snapshotstore.FileOf{Namespace: "ns", Cluster: "src", Name: "one"})
	res := TakeSnapshot(ctx, SnapshotJob{Etcd: cfg, Store: store, Name: key, URI: "s3://snapshots/" + key, Owner: "ns/one/uid-1"})
	if res.Reason != "" {
		t.Fatalf("snapshot failed: %s: %s", res.Reason, res.Message)
	}
	if keys, err := store.List(ctx, ""); err != nil || len(keys) != 1 || keys[0] != key {
		t.Fatalf("objects in the bucket %v (%v), want only %s", keys, err, key)
	}
	if sum, err := store.RecordedChecksum(ctx, key); err != nil || sum != res.Checksum {
		t.Fatalf("recorded checksum %q (%v), the agent reported %q", sum, err, res.Checksum)
	}
	if owner, err := store.RecordedOwner(ctx, key); err != nil || owner != "ns/one/uid-1" {
		t.Fatalf("recorded owner %q (%v)", owner, err)
	}
	peerPort := testetcd.FreePort(t)
	volume := t.TempDir()
	job := RestoreJob{
		Store: store, Name: key, URI: res.URI, Checksum: res.Checksum,
		DataDir: filepath.Join(volume, "data"), Staging: filepath.Join(volume, "restore"),
		Etcdutl: testetcd.Bin(t, "etcdutl"), MemberName: "dst", ClusterToken: "tok",
		InitialCluster: fmt.Sprintf("dst=http://127.0.0.1:%d", peerPort), PeerURL: fmt.Sprintf("http://127.0.0.1:%d", peerPort),
	}
	if r := Restore(ctx, job); r.Reason != "" {
		t.Fatalf("restore: %+v", r)
	}
	dst := testetcd.Start(t, job.DataDir, "dst", peerPort)
	assertRestored(t, src, dst, res.Revision, 500)
}
