package agent

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/archive"
	"github.com/quorumkeeper/etcd-operator/internal/snapshotstore"
	"github.com/quorumkeeper/etcd-operator/internal/testetcd"
	"github.com/quorumkeeper/etcd-operator/internal/testminio"
)

const archivePrefix = "ns/src/archive"

// archiving runs an archiver of cli into store until the test ends; caughtUp waits until it
// stored every revision up to rev.
type archiving struct {
	mu    sync.Mutex
	chain archive.Chain
	more  chan struct{}
	stop  func()
}

func startArchiving(t *testing.T, cli *clientv3.Client, store archive.Store) *archiving {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	a := &archiving{more: make(chan struct{}, 1)}
	arch := &archive.Archiver{Etcd: cli, Store: store, Prefix: archivePrefix, Owner: "ns/nightly/uid", Interval: 20 * time.Millisecond,
		Report: func(_ context.Context, p archive.Progress) {
			a.mu.Lock()
			a.chain = p.Chain
			a.mu.Unlock()
			select {
			case a.more <- struct{}{}:
			default:
			}
		}}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = arch.Run(ctx) }()
	a.stop = func() { cancel(); wg.Wait() }
	t.Cleanup(a.stop)
	return a
}

// caughtUp waits until the archive holds every revision up to rev and its time covers the
// call (etcd confirmed the watch current after it), as a restore to a time needs.
func (a *archiving) caughtUp(t *testing.T, rev int64) {
	t.Helper()
	now := time.Now()
	deadline := time.After(time.Minute)
	for {
		a.mu.Lock()
		last, until := a.chain.Last, a.chain.Until
		a.mu.Unlock()
		if last >= rev && !until.Before(now) {
			return
		}
		select {
		case <-a.more:
		case <-deadline:
			t.Fatalf("the archive did not reach revision %d and %v within a minute (at %d, %v)", rev, now, last, until)
		}
	}
}

// archivedEvents reads every stored segment's events back, in order.
func archivedEvents(t *testing.T, store archive.Store) []archive.Event {
	t.Helper()
	ctx := context.Background()
	names, err := store.List(ctx, archivePrefix+"/segments/")
	if err != nil {
		t.Fatal(err)
	}
	var out []archive.Event
	for _, m := range archive.ParseNames(names) {
		rc, err := store.Open(ctx, m.Name)
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(rc)
		_ = rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		seg, err := archive.Decode(data)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, seg.Events...)
	}
	return out
}

func revisionNow(t *testing.T, cli *clientv3.Client) int64 {
	t.Helper()
	resp, err := cli.Get(context.Background(), "\x00", clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header.Revision
}

// TestRestoreToARevisionOrATimeHoldsExactlyTheWritesUpToIt archives a real etcd while it is
// written, takes a full snapshot in the middle, and restores from that snapshot plus the
// archive to a revision and to a time: each restored member holds exactly what the source
// held at that revision (every key, value and mod revision, and the revision itself), a
// leased key keeps its lease; a target the archive does not reach yet is refused.
func TestRestoreToARevisionOrATimeHoldsExactlyTheWritesUpToIt(t *testing.T) {
	t.Run("volume", func(t *testing.T) { restoreToTargets(t, snapshotstore.DirStore{Root: t.TempDir()}) })
	t.Run("S3", func(t *testing.T) {
		srv := testminio.Start(t, testminio.Options{})
		store, err := snapshotstore.NewS3Store(snapshotstore.S3Config{Endpoint: srv.Endpoint, Bucket: srv.Bucket(t, "archive"), ForcePathStyle: true,
			AccessKeyID: testminio.AccessKey, SecretKey: testminio.SecretKey})
		if err != nil {
			t.Fatal(err)
		}
		restoreToTargets(t, store)
	})
}

// restoreToTargets is TestRestoreToARevisionOrATimeHoldsExactlyTheWritesUpToIt on one store.
func restoreToTargets(t *testing.T, store archive.Store) {
	src, arch, base, lease := archivedSource(t, store, 200, 50)
	writeAfterBase(t, src, lease)
	last := revisionNow(t, src)
	arch.caughtUp(t, last)
	arch.stop()

	restore := func(target archive.Target) (Result, *clientv3.Client) {
		t.Helper()
		return restoreArchived(t, store, base.URI, target)
	}

	mid := base.Revision + (last-base.Revision)/2
	res, dst := restore(archive.Target{Revision: mid})
	if dst == nil || res.Revision != mid {
		t.Fatalf("restore to revision %d: %+v", mid, res)
	}
	assertRestored(t, src, dst, mid, 150)

	// A time between two changes the archiver received apart: the earlier is in, the later not.
	at, want := timeBetweenTwoChanges(t, archivedEvents(t, store), base.Revision+10, last-5)
	res, dst = restore(archive.Target{Time: at})
	if dst == nil || res.Revision != want {
		t.Fatalf("restore to %v: %+v, want revision %d", at, res, want)
	}
	assertRestored(t, src, dst, want, 150)
	checkLeaseRestored(t, dst, lease, 300)

	if res, _ := restore(archive.Target{Revision: last + 100}); res.Reason != etcdv1.ReasonArchiveBehindTarget {
		t.Errorf("a restore beyond the archive: %+v, want %s", res, etcdv1.ReasonArchiveBehindTarget)
	}
}

// archivedSource starts an etcd archived into store, writes keys into it (putKeys), takes
// the base snapshot snaps/base.db, and grants a lease of 300 s for what comes after.
func archivedSource(t *testing.T, store archive.Store, keys, bigEvery int) (*clientv3.Client, *archiving, Result, clientv3.LeaseID) {
	t.Helper()
	ctx := context.Background()
	src := testetcd.Start(t, t.TempDir(), "src", testetcd.FreePort(t))
	arch := startArchiving(t, src, store)
	arch.caughtUp(t, revisionNow(t, src)) // the archive started
	putKeys(t, src, keys, bigEvery)
	cfg := clientv3.Config{Endpoints: src.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()}
	base := TakeSnapshot(ctx, SnapshotJob{Etcd: cfg, Store: store, Name: "snaps/base.db", URI: "pvc://x/snaps/base.db", Owner: "ns/base/uid-1"})
	if base.Reason != "" {
		t.Fatalf("snapshot failed: %+v", base)
	}
	lease, err := src.Grant(ctx, 300)
	if err != nil {
		t.Fatal(err)
	}
	return src, arch, base, lease.ID
}

// restoreArchived restores the snapshot snaps/base.db (at uri) and the archive up to target
// into a new member and starts it; the member's client is nil when the restore failed.
func restoreArchived(t *testing.T, store archive.Store, uri string, target archive.Target) (Result, *clientv3.Client) {
	t.Helper()
	peerPort := testetcd.FreePort(t)
	volume := t.TempDir()
	job := RestoreJob{
		Store: store, Name: "snaps/base.db", URI: uri,
		DataDir: filepath.Join(volume, "data"), Staging: filepath.Join(volume, "restore"),
		Etcdutl: testetcd.Bin(t, "etcdutl"), Etcd: testetcd.Bin(t, "etcd"), MemberName: "dst", ClusterToken: "tok",
		InitialCluster: fmt.Sprintf("dst=http://127.0.0.1:%d", peerPort), PeerURL: fmt.Sprintf("http://127.0.0.1:%d", peerPort),
		Archive: &ArchiveTarget{Prefix: archivePrefix, Target: target},
	}
	res := Restore(context.Background(), job)
	if res.Reason != "" {
		return res, nil
	}
	return res, testetcd.Start(t, job.DataDir, "dst", peerPort)
}

// A lease that ends deletes every key it holds in one revision (kube-apiserver hangs its
// events on shared leases): a revision of more deletes than etcd takes in one transaction by
// default (128) is replayed all the same.
func TestRestoreReplaysARevisionOfManyChanges(t *testing.T) {
	ctx := context.Background()
	store := snapshotstore.DirStore{Root: t.TempDir()}
	src, arch, base, lease := archivedSource(t, store, 10, 1000)
	for i := range 300 {
		if _, err := src.Put(ctx, fmt.Sprintf("/events/%03d", i), "e", clientv3.WithLease(lease)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := src.Revoke(ctx, lease); err != nil {
		t.Fatal(err)
	}
	last := revisionNow(t, src)
	arch.caughtUp(t, last)
	arch.stop()
	res, dst := restoreArchived(t, store, base.URI, archive.Target{Revision: last})
	if dst == nil || res.Revision != last {
		t.Fatalf("restore to revision %d, after the lease's 300 deletes: %+v", last, res)
	}
	assertRestored(t, src, dst, last, 10)
}

// writeAfterBase writes puts, deletes of keys in the snapshot, transactions of two puts, and
// puts with the lease, 60 in all.
func writeAfterBase(t *testing.T, src *clientv3.Client, lease clientv3.LeaseID) {
	t.Helper()
	ctx := context.Background()
	for i := range 60 {
		var err error
		switch i % 4 {
		case 0:
			_, err = src.Put(ctx, fmt.Sprintf("/after/%03d", i), fmt.Sprintf("v%d", i))
		case 1:
			_, err = src.Delete(ctx, fmt.Sprintf("/k/%05d", i))
		case 2:
			_, err = src.Txn(ctx).Then(clientv3.OpPut(fmt.Sprintf("/txn/%03d", i), "t"), clientv3.OpPut(fmt.Sprintf("/k/%05d", i), "changed")).Commit()
		case 3:
			_, err = src.Put(ctx, fmt.Sprintf("/leased/%03d", i), "l", clientv3.WithLease(lease))
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// timeBetweenTwoChanges is a time between two archived changes the archiver received apart,
// the earlier of revision in (after, before): the earlier is restored to it, the later not.
// It returns that time and the earlier's revision.
func timeBetweenTwoChanges(t *testing.T, events []archive.Event, after, before int64) (time.Time, int64) {
	t.Helper()
	for i := len(events) - 2; i > 0; i-- {
		if e, next := events[i], events[i+1]; e.Revision > after && e.Revision < before && next.Time.After(e.Time) {
			return e.Time.Add(next.Time.Sub(e.Time) / 2), e.Revision
		}
	}
	t.Fatal("no two archived changes received apart")
	return time.Time{}, 0
}

// checkLeaseRestored: the leased keys restored carry the lease, granted with its TTL.
func checkLeaseRestored(t *testing.T, dst *clientv3.Client, lease clientv3.LeaseID, ttl int64) {
	t.Helper()
	ctx := context.Background()
	leased, err := dst.Get(ctx, "/leased/", clientv3.WithPrefix())
	if err != nil || len(leased.Kvs) == 0 || leased.Kvs[0].Lease != int64(lease) {
		t.Fatalf("the leased keys restored: %v %v, want lease %x", leased, err, lease)
	}
	if got, err := dst.TimeToLive(ctx, lease); err != nil || got.GrantedTTL != ttl {
		t.Errorf("the restored lease: %+v %v, want granted TTL %d", got, err, ttl)
	}
}
