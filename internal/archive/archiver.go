package archive

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/quorumkeeper/etcd-operator/internal/snapshotstore"
)

// Store is where segments go: the snapshot store, listable.
type Store interface {
	snapshotstore.Store
	List(ctx context.Context, prefix string) ([]string, error)
}

// Defaults of an Archiver's fields left zero.
const (
	DefaultInterval = 5 * time.Second
	DefaultMaxBytes = 8 << 20
	// idleIntervals: without a change, an empty segment closes the time every this many
	// intervals, so that a restore to a quiet moment finds it covered.
	idleIntervals = 12
	retryMin      = time.Second
	retryMax      = 30 * time.Second
	// storeTimeoutFloor and storeTimeoutRate make the default per-attempt deadline of a
	// store operation (Archiver.storeTimeout).
	storeTimeoutFloor = 10 * time.Second
	storeTimeoutRate  = 1 << 20 // bytes a second
)

// ErrStoreTimeout is the store error of an operation the store did not answer within the
// archiver's per-attempt deadline (Archiver.StoreTimeout): a store unreachable by dropped
// packets makes its writes hang rather than fail, and this is what is reported then.
var ErrStoreTimeout = errors.New("the store did not answer in time")

// Gap is revisions the archive lost: etcd compacted them before the archiver read them.
type Gap struct {
	From, To int64 // the revisions missing, From..To
	Time     time.Time
}

// Progress is what the archiver reports after each segment it stores and each gap.
type Progress struct {
	// Chain is the newest unbroken run of stored segments.
	Chain Chain
	// Gap is the newest gap this archiver met, if any.
	Gap *Gap
	// StoreError is why the last write to the store failed (ErrStoreTimeout: it was not
	// answered in time); "" once one succeeded. It is reported at every failed attempt, with
	// the chain as stored, so the reports go on while the store is out.
	StoreError error
}

// Archiver watches every key of a cluster and stores its changes as segments.
type Archiver struct {
	Etcd  *clientv3.Client
	Store Store
	// Prefix is the archive's directory in the store; Owner is recorded with every segment.
	Prefix, Owner string
	// Interval closes a segment with changes; MaxBytes closes one earlier.
	Interval time.Duration
	MaxBytes int
	// Report receives the progress; optional.
	Report func(context.Context, Progress)
	// Prune, when set, is the revision of the oldest snapshot kept: the segments that end
	// before it are deleted after each segment stored (0: none).
	Prune func(context.Context) (int64, error)
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// StoreTimeout bounds each attempt of each store operation (a segment's write, its
	// commit, a list, a removal): one the store did not answer within it is a store error
	// (ErrStoreTimeout), reported and retried like any other. Zero: derived from MaxBytes
	// (storeTimeout).
	StoreTimeout time.Duration
	// LeaseTimeout bounds each question of a lease's TTL (zero: DefaultLeaseTimeout). One etcd
	// does not answer ends the run with an error, rather than holding the segment, and the
	// watch behind it, for as long as etcd is silent while every report stops.
	LeaseTimeout time.Duration

	ttls map[int64]int64
	gap  *Gap
	// chain is the newest unbroken run as stored, kept as segments are stored (the store is
	// listed at the start and when pruning only).
	chain  Chain
	pruned time.Time
}

// pruneEvery is how often the archiver lists the store to prune it.
const pruneEvery = 5 * time.Minute

func (a *Archiver) now() time.Time {
	if a.Now != nil {
		return a.Now().UTC()
	}
	return time.Now().UTC()
}

func (a *Archiver) interval() time.Duration {
	if a.Interval > 0 {
		return a.Interval
	}
	return DefaultInterval
}

// storeTimeout is StoreTimeout, or by default storeTimeoutFloor plus the time a full segment
// (MaxBytes) takes to send at storeTimeoutRate: 18s with the defaults (8 MiB). A segment is
// sent in one request, so a healthy store answers in the time of the transfer plus a round
// trip or two; the floor covers what comes on top (a DNS lookup, a new TLS connection, the
// client's own retry of a dropped connection, a slow S3 answer) and 1 MiB/s is a link far
// slower than any a store is used over. The segment interval does not enter: it says how
// often a segment closes, not how long its write may take; the deadline is rather kept short
// next to it (a few intervals with the defaults) because it is how long an outage in which
// the store drops packets goes unreported while the lag grows.
func (a *Archiver) storeTimeout() time.Duration {
	if a.StoreTimeout > 0 {
		return a.StoreTimeout
	}
	return storeTimeoutFloor + time.Duration(a.maxBytes())*time.Second/storeTimeoutRate
}

// DefaultLeaseTimeout is LeaseTimeout's default: etcd answers a lease's TTL from its leader
// within its request timeout (about 5 s), or not at all.
const DefaultLeaseTimeout = 10 * time.Second

func (a *Archiver) leaseTimeout() time.Duration {
	if a.LeaseTimeout > 0 {
		return a.LeaseTimeout
	}
	return DefaultLeaseTimeout
}

func (a *Archiver) maxBytes() int {
	if a.MaxBytes > 0 {
		return a.MaxBytes
	}
	return DefaultMaxBytes
}

// Run archives until ctx ends. It resumes after the newest stored segment (the store is the
// source of truth), or, on an empty archive, at the cluster's next revision after an empty
// segment that marks where the archive starts. Store failures, and store operations not
// answered within StoreTimeout, are reported and retried (the watch waits meanwhile, so
// etcd's history holds what was not stored yet); a compaction past the next
// revision needed is a Gap, reported, and the archive starts again after it.
func (a *Archiver) Run(ctx context.Context) error {
	a.ttls = map[int64]int64{}
	next, err := a.start(ctx)
	if err != nil {
		return err
	}
	a.report(ctx, nil)
	for ctx.Err() == nil {
		next, err = a.follow(ctx, next)
		if err != nil && ctx.Err() == nil {
			return err
		}
	}
	return nil
}

// start is the revision to watch from: after the archive's newest segment when the archive
// is this cluster's history to continue (Continuable), else, for an archive with no segment,
// the cluster's next revision, the archive marked as this cluster's (ClusterMarker) first.
func (a *Archiver) start(ctx context.Context) (int64, error) {
	// Every change committed before asked has a revision the answer includes.
	asked := a.now()
	resp, err := a.Etcd.Get(ctx, "\x00", clientv3.WithCountOnly())
	if err != nil {
		return 0, fmt.Errorf("reading the cluster's revision: %w", err)
	}
	id, revision := resp.Header.ClusterId, resp.Header.Revision
	metas, err := a.list(ctx)
	if err != nil {
		return 0, err
	}
	marker := ClusterMarker(a.Prefix, id)
	if next := Resume(metas); next > 0 {
		var marked bool
		if err := a.retrying(ctx, a.attempting("looking for "+marker, func(ctx context.Context) (err error) {
			marked, err = a.Store.Exists(ctx, marker)
			return err
		})); err != nil {
			return 0, err
		}
		if err := Continuable(a.Prefix, next, id, revision, marked); err != nil {
			a.report(ctx, err)
			return 0, err
		}
		a.chain, _ = NewestChain(metas)
		a.gap = NewestGap(metas) // reported again: a restart does not clear it
		return next, nil
	}
	if err := a.storeObject(ctx, marker, fmt.Appendf(nil, "%016x\n", id)); err != nil {
		return 0, err
	}
	first := revision + 1
	return first, a.store(ctx, &Segment{First: first, Last: first - 1, Until: asked})
}

// ErrOtherHistory: the archive found under the prefix is not this cluster's history to
// continue; the archiver stops rather than append another history to it, which a restore
// would replay as if it were one.
var ErrOtherHistory = errors.New("the archive holds another history")

// ClusterMarker is the object that marks the archive under prefix as etcd cluster id's
// history, written before its first segment.
func ClusterMarker(prefix string, id uint64) string {
	return path.Join(prefix, fmt.Sprintf("etcd-cluster-%016x", id))
}

// Continuable says whether etcd cluster id, at revision, may continue the archive under
// prefix whose segments end before next: only the cluster marked (ClusterMarker) may, and
// only while the archive does not run past its revision. A cluster created again under the
// same name is another etcd cluster; one restored to an earlier revision has a history after
// it that the archive's newer revisions are not.
func Continuable(prefix string, next int64, id uint64, revision int64, marked bool) error {
	const fix = "move its objects away, or give the schedule another name, for a new archive to start; they still restore the cluster that wrote them"
	switch {
	case !marked:
		return fmt.Errorf("%w: %s is not the archive of etcd cluster %016x, this one (a cluster created or restored again under the same name): %s",
			ErrOtherHistory, prefix, id, fix)
	case next > revision+1:
		return fmt.Errorf("%w: %s runs to revision %d, past this cluster's revision %d (it was restored to an earlier revision): %s",
			ErrOtherHistory, prefix, next-1, revision, fix)
	}
	return nil
}

func (a *Archiver) list(ctx context.Context) ([]Meta, error) {
	var names []string
	err := a.retrying(ctx, a.attempting("listing the archive", func(ctx context.Context) (err error) {
		names, err = a.Store.List(ctx, a.Prefix+"/"+SegmentsDir+"/")
		return err
	}))
	return ParseNames(names), err
}

// follow watches from next and stores segments until the watch ends (ctx, or a compaction
// past next); it returns the revision to watch from again.
func (a *Archiver) follow(ctx context.Context, next int64) (int64, error) {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	watch := a.Etcd.Watch(wctx, "\x00", clientv3.WithFromKey(), clientv3.WithRev(next), clientv3.WithProgressNotify())
	o := &openSegment{seg: &Segment{First: next, Last: next - 1}}
	tick := time.NewTicker(a.interval())
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return o.seg.First, nil
		case <-tick.C:
			a.askRevision(ctx, o)
			if o.idle++; o.quiet(a.chain.Until) {
				continue
			}
			if err := a.flush(ctx, o.seg, a.until(o)); err != nil {
				return o.seg.First, err
			}
			o.next()
		case resp, ok := <-watch:
			if !ok {
				// The watch ended: ctx, or the client gave it up; Run decides, a moment later.
				return o.seg.First, wait(ctx, retryMin)
			}
			if done, next, err := a.received(ctx, o, resp); done {
				return next, err
			}
		}
	}
}

// openSegment is the segment being filled, its changes' size and the intervals it stayed
// empty, and how far the watch is known to be current: every change committed before
// confirmed has been received. asked are the answers of the cluster's revision not matched
// yet by what the watch delivered, oldest first.
type openSegment struct {
	seg        *Segment
	size, idle int
	asked      []askedRevision
	confirmed  time.Time
}

// askedRevision is a quorum read's revision and when it was asked: every change committed
// before then has a revision at most rev.
type askedRevision struct {
	at  time.Time
	rev int64
}

// maxAsked bounds the reads waiting for the watch to deliver their revision; a read is not
// counted while that many wait (the time then stays where the oldest of them puts it).
const maxAsked = 3

// askRevision reads the cluster's revision (a quorum read, bounded by the interval) for the
// watch to be matched against: once it has delivered that revision, every change committed
// before the read was asked has been received. A watch silently cut off delivers nothing, so
// the time the archive claims stands still; one at rest matches at once.
func (a *Archiver) askRevision(ctx context.Context, o *openSegment) {
	o.matched()
	if len(o.asked) >= maxAsked {
		return // no read while that many wait: it would not be counted
	}
	at := a.now()
	askCtx, cancel := context.WithTimeout(ctx, a.interval())
	defer cancel()
	if resp, err := a.Etcd.Get(askCtx, "\x00", clientv3.WithCountOnly()); err == nil {
		o.asked = append(o.asked, askedRevision{at: at, rev: resp.Header.Revision})
	}
	o.matched()
}

// matched confirms every read whose revision the watch has delivered.
func (o *openSegment) matched() {
	for len(o.asked) > 0 && o.asked[0].rev <= o.seg.Last {
		o.confirmed = later(o.confirmed, o.asked[0].at)
		o.asked = o.asked[1:]
	}
}

// until is the time the open segment closes at: every change committed before it is in it or
// an earlier one, as far as the watch is confirmed current (matched), and never before the
// chain's own time.
func (a *Archiver) until(o *openSegment) time.Time {
	return later(o.confirmed, a.chain.Until)
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// quiet says whether the open segment is to stay open at a tick: it holds nothing yet, and
// an empty one is due only every idleIntervals, and only when it can say more than the chain
// does (stored is its Until): while the watch is not confirmed current (a client silently
// reconnecting) the time is not closed.
func (o *openSegment) quiet(stored time.Time) bool {
	return len(o.seg.Events) == 0 && o.seg.Last < o.seg.First && (o.idle < idleIntervals || !o.confirmed.After(stored))
}

// next opens the segment after the one stored.
func (o *openSegment) next() {
	o.seg, o.size, o.idle = &Segment{First: o.seg.Last + 1, Last: o.seg.Last}, 0, 0
}

// received takes one watch response into the open segment, storing it when it is full;
// done says the watch is to start again, from next.
func (a *Archiver) received(ctx context.Context, o *openSegment, resp clientv3.WatchResponse) (done bool, next int64, err error) {
	if resp.CompactRevision > 0 {
		next, err = a.gapped(ctx, o.seg, resp.CompactRevision, a.until(o))
		return true, next, err
	}
	if err := resp.Err(); err != nil {
		// Not a compaction: the cluster went away for a moment; watch again from the first
		// revision not yet in a stored segment.
		if err := a.flush(ctx, o.seg, a.until(o)); err != nil {
			return true, o.seg.First, err
		}
		return true, o.seg.Last + 1, wait(ctx, retryMin)
	}
	at := a.now()
	for _, ev := range resp.Events {
		o.seg.Events = append(o.seg.Events, eventOf(ev, at))
		o.seg.Last = max(o.seg.Last, ev.Kv.ModRevision)
		o.size += len(ev.Kv.Key) + len(ev.Kv.Value) + 32
	}
	if resp.IsProgressNotify() {
		// Every revision up to the header's was sent: an idle cluster's time is covered.
		o.seg.Last = max(o.seg.Last, resp.Header.Revision)
	}
	o.matched()
	if o.size < a.maxBytes() {
		return false, 0, nil
	}
	if err := a.flush(ctx, o.seg, a.until(o)); err != nil {
		return true, o.seg.First, err
	}
	o.next()
	return false, 0, nil
}

func eventOf(ev *clientv3.Event, received time.Time) Event {
	e := Event{Revision: ev.Kv.ModRevision, Time: received, Key: bytes.Clone(ev.Kv.Key)}
	if ev.Type == mvccpb.DELETE {
		e.Delete = true
		return e
	}
	e.Value, e.Lease = bytes.Clone(ev.Kv.Value), ev.Kv.Lease
	return e
}

// gapped stores what was received before the compaction, reports the gap, and returns the
// compaction's revision: the first the watch can give again.
func (a *Archiver) gapped(ctx context.Context, seg *Segment, compacted int64, until time.Time) (int64, error) {
	if err := a.flush(ctx, seg, until); err != nil {
		return seg.Last + 1, err
	}
	a.gap = &Gap{From: seg.Last + 1, To: compacted - 1, Time: a.now()}
	a.chain = Chain{First: compacted, Last: compacted - 1}
	// The new run starts with an empty segment at the compaction: a restore across the gap
	// is refused (Plan), and one from a snapshot after it finds its start.
	if err := a.store(ctx, &Segment{First: compacted, Last: compacted - 1, Until: until}); err != nil {
		return compacted, err
	}
	a.report(ctx, nil)
	return compacted, nil
}

// flush closes seg at until and stores it, retrying the store until it takes it or ctx ends;
// then it prunes and reports.
func (a *Archiver) flush(ctx context.Context, seg *Segment, until time.Time) error {
	seg.Until = until
	if err := a.leases(ctx, seg); err != nil {
		return err
	}
	if err := a.store(ctx, seg); err != nil {
		return err
	}
	a.prune(ctx)
	a.report(ctx, nil)
	return nil
}

// leases records the TTL of each lease the segment's puts name, asked once per lease.
func (a *Archiver) leases(ctx context.Context, seg *Segment) error {
	seen := map[int64]bool{}
	for _, e := range seg.Events {
		if e.Lease == 0 || seen[e.Lease] {
			continue
		}
		seen[e.Lease] = true
		ttl, ok := a.ttls[e.Lease]
		if !ok {
			askCtx, cancel := context.WithTimeout(ctx, a.leaseTimeout())
			resp, err := a.Etcd.TimeToLive(askCtx, clientv3.LeaseID(e.Lease))
			cancel()
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if err != nil {
				// Recorded without its TTL, the lease would be granted for a second at a
				// restore: the run ends instead, and the next one archives from the chain.
				return fmt.Errorf("asking etcd the TTL of lease %x of revision %d: %w", e.Lease, e.Revision, err)
			}
			if resp.TTL > 0 {
				ttl = resp.GrantedTTL
			}
			if len(a.ttls) > 100_000 {
				a.ttls = map[int64]int64{}
			}
			a.ttls[e.Lease] = ttl
		}
		seg.Leases = append(seg.Leases, Lease{ID: e.Lease, TTL: ttl})
	}
	return nil
}

// store writes seg under its name (storeObject) and extends the chain with it. Until it is
// stored the chain stays where it is, so the lag reported grows for as long as the store is
// out, and the segment is held (the watch is not read meanwhile).
func (a *Archiver) store(ctx context.Context, seg *Segment) error {
	data, err := Encode(*seg)
	if err != nil {
		return err
	}
	if err := a.storeObject(ctx, SegmentName(a.Prefix, *seg), data); err != nil {
		return err
	}
	a.stored(*seg)
	return nil
}

// storeObject writes data under name, retrying until the store takes it or ctx ends. An
// object of that name stored already with this content (a retry whose commit had succeeded)
// counts as stored.
func (a *Archiver) storeObject(ctx context.Context, name string, data []byte) error {
	sum := sha256.Sum256(data)
	checksum := snapshotstore.ChecksumPrefix + hex.EncodeToString(sum[:])
	return a.retrying(ctx, func(ctx context.Context) error { return a.put(ctx, name, data, checksum) })
}

// retrying runs a store operation until it succeeds or ctx ends, backing off between
// attempts; each failed attempt, a timed out one too, is reported.
func (a *Archiver) retrying(ctx context.Context, op func(context.Context) error) error {
	for backoff := retryMin; ; backoff = min(2*backoff, retryMax) {
		err := op(ctx)
		if err == nil {
			return nil
		}
		a.report(ctx, err)
		if werr := wait(ctx, backoff); werr != nil {
			return werr
		}
	}
}

// stored extends the chain with seg, or starts a new one where seg does not continue it.
func (a *Archiver) stored(seg Segment) {
	if a.chain.First == 0 || !continues(Meta{First: seg.First, Last: seg.Last}, a.chain.Last+1) {
		a.chain = Chain{First: seg.First}
	}
	a.chain.Last = max(a.chain.Last, seg.Last)
	a.chain.Until = time.UnixMilli(seg.Until.UnixMilli()).UTC()
}

// put writes one segment: its temporary file, then its commit, each under its own deadline.
// A write or commit that timed out may have landed all the same: the retry writes the
// temporary file again and its commit meets the segment stored, with this checksum.
func (a *Archiver) put(ctx context.Context, name string, data []byte, checksum string) error {
	var tmp string
	err := a.attempt(ctx, "writing "+name, func(ctx context.Context) (err error) {
		tmp, err = a.Store.WriteTemp(ctx, name, bytes.NewReader(data))
		return err
	})
	if err != nil {
		return err
	}
	return a.attempt(ctx, "committing "+name, func(ctx context.Context) error {
		err := a.Store.Commit(ctx, tmp, name, checksum, a.Owner)
		if errors.Is(err, snapshotstore.ErrAlreadyExists) {
			if sum, rerr := a.Store.RecordedChecksum(ctx, name); rerr == nil && sum == checksum {
				return nil
			}
		}
		return err
	})
}

// attempting is op as one attempt (attempt) of the store operation what.
func (a *Archiver) attempting(what string, op func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error { return a.attempt(ctx, what, op) }
}

// attempt runs one attempt of a store operation under the per-attempt deadline
// (storeTimeout). One the store did not answer within it fails with ErrStoreTimeout. A store
// that does not heed its context (a file system that hangs) is waited for, since its
// operation may still land, but not silently: every storeTimeout it has not returned, the
// timeout is reported, so that the store error and the growing lag show meanwhile.
func (a *Archiver) attempt(ctx context.Context, what string, op func(context.Context) error) error {
	timeout := a.storeTimeout()
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- op(actx) }()
	timedOut := func(err error) error {
		return fmt.Errorf("%w: %s took more than %s: %w", ErrStoreTimeout, what, timeout, err)
	}
	// The operation gets a moment past its deadline to return with it.
	hung := time.NewTimer(timeout + timeout/2)
	defer hung.Stop()
	for {
		select {
		case err := <-done:
			if err != nil && ctx.Err() == nil && errors.Is(actx.Err(), context.DeadlineExceeded) {
				return timedOut(err)
			}
			return err
		case <-ctx.Done():
			return ctx.Err()
		case <-hung.C:
			a.report(ctx, timedOut(errors.New("it has not returned yet")))
			hung.Reset(timeout)
		}
	}
}

func (a *Archiver) prune(ctx context.Context) {
	if a.Prune == nil || a.now().Sub(a.pruned) < pruneEvery {
		return
	}
	a.pruned = a.now()
	oldest, err := a.Prune(ctx)
	if err != nil || oldest <= 0 {
		return
	}
	metas, err := a.list(ctx)
	if err != nil {
		return
	}
	for _, m := range Prunable(metas, oldest) {
		// Left for the next time when it fails; a store gone is met by the next write.
		if err := a.attempt(ctx, "removing "+m.Name, func(ctx context.Context) error { return a.Store.Remove(ctx, m.Name) }); err != nil {
			return
		}
	}
}

// report sends the progress: the newest chain as stored, the newest gap, the store's error.
// The reporter throttles what it sends on; the archiver calls it after every store.
func (a *Archiver) report(ctx context.Context, storeErr error) {
	if a.Report == nil {
		return
	}
	a.Report(ctx, Progress{Chain: a.chain, Gap: a.gap, StoreError: storeErr})
}

func wait(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
