// Package testrestore checks, for the agent's unit tests and the e2e tests alike, that an etcd
// cluster restored from a snapshot holds exactly what its source held at the snapshot's
// revision.
package testrestore

import (
	"bytes"
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Compare fails t unless dst holds every key, value and mod revision that src held at revision
// (at least minKeys keys), dst's revision is not behind it, and dst is another cluster (its
// own cluster ID). It returns dst's revision, for callers that want it exact.
func Compare(t testing.TB, src, dst *clientv3.Client, revision int64, minKeys int) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	want, err := src.Get(ctx, "", clientv3.WithPrefix(), clientv3.WithRev(revision))
	if err != nil {
		t.Fatal(err)
	}
	got, err := dst.Get(ctx, "", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if len(want.Kvs) < minKeys {
		t.Fatalf("the source held %d keys at revision %d, want at least %d", len(want.Kvs), revision, minKeys)
	}
	if got.Header.Revision < revision {
		t.Errorf("the restored cluster is at revision %d, behind the snapshot's %d", got.Header.Revision, revision)
	}
	if got.Header.ClusterId == want.Header.ClusterId {
		t.Error("the restored cluster has the source's cluster ID")
	}
	if len(got.Kvs) != len(want.Kvs) {
		t.Fatalf("the restored cluster holds %d keys, the source held %d at revision %d", len(got.Kvs), len(want.Kvs), revision)
	}
	for i, w := range want.Kvs {
		g := got.Kvs[i]
		if !bytes.Equal(w.Key, g.Key) || !bytes.Equal(w.Value, g.Value) || w.ModRevision != g.ModRevision {
			t.Fatalf("key %s differs after the restore (restored key %s, mod revision %d vs %d)", w.Key, g.Key, g.ModRevision, w.ModRevision)
		}
	}
	t.Logf("%d keys restored at revision %d", len(got.Kvs), revision)
	return got.Header.Revision
}
