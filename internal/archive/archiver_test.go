package archive

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/quorumkeeper/etcd-operator/internal/snapshotstore"
	"github.com/quorumkeeper/etcd-operator/internal/testetcd"
)

// running is an archiver running in the background and its reports.
type running struct {
	reports chan Progress
	stop    func()
}

func runArchiver(t *testing.T, cli *clientv3.Client, store Store, opts ...func(*Archiver)) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{reports: make(chan Progress, 1000)}
	a := &Archiver{Etcd: cli, Store: store, Prefix: "ns/c/archive", Owner: "ns/sched/uid", Interval: 20 * time.Millisecond,
		Report: func(_ context.Context, p Progress) {
			select {
			case r.reports <- p:
			default:
			}
		}}
	for _, o := range opts {
		o(a)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := a.Run(ctx); err != nil {
			t.Errorf("archiver: %v", err)
		}
	}()
	r.stop = func() { cancel(); wg.Wait() }
	t.Cleanup(r.stop)
	return r
}

// startArchive runs an archiver on a store with no archive yet and waits for it to start at
// etcd's next revision, which it returns.
func startArchive(t *testing.T, cli *clientv3.Client, store Store, opts ...func(*Archiver)) (*running, int64) {
	t.Helper()
	first := revisionOf(t, cli) + 1
	r := runArchiver(t, cli, store, opts...)
	r.until(t, "the archive's start", func(p Progress) bool { return p.Chain.First == first })
	return r, first
}

// archiveMix writes a mix tagged tag and waits until r has archived it; it returns etcd's
// revision after the mix.
func (r *running) archiveMix(t *testing.T, cli *clientv3.Client, tag string) int64 {
	t.Helper()
	writeMix(t, cli, tag)
	rev := revisionOf(t, cli)
	r.until(t, "revision r"+tag, func(p Progress) bool { return p.Chain.Last >= rev })
	return rev
}

// until waits for a report that satisfies ok, for at most a minute.
func (r *running) until(t *testing.T, what string, ok func(Progress) bool) Progress {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		select {
		case p := <-r.reports:
			if ok(p) {
				return p
			}
		case <-deadline:
			t.Fatalf("no report of %s within a minute", what)
		}
	}
}

func revisionOf(t *testing.T, cli *clientv3.Client) int64 {
	t.Helper()
	resp, err := cli.Get(context.Background(), "\x00", clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header.Revision
}

// writeMix writes puts, a put with a lease, a transaction of a put and a delete, and deletes.
func writeMix(t *testing.T, cli *clientv3.Client, tag string) {
	t.Helper()
	ctx := context.Background()
	lease, err := cli.Grant(ctx, 120)
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range []clientv3.Op{
		clientv3.OpPut("/a"+tag, "1"),
		clientv3.OpPut("/b"+tag, "leased", clientv3.WithLease(lease.ID)),
		clientv3.OpPut("/a"+tag, "2"),
		clientv3.OpDelete("/b" + tag),
	} {
		if _, err := cli.Do(ctx, op); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cli.Txn(ctx).Then(clientv3.OpPut("/c"+tag, "in a txn"), clientv3.OpDelete("/a"+tag)).Commit(); err != nil {
		t.Fatal(err)
	}
}

// history is etcd's own record of the changes from..to, as events.
func history(t *testing.T, cli *clientv3.Client, from, to int64) []Event {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out []Event
	for resp := range cli.Watch(ctx, "\x00", clientv3.WithFromKey(), clientv3.WithRev(from)) {
		if err := resp.Err(); err != nil {
			t.Fatal(err)
		}
		for _, ev := range resp.Events {
			if ev.Kv.ModRevision > to {
				return out
			}
			e := Event{Revision: ev.Kv.ModRevision, Key: ev.Kv.Key, Delete: ev.Type == mvccpb.DELETE}
			if !e.Delete {
				e.Value, e.Lease = ev.Kv.Value, ev.Kv.Lease
			}
			out = append(out, e)
		}
		if resp.Header.Revision >= to && len(out) > 0 && out[len(out)-1].Revision >= to {
			return out
		}
	}
	return out
}

// archived reads every stored segment back, in order, and returns their events without
// times, checking that the segments' times and revisions are consistent.
func archived(t *testing.T, store Store) ([]Meta, []Event, map[int64]int64) {
	t.Helper()
	ctx := context.Background()
	names, err := store.List(ctx, "ns/c/archive/segments/")
	if err != nil {
		t.Fatal(err)
	}
	metas := ParseNames(names)
	var events []Event
	leases := map[int64]int64{}
	var closed time.Time // the latest time an earlier segment closed at
	for _, m := range metas {
		seg := readStored(t, store, m.Name)
		if seg.First != m.First || seg.Last != m.Last {
			t.Fatalf("%s holds revisions %d..%d", m.Name, seg.First, seg.Last)
		}
		for _, e := range seg.Events {
			// A segment closed at Until holds, with the earlier ones, every change received
			// before Until: none of a later segment was.
			if e.Time.IsZero() || e.Time.Before(closed) {
				t.Errorf("%s: event at revision %d received at %v, before an earlier segment closed at %v", m.Name, e.Revision, e.Time, closed)
			}
			e.Time = time.Time{}
			events = append(events, e)
		}
		for _, l := range seg.Leases {
			leases[l.ID] = l.TTL
		}
		closed = later(closed, seg.Until)
	}
	return metas, events, leases
}

func readStored(t *testing.T, store Store, name string) Segment {
	t.Helper()
	rc, err := store.Open(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close() // read-only
	data, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	seg, err := Decode(data)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return seg
}

func sameEvents(t *testing.T, what string, got, want []Event) {
	t.Helper()
	norm := func(es []Event) []Event {
		out := make([]Event, len(es))
		for i, e := range es {
			e.Time = time.Time{}
			if len(e.Value) == 0 {
				e.Value = nil
			}
			out[i] = e
		}
		return out
	}
	if g, w := norm(got), norm(want); !reflect.DeepEqual(g, w) {
		t.Fatalf("%s: archived %d events, etcd's history has %d:\n%+v\nwant\n%+v", what, len(g), len(w), g, w)
	}
}

// TestArchiverKeepsEveryChangeAcrossARestartAndReportsACompactionGap runs the archiver against
// a real etcd: every put and delete (a lease's, a transaction's) is archived with its revision
// exactly as etcd's own history has it; a restarted archiver resumes after the last stored
// segment with nothing lost or repeated; a compaction while it was stopped is reported as a
// gap and the archive starts again at the compaction, never claiming the revisions lost.
func TestArchiverKeepsEveryChangeAcrossARestartAndReportsACompactionGap(t *testing.T) {
	cli := testetcd.Start(t, t.TempDir(), "src", testetcd.FreePort(t))
	writeMix(t, cli, "0") // before the archive: not in it
	store := snapshotstore.DirStore{Root: t.TempDir()}

	a1, first := startArchive(t, cli, store)
	r1 := a1.archiveMix(t, cli, "1")
	a1.stop()
	metas, events, leases := archived(t, store)
	sameEvents(t, "first run", events, history(t, cli, first, r1))
	if len(leases) != 1 {
		t.Errorf("leases recorded %v, want the one lease", leases)
	}
	for id, ttl := range leases {
		if id == 0 || ttl != 120 {
			t.Errorf("lease %x recorded with TTL %d, want 120", id, ttl)
		}
	}
	if metas[0].First != first || metas[0].Last != first-1 {
		t.Errorf("the archive starts with %+v, want an empty segment at %d", metas[0], first)
	}

	writeMix(t, cli, "2") // while no archiver runs: etcd's history keeps it
	r2 := revisionOf(t, cli)
	a2 := runArchiver(t, cli, store)
	p := a2.until(t, "revision r2", func(p Progress) bool { return p.Chain.Last >= r2 })
	if p.Chain.First != first || p.Gap != nil {
		t.Fatalf("after a restart: %+v, want the chain from %d and no gap", p, first)
	}
	a2.stop()
	_, events, _ = archived(t, store)
	sameEvents(t, "after a restart", events, history(t, cli, first, r2))

	archiveAcrossACompaction(t, cli, store, first, r2)
}

// archiveAcrossACompaction compacts while no archiver runs, then runs one: it reports the
// revisions lost, starts a new run at the compaction, and no restore crosses the gap.
func archiveAcrossACompaction(t *testing.T, cli *clientv3.Client, store Store, first, r2 int64) {
	t.Helper()
	before := history(t, cli, first, r2)
	writeMix(t, cli, "3")
	compacted := revisionOf(t, cli)
	if _, err := cli.Compact(context.Background(), compacted); err != nil {
		t.Fatal(err)
	}
	a3 := runArchiver(t, cli, store)
	p := a3.until(t, "the gap", func(p Progress) bool { return p.Gap != nil })
	if *p.Gap != (Gap{From: r2 + 1, To: compacted - 1, Time: p.Gap.Time}) || p.Chain.First != compacted {
		t.Fatalf("gap %+v, chain %+v; want revisions %d..%d lost, the chain from %d", *p.Gap, p.Chain, r2+1, compacted-1, compacted)
	}
	r4 := a3.archiveMix(t, cli, "4")
	a3.stop()
	// A restart reports the gap again, read from the archive, rather than clear it.
	a4 := runArchiver(t, cli, store)
	again := a4.until(t, "the gap again", func(p Progress) bool { return p.Gap != nil })
	if again.Gap.From != r2+1 || again.Gap.To != compacted-1 {
		t.Errorf("after a restart the gap is %+v; want revisions %d..%d", *again.Gap, r2+1, compacted-1)
	}
	a4.stop()
	metas, events, _ := archived(t, store)
	if _, err := Plan(metas, first-1, Target{Revision: r4}); !errors.Is(err, ErrGap) {
		t.Errorf("a restore across the gap: %v, want ErrGap", err)
	}
	if plan, err := Plan(metas, compacted, Target{Revision: r4}); err != nil || len(plan) == 0 {
		t.Errorf("a restore from a snapshot after the gap: %v %v", plan, err)
	}
	want := append(before, history(t, cli, compacted, r4)...)
	sameEvents(t, "after the gap", events, want)
	if !bytes.Equal(events[len(events)-1].Key, []byte("/a4")) {
		t.Errorf("the last event is %s", events[len(events)-1].Key)
	}
}

// TestArchiverEndsWhenEtcdDoesNotAnswerALeasesTTL: a segment naming a lease waits for the
// lease's TTL; when etcd does not answer (here its client holds the question back) the run
// ends with an error naming the lease within LeaseTimeout, rather than holding the segment and
// its reports for as long as etcd is silent; nothing is stored without the TTL.
func TestArchiverEndsWhenEtcdDoesNotAnswerALeasesTTL(t *testing.T) {
	cli := testetcd.Start(t, t.TempDir(), "src", testetcd.FreePort(t))
	silent, err := clientv3.New(clientv3.Config{Endpoints: cli.Endpoints(), DialTimeout: 5 * time.Second,
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(withholdLeaseTTL)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = silent.Close() })
	store := snapshotstore.DirStore{Root: t.TempDir()}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a := &Archiver{Etcd: silent, Store: store, Prefix: "ns/c/archive", Owner: "ns/sched/uid",
		Interval: 20 * time.Millisecond, LeaseTimeout: 300 * time.Millisecond}
	reported := make(chan struct{}, 1)
	a.Report = func(context.Context, Progress) {
		select {
		case reported <- struct{}{}:
		default:
		}
	}
	ended := make(chan error, 1)
	go func() { ended <- a.Run(ctx) }()
	// The run watches from the revision after its start: the leased put must come after it.
	select {
	case <-reported:
	case err := <-ended:
		t.Fatalf("the run ended before it started: %v", err)
	case <-ctx.Done():
		t.Fatal("the run did not start")
	}
	lease, err := cli.Grant(ctx, 120)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, "leased", "v", clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-ended:
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("lease %x", int64(lease.ID))) {
			t.Fatalf("the run ended with %v, want an error naming lease %x", err, int64(lease.ID))
		}
	case <-ctx.Done():
		t.Fatal("the run did not end while etcd withheld a lease's TTL")
	}
	if _, events, _ := archived(t, store); slices.ContainsFunc(events, func(e Event) bool { return string(e.Key) == "leased" }) {
		t.Fatal("the leased put was stored without its lease's TTL")
	}
}

// withholdLeaseTTL holds every question of a lease's TTL until its deadline: an etcd that does
// not answer it.
func withholdLeaseTTL(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if method == "/etcdserverpb.Lease/LeaseTimeToLive" {
		<-ctx.Done()
		return ctx.Err()
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

// An archive is continued only by the etcd cluster that wrote it: another one (a cluster
// created again under the same name, here a second etcd) ends its run at once with
// ErrOtherHistory, reported, and stores nothing, rather than append its history to the other
// one's, which a restore would replay as if it were one.
func TestArchiverDoesNotContinueAnotherClustersArchive(t *testing.T) {
	first := testetcd.Start(t, t.TempDir(), "first", testetcd.FreePort(t))
	store := snapshotstore.DirStore{Root: t.TempDir()}
	a, _ := startArchive(t, first, store)
	a.archiveMix(t, first, "1")
	a.stop()
	before, events, _ := archived(t, store)

	second := testetcd.Start(t, t.TempDir(), "second", testetcd.FreePort(t))
	writeMix(t, second, "x")
	writeMix(t, second, "y") // its revisions now run past the archive's: only the marker tells
	var reported []error
	b := &Archiver{Etcd: second, Store: store, Prefix: "ns/c/archive", Owner: "ns/sched/uid", Interval: 20 * time.Millisecond,
		Report: func(_ context.Context, p Progress) { reported = append(reported, p.StoreError) }}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := b.Run(ctx)
	if !errors.Is(err, ErrOtherHistory) || !strings.Contains(err.Error(), "is not the archive of etcd cluster") {
		t.Fatalf("the second cluster's run ended with %v; want ErrOtherHistory naming the fix", err)
	}
	if len(reported) == 0 || !errors.Is(reported[len(reported)-1], ErrOtherHistory) {
		t.Errorf("reported %v; want the refusal reported", reported)
	}
	after, afterEvents, _ := archived(t, store)
	if len(after) != len(before) || len(afterEvents) != len(events) {
		t.Errorf("the refused run changed the archive: %d segments, %d events; were %d, %d", len(after), len(afterEvents), len(before), len(events))
	}
}

func TestContinuable(t *testing.T) {
	for name, tc := range map[string]struct {
		next, revision int64
		marked         bool
		want           string // "" for none
	}{
		"the archive's cluster, behind it":            {next: 10, revision: 20, marked: true},
		"the archive's cluster, at its next revision": {next: 21, revision: 20, marked: true},
		"another cluster":                             {next: 10, revision: 20, want: "is not the archive of etcd cluster 00000000000000ab"},
		"restored to an earlier revision":             {next: 30, revision: 20, marked: true, want: "runs to revision 29, past this cluster's revision 20"},
	} {
		err := Continuable("p", tc.next, 0xab, tc.revision, tc.marked)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v; want it continued", name, err)
		case tc.want != "" && (!errors.Is(err, ErrOtherHistory) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v; want ErrOtherHistory saying %q", name, err, tc.want)
		}
	}
}

// While the archiver's connection to etcd is silent (packets dropped: here a proxy that stops
// forwarding), the archive's time does not move on: an empty segment closes the time only
// once etcd has answered a progress request sent at or after it, so a restore to a moment of
// the silence is not offered without the changes committed before it. Once the connection
// carries again, the time moves on.
func TestTheArchivesTimeStandsStillWhileEtcdIsSilent(t *testing.T) {
	cli := testetcd.Start(t, t.TempDir(), "src", testetcd.FreePort(t))
	proxy := newPausingProxy(t, cli.Endpoints()[0])
	through, err := clientv3.New(clientv3.Config{Endpoints: []string{proxy.endpoint}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = through.Close() })
	store := snapshotstore.DirStore{Root: t.TempDir()}
	a, _ := startArchive(t, through, store)
	a.archiveMix(t, cli, "1")
	a.until(t, "the time moving on", func(p Progress) bool { return time.Since(p.Chain.Until) < time.Second })

	proxy.pause()
	silent := time.Now()
	writeMix(t, cli, "2")                   // committed during the silence: not received
	deadline := time.After(3 * time.Second) // 150 intervals, 12 of which close an idle segment
	for waiting := true; waiting; {
		select {
		case p := <-a.reports:
			if p.Chain.Until.After(silent) {
				t.Fatalf("while etcd was silent the archive closed the time at %v, after the silence began (%v)", p.Chain.Until, silent)
			}
		case <-deadline:
			waiting = false
		}
	}
	proxy.resume()
	r2 := revisionOf(t, cli)
	a.until(t, "the changes of the silence and the time after it", func(p Progress) bool { return p.Chain.Last >= r2 && p.Chain.Until.After(silent) })
}

// pausingProxy forwards TCP to an address until paused, then holds every byte until resumed.
type pausingProxy struct {
	endpoint string
	mu       sync.Mutex
	paused   chan struct{} // closed while forwarding
}

func newPausingProxy(t *testing.T, target string) *pausingProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	p := &pausingProxy{endpoint: "http://" + l.Addr().String(), paused: make(chan struct{})}
	close(p.paused)
	addr := strings.TrimPrefix(target, "http://")
	go func() {
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", addr)
			if err != nil {
				_ = in.Close()
				continue
			}
			t.Cleanup(func() { _ = in.Close(); _ = out.Close() })
			go p.copy(out, in)
			go p.copy(in, out)
		}
	}()
	return p
}

// copy forwards src to dst, each chunk only while the proxy is not paused.
func (p *pausingProxy) copy(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			gate := p.paused
			p.mu.Unlock()
			<-gate
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *pausingProxy) pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.paused = make(chan struct{})
}

func (p *pausingProxy) resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	close(p.paused)
}
