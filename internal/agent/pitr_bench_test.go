package agent

import (
	"context"
	"fmt"
	"io/fs"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/quorumkeeper/etcd-operator/internal/archive"
	"github.com/quorumkeeper/etcd-operator/internal/snapshotstore"
	"github.com/quorumkeeper/etcd-operator/internal/testetcd"
	"github.com/quorumkeeper/etcd-operator/internal/testminio"
)

// druidMBPerSecond is etcd-druid's published restore figure, a fact of another project measured
// on its own hardware and data: 344 MB of full snapshot plus 232 MB of deltas restored in
// 2 min 24 s, (344+232)/144 = 4.0 MB/s. It is printed beside ours for scale, not as a
// baseline of this run.
const druidMBPerSecond = (344.0 + 232.0) / 144.0

// BenchmarkRestoreReplay measures a restore to a revision that replays 20000 changes of 1 KiB
// values after the base snapshot: the whole restore agent (download, scratch etcd, replay,
// snapshot, etcdutl), once from a directory store and once from a real MinIO (the S3 store
// users run), both archived at once from the same etcd and the same base. It reports changes
// replayed per second and MB/s of what each read (the base snapshot and the segments), with an
// s3- prefix for MinIO and the MinIO restore's time over the directory's (s3-x-dir); beside
// them the floor: the same restore by hand (the base downloaded with a plain S3 client,
// etcdutl snapshot restore of it, etcd started on it, the same 20000 puts by a client), as
// by-hand-changes/s and how many times its time each agent restore takes (x-by-hand: the
// floor without the download, the base being a local file already; s3-x-by-hand: with it).
// x-druid and s3-x-druid are the MB/s over etcd-druid's published figure (druidMBPerSecond).
func BenchmarkRestoreReplay(b *testing.B) {
	const changes = 20000
	value := strings.Repeat("v", 1024)
	f := archiveForReplay(b, changes, value)
	took := make([]time.Duration, len(f.stores))
	b.ResetTimer()
	for range b.N {
		for i, store := range f.stores {
			took[i] += restoreFrom(b, store, f.bases[i], f.last)
		}
	}
	b.StopTimer()
	download, replay := restoreByHand(b, f.srv, changes, value)
	floors := []time.Duration{replay, download + replay}
	var mbps [2]float64
	for i, prefix := range []string{"", "s3-"} {
		each := took[i].Seconds() / float64(b.N)
		mbps[i] = float64(f.stored[i]) / (1 << 20) / each
		b.ReportMetric(changes/each, prefix+"changes/s")
		b.ReportMetric(mbps[i], prefix+"MB/s")
		b.ReportMetric(changes/floors[i].Seconds(), prefix+"by-hand-changes/s")
		// How many times the by-hand replay's time the agent's restore takes.
		b.ReportMetric(each/floors[i].Seconds(), prefix+"x-by-hand")
		b.ReportMetric(mbps[i]/druidMBPerSecond, prefix+"x-druid")
	}
	b.ReportMetric(took[1].Seconds()/took[0].Seconds(), "s3-x-dir")
	b.Logf("etcd-druid publishes 344 MB full + 232 MB deltas restored in 2 min 24 s (%.1f MB/s, its hardware and data); "+
		"this restore read %.1f MB at %.2f MB/s from a directory, %.1f MB at %.2f MB/s from MinIO",
		druidMBPerSecond, float64(f.stored[0])/(1<<20), mbps[0], float64(f.stored[1])/(1<<20), mbps[1])
}

// replayFixture is what BenchmarkRestoreReplay restores: a directory store and a MinIO
// bucket ("restore"), each with the same base snapshot and an archive of the changes after it.
type replayFixture struct {
	srv    *testminio.Server
	stores []archive.Store
	bases  []Result // the base snapshot in each store
	stored []int64  // the bytes in each store: the base and the segments
	last   int64    // the revision of the last change
}

// archiveForReplay archives a real etcd into both stores at once, takes the base snapshot
// into each, then puts changes values and waits for both archives to hold them.
func archiveForReplay(b *testing.B, changes int, value string) replayFixture {
	b.Helper()
	ctx := context.Background()
	src := testetcd.Start(b, b.TempDir(), "src", testetcd.FreePort(b))
	f := replayFixture{srv: testminio.Start(b, testminio.Options{})}
	dir := snapshotstore.DirStore{Root: b.TempDir()}
	f.stores = []archive.Store{dir, benchS3Store(b, f.srv, "restore")}
	recs, stop := startArchivers(src, f.stores)
	cfg := clientv3.Config{Endpoints: src.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()}
	for _, store := range f.stores {
		// No write in between: both bases hold the same revision.
		base := TakeSnapshot(ctx, SnapshotJob{Etcd: cfg, Store: store, Name: "snaps/base.db", URI: "pvc://x/snaps/base.db", Owner: "ns/base/uid-1"})
		if base.Reason != "" {
			b.Fatalf("snapshot: %+v", base)
		}
		f.bases = append(f.bases, base)
	}
	if f.bases[0].Revision != f.bases[1].Revision {
		b.Fatalf("the bases differ: revision %d in the directory, %d in MinIO", f.bases[0].Revision, f.bases[1].Revision)
	}
	for i := range changes {
		resp, err := src.Put(ctx, fmt.Sprintf("/bench/%06d", i%5000), value)
		if err != nil {
			b.Fatal(err)
		}
		f.last = resp.Header.Revision
	}
	for _, rec := range recs {
		rec.waitStored(b, f.last)
	}
	stop()
	f.stored = []int64{dirBytes(b, dir.Root), bucketBytes(b, f.srv, "restore")}
	return f
}

// restoreFrom runs the restore agent from base in store to revision last, and returns how
// long it took.
func restoreFrom(b *testing.B, store archive.Store, base Result, last int64) time.Duration {
	b.Helper()
	start := time.Now()
	peerPort := testetcd.FreePort(b)
	volume := b.TempDir()
	res := Restore(context.Background(), RestoreJob{Store: store, Name: "snaps/base.db", URI: base.URI,
		DataDir: filepath.Join(volume, "data"), Staging: filepath.Join(volume, "restore"),
		Etcdutl: testetcd.Bin(b, "etcdutl"), Etcd: testetcd.Bin(b, "etcd"), MemberName: "dst", ClusterToken: "tok",
		InitialCluster: fmt.Sprintf("dst=http://127.0.0.1:%d", peerPort), PeerURL: fmt.Sprintf("http://127.0.0.1:%d", peerPort),
		Archive: &ArchiveTarget{Prefix: archivePrefix, Target: archive.Target{Revision: last}}})
	if res.Reason != "" || res.Revision != last {
		b.Fatalf("restore: %+v", res)
	}
	return time.Since(start)
}

// restoreByHand is the floor: the same work by hand, once: a plain S3 client downloads the
// base from srv's bucket "restore" (download), then etcdutl restores it, etcd starts on it and
// a client puts the same changes, one per revision, as fast as they are acked (replay).
func restoreByHand(b *testing.B, srv *testminio.Server, changes int, value string) (download, replay time.Duration) {
	b.Helper()
	ctx := context.Background()
	start := time.Now()
	baseFile := filepath.Join(b.TempDir(), "base.db")
	if err := srv.Admin.FGetObject(ctx, "restore", "snaps/base.db", baseFile, minio.GetObjectOptions{}); err != nil {
		b.Fatalf("downloading the base: %v", err)
	}
	download = time.Since(start)
	start = time.Now()
	peerPort := testetcd.FreePort(b)
	dataDir := filepath.Join(b.TempDir(), "data")
	out, err := exec.CommandContext(ctx, testetcd.Bin(b, "etcdutl"), "snapshot", "restore", baseFile,
		"--data-dir", dataDir, "--name", "hand", "--initial-cluster", fmt.Sprintf("hand=http://127.0.0.1:%d", peerPort),
		"--initial-advertise-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", peerPort), "--initial-cluster-token", "tok").CombinedOutput()
	if err != nil {
		b.Fatalf("etcdutl snapshot restore: %v: %s", err, out)
	}
	dst := testetcd.Start(b, dataDir, "hand", peerPort)
	for i := range changes {
		if _, err := dst.Put(ctx, fmt.Sprintf("/bench/%06d", i%5000), value); err != nil {
			b.Fatal(err)
		}
	}
	return download, time.Since(start)
}

// dirBytes is the size of every file under root: the base snapshot and the segments a
// restore reads.
func dirBytes(b *testing.B, root string) int64 {
	var n int64
	err := filepath.WalkDir(root, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		n += info.Size()
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	return n
}

// bucketBytes is the size of every object in a bucket of srv: the base snapshot and the
// segments a restore reads.
func bucketBytes(b *testing.B, srv *testminio.Server, bucket string) int64 {
	var n int64
	for obj := range srv.Admin.ListObjects(context.Background(), bucket, minio.ListObjectsOptions{Recursive: true}) {
		if obj.Err != nil {
			b.Fatal(obj.Err)
		}
		n += obj.Size
	}
	return n
}
