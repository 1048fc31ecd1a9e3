package main

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/sync/errgroup"
)

// database is what was loaded: the snapshots and restores of every run are of it.
type database struct {
	sizeBytes int64
	keys      int64
	revision  int64
	version   string // etcd's
}

// keyPrefix starts every key loaded.
const keyPrefix = "/bench/"

// loadWriters put values at once, so that etcd batches several into one commit.
const loadWriters = 4

// load puts values of -value-kib until etcd's database file holds -db-mib. It is bounded in
// time (-load-timeout) and in count (twice the keys the size needs): it fails rather than
// writing on forever.
func (b *bench) load(ctx context.Context) error {
	target := int64(b.o.dbMiB) << 20
	valueSize := int64(b.o.valueKiB) << 10
	maxKeys := 2*target/valueSize + 100
	logf("loading %d MiB in values of %d KiB (at most %d keys, %s)", b.o.dbMiB, b.o.valueKiB, maxKeys, b.o.loadTimeout)
	began := time.Now()
	loading, cancel := context.WithTimeout(ctx, b.o.loadTimeout)
	defer cancel()
	value := make([]byte, valueSize)
	if _, err := rand.Read(value); err != nil {
		return err
	}
	var next atomic.Int64
	writers, wctx := errgroup.WithContext(loading)
	full, stopWriters := context.WithCancel(wctx)
	for range loadWriters {
		writers.Go(func() error { return b.putUntil(full, &next, maxKeys, value) })
	}
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		b.waitForSize(full, target)
		stopWriters()
	}()
	err := writers.Wait()
	stopWriters() // the writers stopped on their own: at the key bound, or on an error
	<-watched
	switch {
	case err != nil:
		return fmt.Errorf("loading the database: %w", err)
	case ctx.Err() != nil:
		return fmt.Errorf("loading the database: %w", ctx.Err()) // interrupted
	case loading.Err() != nil:
		return fmt.Errorf("loading the database did not finish within %s", b.o.loadTimeout)
	}
	st, err := b.cli.Status(ctx, b.etcdURL)
	if err != nil {
		return err
	}
	if st.DbSize < target {
		return fmt.Errorf("the database holds %d MiB after %d keys, want %d MiB", st.DbSize>>20, maxKeys, b.o.dbMiB)
	}
	// A put the writers gave up on may still be applied after they stopped; the marker is
	// applied after every one of them, so its revision is the database's last.
	marker, err := b.cli.Put(ctx, "/bench-loaded", "")
	if err != nil {
		return err
	}
	count, err := b.cli.Get(ctx, keyPrefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return err
	}
	b.db = database{sizeBytes: st.DbSize, keys: count.Count, revision: marker.Header.Revision, version: st.Version}
	logf("loaded %d keys, database %.1f MiB, revision %d, in %s", b.db.keys, mib(b.db.sizeBytes), b.db.revision, time.Since(began).Round(time.Second))
	return nil
}

// putUntil writes keys until ctx ends (the database is full) or maxKeys are taken; ending
// through ctx is no error.
func (b *bench) putUntil(ctx context.Context, next *atomic.Int64, maxKeys int64, value []byte) error {
	v := make([]byte, len(value))
	copy(v, value)
	for {
		i := next.Add(1)
		if i > maxKeys {
			return nil
		}
		// Each value differs a little, as real values would.
		binary.BigEndian.PutUint64(v, uint64(i))
		if _, err := b.cli.Put(ctx, fmt.Sprintf("%s%08d", keyPrefix, i), string(v)); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
}

// waitForSize returns once etcd reports a database of target bytes, or when ctx ends.
func (b *bench) waitForSize(ctx context.Context, target int64) {
	for {
		if st, err := b.cli.Status(ctx, b.etcdURL); err == nil && st.DbSize >= target {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func mib(bytes int64) float64 { return float64(bytes) / (1 << 20) }
