package archive

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/quorumkeeper/etcd-operator/internal/snapshotstore"
	"github.com/quorumkeeper/etcd-operator/internal/testetcd"
)

// outageStore refuses every write while down.
type outageStore struct {
	Store
	down atomic.Bool
}

var errStoreDown = errors.New("the store is unreachable")

func (s *outageStore) WriteTemp(ctx context.Context, name string, r io.Reader) (string, error) {
	if s.down.Load() {
		return "", errStoreDown
	}
	return s.Store.WriteTemp(ctx, name, r)
}

// A store unreachable for a while, and no compaction meanwhile: the archiver reports the
// store's error, holds the segment and reads no further, and once the store is back stores
// every change in order, with no gap and no change twice: etcd kept the history it needed.
func TestAStoreOutageLosesNothingWhileEtcdKeepsTheHistory(t *testing.T) {
	cli := testetcd.Start(t, t.TempDir(), "src", testetcd.FreePort(t))
	store := &outageStore{Store: snapshotstore.DirStore{Root: t.TempDir()}}
	a, first := startArchive(t, cli, store)
	a.archiveMix(t, cli, "1")

	store.down.Store(true)
	writeMix(t, cli, "2")
	a.until(t, "the store's error", func(p Progress) bool { return errors.Is(p.StoreError, errStoreDown) })
	writeMix(t, cli, "3")
	store.down.Store(false)
	r3 := revisionOf(t, cli)
	a.storesTheWholeRun(t, cli, store, first, r3)
}

// hangingStore, while down, answers no write or commit: each hangs until its context ends,
// as over a network that drops the store's packets. With heedless, it does not even heed
// its context (a file system that hangs): it returns once the store is up again.
type hangingStore struct {
	Store
	heedless bool
	down     atomic.Bool
	up       chan struct{} // closed when the store comes back
}

func newHangingStore(t *testing.T, heedless bool) *hangingStore {
	return &hangingStore{Store: snapshotstore.DirStore{Root: t.TempDir()}, heedless: heedless, up: make(chan struct{})}
}

func (s *hangingStore) hang(ctx context.Context) error {
	if !s.down.Load() {
		return nil
	}
	if s.heedless {
		<-s.up
		return nil
	}
	<-ctx.Done()
	return ctx.Err()
}

func (s *hangingStore) backUp() {
	s.down.Store(false)
	close(s.up)
}

func (s *hangingStore) WriteTemp(ctx context.Context, name string, r io.Reader) (string, error) {
	if err := s.hang(ctx); err != nil {
		return "", err
	}
	return s.Store.WriteTemp(ctx, name, r)
}

func (s *hangingStore) Commit(ctx context.Context, tmp, name, checksum, owner string) error {
	if err := s.hang(ctx); err != nil {
		return err
	}
	return s.Store.Commit(ctx, tmp, name, checksum, owner)
}

// received is a report and when it came.
type received struct {
	p  Progress
	at time.Time
}

// lag is what the status says of it: the time from the newest moment stored to the report.
func (r received) lag() time.Duration { return r.at.Sub(r.p.Chain.Until) }

// untilTimedOut waits for a report of a store timeout.
func (r *running) untilTimedOut(t *testing.T, what string) received {
	t.Helper()
	p := r.until(t, what, func(p Progress) bool { return errors.Is(p.StoreError, ErrStoreTimeout) })
	return received{p: p, at: time.Now()}
}

// A store whose writes hang (its packets dropped) rather than fail: each write is cut at the
// archiver's deadline and reported as a store timeout within a bounded time, again at each
// retry, with the chain held where it was so that the lag grows; once the store is back,
// every change is stored in order, with no gap and no change twice.
func TestAStoreWhoseWritesHangIsReportedAndLosesNothing(t *testing.T) {
	storeOutageReported(t, newHangingStore(t, false))
}

// A store that does not even heed the deadline (a file system that hangs): the archiver
// waits for the write, which may still land, but reports the timeout meanwhile, again and
// again, and loses nothing once the write returns.
func TestAStoreThatIgnoresTheDeadlineIsReportedWhileItHangs(t *testing.T) {
	storeOutageReported(t, newHangingStore(t, true))
}

func storeOutageReported(t *testing.T, store *hangingStore) {
	const timeout = 300 * time.Millisecond
	cli := testetcd.Start(t, t.TempDir(), "src", testetcd.FreePort(t))
	a, first := startArchive(t, cli, store, func(a *Archiver) { a.StoreTimeout = timeout })
	r1 := a.archiveMix(t, cli, "1")

	store.down.Store(true)
	out := time.Now()
	writeMix(t, cli, "2")
	first1 := a.untilTimedOut(t, "the store's timeout")
	// The segment closes within an interval (20ms), its write is cut at the deadline; the
	// bound leaves room for a loaded machine.
	if took := first1.at.Sub(out); took > 10*time.Second {
		t.Errorf("the timeout was reported %s into the outage", took)
	}
	second := a.untilTimedOut(t, "the store's timeout again")
	for _, r := range []received{first1, second} {
		if r.p.Chain.Last < r1 || r.p.Chain.Last >= revisionOf(t, cli) || r.p.Chain.Until.After(out) {
			t.Fatalf("during the outage the archive claims %+v; it stored revisions up to %d before it", r.p.Chain, r1)
		}
	}
	if second.lag() <= first1.lag() || second.lag() < out.Sub(first1.p.Chain.Until)+timeout {
		t.Errorf("the lag went from %s to %s during the outage", first1.lag(), second.lag())
	}
	writeMix(t, cli, "3")
	r3 := revisionOf(t, cli)
	store.backUp()
	a.storesTheWholeRun(t, cli, store, first, r3)
}

// The per-attempt deadline: StoreTimeout when set, else 10s plus a full segment at 1 MiB/s
// (docs/backup-restore.md says 18s for the default 8Mi segments).
func TestTheStoreDeadlineFollowsTheSegmentSize(t *testing.T) {
	for _, tc := range []struct {
		a    Archiver
		want time.Duration
	}{
		{Archiver{}, 18 * time.Second},
		{Archiver{MaxBytes: 1 << 20, Interval: time.Minute}, 11 * time.Second},
		{Archiver{MaxBytes: 1 << 30}, 10*time.Second + 1024*time.Second},
		{Archiver{StoreTimeout: time.Second}, time.Second},
	} {
		if got := tc.a.storeTimeout(); got != tc.want {
			t.Errorf("MaxBytes %d, StoreTimeout %s: deadline %s, want %s", tc.a.MaxBytes, tc.a.StoreTimeout, got, tc.want)
		}
	}
}

// storesTheWholeRun: once the store is back, the archiver stores every change up to r3 in the
// run that began at first, with no gap and none twice, as etcd's own history has them.
func (a *running) storesTheWholeRun(t *testing.T, cli *clientv3.Client, store Store, first, r3 int64) {
	t.Helper()
	p := a.until(t, "revision r3 after the outage", func(p Progress) bool { return p.Chain.Last >= r3 && p.StoreError == nil })
	if p.Gap != nil || p.Chain.First != first {
		t.Fatalf("after the outage: %+v, want the run from %d and no gap", p, first)
	}
	a.stop()
	_, events, _ := archived(t, store)
	sameEvents(t, "across the outage", events, history(t, cli, first, r3))
}
