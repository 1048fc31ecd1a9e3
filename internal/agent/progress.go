package agent

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/snapshotstore"
)

// ProgressSink writes a snapshot's progress where a person sees it: the EtcdSnapshot's
// status (statusSink).
type ProgressSink interface {
	Report(ctx context.Context, p etcdv1.SnapshotProgress) error
}

// Throttle bounds how often the agent reports: a report needs both MinInterval since the last
// one and MinStep percent more work (whichever is rarer), so a fast snapshot writes at most
// one report per MinStep and a slow one at most one per MinInterval; with any work done
// at all, Heartbeat since the last one is enough, so that a slow upload still shows it moves.
type Throttle struct {
	MinInterval time.Duration
	MinStep     int32
	Heartbeat   time.Duration
}

// DefaultThrottle: at most 21 reports for the whole snapshot unless it takes minutes, and
// then one each 30 seconds.
var DefaultThrottle = Throttle{MinInterval: 2 * time.Second, MinStep: 5, Heartbeat: 30 * time.Second}

// progressMark is a report as the throttle weighs it: when, and how far.
type progressMark struct {
	At      time.Time
	Percent int32
	// Bytes is all the bytes counted (written and verified): it tells work done from none
	// when the percent has not moved.
	Bytes int64
}

// Due says whether a report of now is due after last (the zero mark when none was written).
func (t Throttle) Due(last, now progressMark) bool {
	if last.At.IsZero() {
		return true
	}
	elapsed := now.At.Sub(last.At)
	switch {
	case now.Bytes == last.Bytes:
		return false
	case elapsed < t.MinInterval:
		return false
	case now.Percent-last.Percent >= t.MinStep:
		return true
	}
	return elapsed >= t.Heartbeat
}

// snapshotHashSize is the sha256 etcd appends to the snapshot it streams.
const snapshotHashSize = sha256.Size

// ProgressOf is the progress of a snapshot expected to be expected bytes: writing the file is
// the first half of the work, reading it back the second. It never says 100 percent: only
// the operator does, once the snapshot is Complete.
func ProgressOf(expected, written, verified int64) etcdv1.SnapshotProgress {
	p := etcdv1.SnapshotProgress{BytesExpected: expected, BytesWritten: written, BytesVerified: verified}
	if expected > 0 {
		done := min(written, expected) + min(verified, expected)
		p.Percent = int32(min(done*100/(2*expected), 99))
	}
	return p
}

// progressMeter counts a snapshot's work as it goes.
type progressMeter struct {
	expected int64
	// written is what the store took of the scratch file (scratchFile.stored), set once the
	// scratch file exists; verified counts the read-back.
	written  func() int64
	verified atomic.Int64
}

func (m *progressMeter) sample() etcdv1.SnapshotProgress {
	var written int64
	if m.written != nil {
		written = m.written()
	}
	return ProgressOf(m.expected, written, m.verified.Load())
}

// reporter writes the meter's progress to its sink from a goroutine of its own, on the
// throttle's terms, so that a slow or unreachable API server never slows the snapshot.
type reporter struct {
	sink     ProgressSink
	meter    *progressMeter
	throttle Throttle
	tick     time.Duration
	now      func() time.Time

	last   progressMark
	warned bool
	stop   chan struct{}
	done   sync.WaitGroup
}

// reportTimeout bounds one status write.
const reportTimeout = 5 * time.Second

// startReporting reports the meter's progress until the returned stop, which writes the
// last progress once more when it moved since. No sink: nothing is reported.
func startReporting(ctx context.Context, sink ProgressSink, meter *progressMeter, throttle Throttle) func() {
	if sink == nil {
		return func() {}
	}
	if throttle == (Throttle{}) {
		throttle = DefaultThrottle
	}
	// It looks eight times per MinInterval, so a report is late by an eighth at most.
	tick := max(throttle.MinInterval/8, 10*time.Millisecond)
	r := &reporter{sink: sink, meter: meter, throttle: throttle, tick: tick, now: time.Now, stop: make(chan struct{})}
	r.done.Add(1)
	go r.run(ctx)
	return func() {
		close(r.stop)
		r.done.Wait()
		r.report(ctx, Throttle{}) // the last word, unthrottled
	}
}

func (r *reporter) run(ctx context.Context) {
	defer r.done.Done()
	r.report(ctx, r.throttle)
	t := time.NewTicker(r.tick)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-ctx.Done():
			return
		case <-t.C:
			r.report(ctx, r.throttle)
		}
	}
}

// report writes the progress when the throttle says it is due; a write that fails is said
// once on stderr and otherwise ignored: the snapshot goes on without its progress.
func (r *reporter) report(ctx context.Context, throttle Throttle) {
	p := r.meter.sample()
	now := r.now()
	mark := progressMark{At: now, Percent: p.Percent, Bytes: p.BytesWritten + p.BytesVerified}
	if !throttle.Due(r.last, mark) {
		return
	}
	p.UpdateTime = &metav1.Time{Time: now.Truncate(time.Second)}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), reportTimeout)
	defer cancel()
	if err := r.sink.Report(wctx, p); err != nil {
		if !r.warned {
			fmt.Fprintf(os.Stderr, "writing the progress (the snapshot goes on without it): %v\n", err)
			r.warned = true
		}
		return
	}
	r.last = mark
}

// countingStore counts what is read through Open: the verification's read-back.
type countingStore struct {
	snapshotstore.Store
	n *atomic.Int64
}

func (s countingStore) Open(ctx context.Context, name string) (io.ReadCloser, error) {
	rc, err := s.Store.Open(ctx, name)
	if err != nil {
		return nil, err
	}
	return countingReader{ReadCloser: rc, n: s.n}, nil
}

type countingReader struct {
	io.ReadCloser
	n *atomic.Int64
}

func (r countingReader) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	r.n.Add(int64(n))
	return n, err
}
