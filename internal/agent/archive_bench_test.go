package agent

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/quorumkeeper/etcd-operator/internal/archive"
	"github.com/quorumkeeper/etcd-operator/internal/snapshotstore"
	"github.com/quorumkeeper/etcd-operator/internal/testetcd"
	"github.com/quorumkeeper/etcd-operator/internal/testminio"
)

// archived is the archiver's reports as they came: when each segment was stored and the
// newest revision stored then.
type archived struct {
	mu      sync.Mutex
	times   []time.Time
	lasts   []int64
	segment chan struct{}
}

func (a *archived) report(_ context.Context, p archive.Progress) {
	a.mu.Lock()
	a.times, a.lasts = append(a.times, time.Now()), append(a.lasts, p.Chain.Last)
	a.mu.Unlock()
	select {
	case a.segment <- struct{}{}:
	default:
	}
}

// storedBy is when the archive first held rev (false: not yet).
func (a *archived) storedBy(rev int64) (time.Time, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	i := slices.IndexFunc(a.lasts, func(l int64) bool { return l >= rev })
	if i < 0 {
		return time.Time{}, false
	}
	return a.times[i], true
}

// lastAt is the newest revision the archive held at t.
func (a *archived) lastAt(t time.Time) int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	var last int64
	for i, at := range a.times {
		if at.After(t) {
			break
		}
		last = a.lasts[i]
	}
	return last
}

// segments is how many segments were stored.
func (a *archived) segments() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.times)
}

// percentile is the p-th percentile (0..1) of sorted values.
func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(p*float64(len(sorted))))]
}

// BenchmarkArchiveLag measures the recovery point a steady writer keeps with the archiver at
// its defaults (segments closed every 5 s): 100 puts a second of 1 KiB values for 30 s,
// archived at once by two archivers of the same etcd, one into a directory store and one into
// a real MinIO (the S3 store users run). For every write, the time from its acknowledgement
// until the archive held its revision (lag-p50-ms, lag-p99-ms: what a restore to "now" would
// miss), and the revisions the archive was behind the cluster at that acknowledgement
// (revs-behind-p50, revs-behind-p99); the same with an s3- prefix for MinIO, and the S3 lag
// as a ratio of the directory's, measured on the same writes (s3-lag-p50-x-dir,
// s3-lag-p99-x-dir).
func BenchmarkArchiveLag(b *testing.B) {
	const (
		rate     = 100
		duration = 30 * time.Second
	)
	ctx := context.Background()
	srv := testminio.Start(b, testminio.Options{})
	lags, behind := make([][]float64, 2), make([][]float64, 2)
	for n := range b.N {
		src := testetcd.Start(b, b.TempDir(), "src", testetcd.FreePort(b))
		s3 := benchS3Store(b, srv, fmt.Sprintf("lag-%d", n))
		stores := []archive.Store{snapshotstore.DirStore{Root: b.TempDir()}, s3}
		recs, stop := startArchivers(src, stores)
		for _, rec := range recs {
			select {
			case <-rec.segment: // the empty segment that marks where the archive starts
			case <-time.After(time.Minute):
				b.Fatal("the archiver did not start")
			}
		}
		value := strings.Repeat("v", 1024)
		type ack struct {
			at  time.Time
			rev int64
		}
		var acks []ack
		tick := time.NewTicker(time.Second / rate)
		for end := time.Now().Add(duration); time.Now().Before(end); <-tick.C {
			resp, err := src.Put(ctx, fmt.Sprintf("/lag/%04d", len(acks)%1000), value)
			if err != nil {
				b.Fatal(err)
			}
			acks = append(acks, ack{time.Now(), resp.Header.Revision})
		}
		tick.Stop()
		last := acks[len(acks)-1].rev
		for _, rec := range recs {
			rec.waitStored(b, last)
		}
		stop()
		for i, rec := range recs {
			for _, a := range acks {
				at, _ := rec.storedBy(a.rev)
				lags[i] = append(lags[i], float64(at.Sub(a.at).Milliseconds()))
				behind[i] = append(behind[i], float64(a.rev-rec.lastAt(a.at)))
			}
		}
	}
	for i, prefix := range []string{"", "s3-"} {
		slices.Sort(lags[i])
		slices.Sort(behind[i])
		b.ReportMetric(percentile(lags[i], 0.5), prefix+"lag-p50-ms")
		b.ReportMetric(percentile(lags[i], 0.99), prefix+"lag-p99-ms")
		b.ReportMetric(percentile(behind[i], 0.5), prefix+"revs-behind-p50")
		b.ReportMetric(percentile(behind[i], 0.99), prefix+"revs-behind-p99")
	}
	b.ReportMetric(percentile(lags[1], 0.5)/percentile(lags[0], 0.5), "s3-lag-p50-x-dir")
	b.ReportMetric(percentile(lags[1], 0.99)/percentile(lags[0], 0.99), "s3-lag-p99-x-dir")
}

// startArchivers runs an archiver of src into each store until stop, each reporting to its
// own record.
func startArchivers(src *clientv3.Client, stores []archive.Store) (recs []*archived, stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var running sync.WaitGroup
	for _, store := range stores {
		rec := &archived{segment: make(chan struct{}, 1)}
		recs = append(recs, rec)
		arch := &archive.Archiver{Etcd: src, Store: store, Prefix: archivePrefix, Owner: "ns/nightly/uid", Report: rec.report}
		running.Go(func() { _ = arch.Run(ctx) })
	}
	return recs, func() { cancel(); running.Wait() }
}

// waitStored waits (a minute at most) until the archive holds rev.
func (a *archived) waitStored(b *testing.B, rev int64) {
	b.Helper()
	for deadline := time.Now().Add(time.Minute); ; {
		if _, ok := a.storedBy(rev); ok {
			return
		}
		select {
		case <-a.segment:
		case <-time.After(time.Until(deadline)):
			b.Fatalf("the archive did not reach %d", rev)
		}
	}
}

// benchS3Store is a store in a new bucket of srv, as the agents open one.
func benchS3Store(b *testing.B, srv *testminio.Server, bucket string) *snapshotstore.S3Store {
	b.Helper()
	store, err := snapshotstore.NewS3Store(snapshotstore.S3Config{Endpoint: srv.Endpoint, Bucket: srv.Bucket(b, bucket), ForcePathStyle: true,
		AccessKeyID: testminio.AccessKey, SecretKey: testminio.SecretKey})
	if err != nil {
		b.Fatal(err)
	}
	return store
}

// BenchmarkArchiveMemory measures the archiver's live heap (after a garbage collection) once
// it has stored 20 segments and again at 400, under a writer as fast as etcd acknowledges
// (1 KiB values, segments closed at 64 KiB): the memory is the open segment's, flat in the
// number of segments stored (heap-ratio near 1).
func BenchmarkArchiveMemory(b *testing.B) {
	const few, many = 20, 400
	ctx := context.Background()
	var atFew, atMany float64
	for range b.N {
		src := testetcd.Start(b, b.TempDir(), "src", testetcd.FreePort(b))
		store := snapshotstore.DirStore{Root: b.TempDir()}
		rec := &archived{segment: make(chan struct{}, 1)}
		ctxA, cancel := context.WithCancel(ctx)
		arch := &archive.Archiver{Etcd: src, Store: store, Prefix: archivePrefix, Owner: "ns/nightly/uid",
			MaxBytes: 64 << 10, Report: rec.report}
		done := make(chan struct{})
		go func() { defer close(done); _ = arch.Run(ctxA) }()
		value := strings.Repeat("v", 1024)
		writing, stopWriting := context.WithCancel(ctx)
		wrote := make(chan error, 1)
		go func() {
			for i := 0; writing.Err() == nil; i++ {
				if _, err := src.Put(writing, fmt.Sprintf("/mem/%04d", i%1000), value); err != nil && writing.Err() == nil {
					wrote <- err
					return
				}
			}
			wrote <- nil
		}()
		heapAt := func(n int) float64 {
			for deadline := time.Now().Add(3 * time.Minute); rec.segments() < n; {
				select {
				case <-rec.segment:
				case <-time.After(time.Until(deadline)):
					b.Fatalf("%d segments stored, %d awaited", rec.segments(), n)
				}
			}
			runtime.GC()
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			return float64(m.HeapAlloc) / (1 << 20)
		}
		atFew += heapAt(few)
		atMany += heapAt(many)
		stopWriting()
		if err := <-wrote; err != nil {
			b.Fatal(err)
		}
		cancel()
		<-done
	}
	b.ReportMetric(atFew/float64(b.N), fmt.Sprintf("heap-MiB-at-%d-segments", few))
	b.ReportMetric(atMany/float64(b.N), fmt.Sprintf("heap-MiB-at-%d-segments", many))
	b.ReportMetric(atMany/atFew, "heap-ratio")
}
