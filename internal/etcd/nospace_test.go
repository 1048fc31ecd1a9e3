package etcd

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// A member with a 4 MiB quota, filled by rewriting one key, raises NOSPACE and refuses
// writes; compacting to the current revision, defragmenting and disarming (what the operator's
// remediation does) makes it writable again, with a smaller database file.
func TestNoSpaceIsClearedByCompactDefragmentDisarm(t *testing.T) {
	t.Parallel()
	forEachRelease(t, testNoSpaceIsClearedByCompactDefragmentDisarm)
}

func testNoSpaceIsClearedByCompactDefragmentDisarm(t *testing.T, r release) {
	url, c, kv := oneMemberClusterOn(t, r, "full", "--quota-backend-bytes", "4194304")

	fillToQuota(t, kv)
	alarms, err := c.Alarms(shortContext(t))
	if err != nil || len(alarms) != 1 || alarms[0].Type != AlarmNoSpace {
		t.Fatalf("alarms %+v, %v; want one NOSPACE", alarms, err)
	}
	before, err := c.Status(shortContext(t), url)
	if err != nil {
		t.Fatal(err)
	}
	// A quota given is reported as given from 3.6.0 on (HasStorageVersion's 3.6); 3.5 reports
	// none, which callers read as the quota the member was given (specs.BackendQuota).
	if want := int64(4194304); before.DBSizeQuota != want && (before.DBSizeQuota != 0 || r.version.HasStorageVersion()) {
		t.Fatalf("Status reports quota %d on %s; want %d (0 on 3.5)", before.DBSizeQuota, r.version, want)
	}

	compactAndDefragment(t, c, url)
	after, err := c.Status(shortContext(t), url)
	if err != nil {
		t.Fatal(err)
	}
	if after.DBSize >= before.DBSize {
		t.Fatalf("the database file did not shrink: %d -> %d bytes", before.DBSize, after.DBSize)
	}
	if err := c.DisarmAlarm(shortContext(t), alarms[0]); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if _, err := kv.Put(ctx, "after", "writable"); err != nil {
		t.Fatalf("still not writable after the remediation: %v", err)
	}
	if left, err := c.Alarms(shortContext(t)); err != nil || len(left) != 0 {
		t.Fatalf("alarms left: %+v, %v", left, errors.Join(err))
	}
}

// fillToQuota rewrites one key with 64 KiB values until etcd refuses with NOSPACE.
func fillToQuota(t *testing.T, kv *clientv3.Client) {
	t.Helper()
	value := strings.Repeat("x", 64<<10)
	var full error
	for i := 0; i < 500 && full == nil; i++ {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		_, full = kv.Put(ctx, "filler", value)
		cancel()
	}
	if full == nil || !strings.Contains(full.Error(), "database space exceeded") {
		t.Fatalf("500 rewrites of a 64 KiB value did not fill a 4 MiB quota: %v", full)
	}
}

// compactAndDefragment compacts to the current revision (twice: the second is a no-op that
// must not fail) and defragments the member.
func compactAndDefragment(t *testing.T, c Client, endpoint string) {
	t.Helper()
	rev, err := c.CompactToCurrent(shortContext(t))
	if err != nil || rev <= 1 {
		t.Fatalf("CompactToCurrent = %d, %v", rev, err)
	}
	if again, err := c.CompactToCurrent(shortContext(t)); err != nil || again != rev {
		t.Fatalf("a second compaction at the same revision = %d, %v; want %d and no error", again, err, rev)
	}
	if err := c.Defragment(shortContext(t), endpoint); err != nil {
		t.Fatal(err)
	}
}

// CompactKeeping leaves the last revisions readable and the ones before them compacted; a
// history shorter than what is to be kept is not compacted, and a compaction behind one
// already made is no error.
func TestCompactKeepingKeepsTheLastRevisions(t *testing.T) {
	t.Parallel()
	_, c, kv := oneMemberCluster(t, "keep")
	if rev, err := c.CompactKeeping(shortContext(t), 1000); err != nil || rev != 0 {
		t.Fatalf("CompactKeeping(1000) of a short history = %d, %v; want 0 and no error", rev, err)
	}
	var current int64
	for i := range 10 {
		resp, err := kv.Put(shortContext(t), "k", strconv.Itoa(i))
		if err != nil {
			t.Fatal(err)
		}
		current = resp.Header.Revision
	}
	rev, err := c.CompactKeeping(shortContext(t), 3)
	if err != nil || rev != current-3 {
		t.Fatalf("CompactKeeping(3) = %d, %v; want %d", rev, err, current-3)
	}
	if _, err := kv.Get(shortContext(t), "k", clientv3.WithRev(current-3)); err != nil {
		t.Fatalf("revision %d, within the kept history, is not readable: %v", current-3, err)
	}
	if _, err := kv.Get(shortContext(t), "k", clientv3.WithRev(current-4)); err == nil || !strings.Contains(err.Error(), "compacted") {
		t.Fatalf("revision %d, before the kept history, read: %v; want it compacted", current-4, err)
	}
	if _, err := c.CompactKeeping(shortContext(t), 5); err != nil {
		t.Fatalf("a compaction behind the last one: %v", err)
	}
}

// oneMemberCluster starts a one-member etcd with these extra flags and returns its client URL,
// the layer's client and a plain clientv3 one on it; the latter is closed with the test.
func oneMemberCluster(t *testing.T, name string, flags ...string) (string, Client, *clientv3.Client) {
	t.Helper()
	return oneMemberClusterOn(t, newestRelease(t), name, flags...)
}

// oneMemberClusterOn is oneMemberCluster of the release r.
func oneMemberClusterOn(t *testing.T, r release, name string, flags ...string) (string, Client, *clientv3.Client) {
	t.Helper()
	m := newMemberSpecOn(t, r, name, "http", flags...)
	m.start(t, initialCluster([]*etcdMember{m}), "new", "token-"+t.Name())
	c := newTestClient(t, Config{Endpoints: []string{m.clientURL}})
	waitForLeader(t, c, m.clientURL)
	kv, err := clientv3.New(clientv3.Config{Endpoints: []string{m.clientURL}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kv.Close() })
	return m.clientURL, c, kv
}
