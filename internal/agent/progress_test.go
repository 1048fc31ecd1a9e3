package agent

import (
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/snapshotstore"
	"github.com/quorumkeeper/etcd-operator/internal/testetcd"
	"github.com/quorumkeeper/etcd-operator/internal/testminio"
)

// The throttle writes a report only after 2 s and 5 points more, whichever is rarer; after
// 30 s any work at all is enough; no work, no report.
func TestThrottleDue(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(d time.Duration, percent int32, bytes int64) progressMark {
		return progressMark{At: t0.Add(d), Percent: percent, Bytes: bytes}
	}
	last := at(0, 10, 1000)
	for _, tc := range []struct {
		name string
		last progressMark
		now  progressMark
		want bool
	}{
		{"the first report", progressMark{}, at(0, 0, 0), true},
		{"5 points after 2 s", last, at(2*time.Second, 15, 2000), true},
		{"5 points but within 2 s", last, at(1900*time.Millisecond, 40, 9000), false},
		{"2 s but under 5 points", last, at(10*time.Second, 14, 1900), false},
		{"under 5 points, a heartbeat after 30 s", last, at(30*time.Second, 11, 1100), true},
		{"30 s without any work", last, at(time.Minute, 10, 1000), false},
		{"more bytes, the same percent, after 30 s", last, at(31*time.Second, 10, 1001), true},
	} {
		if got := DefaultThrottle.Due(tc.last, tc.now); got != tc.want {
			t.Errorf("%s: due %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestProgressOf(t *testing.T) {
	for _, tc := range []struct {
		name                        string
		expected, written, verified int64
		want                        int32
	}{
		{"nothing yet", 1000, 0, 0, 0},
		{"half written", 1000, 500, 0, 25},
		{"written, not read back", 1000, 1000, 0, 50},
		{"read back half", 1000, 1000, 500, 75},
		{"all done is 99: 100 is the operator's", 1000, 1000, 1000, 99},
		{"a database grown since its size was read", 1000, 1100, 1100, 99},
		{"no expected size", 0, 500, 0, 0},
	} {
		if got := ProgressOf(tc.expected, tc.written, tc.verified); got.Percent != tc.want || got.BytesWritten != tc.written {
			t.Errorf("%s: %+v, want %d%%", tc.name, got, tc.want)
		}
	}
}

// recordingSink keeps every report it passes on.
type recordingSink struct {
	next    ProgressSink
	mu      sync.Mutex
	reports []etcdv1.SnapshotProgress
}

func (s *recordingSink) Report(ctx context.Context, p etcdv1.SnapshotProgress) error {
	if err := s.next.Report(ctx, p); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reports = append(s.reports, p)
	return nil
}

// commitBatch makes etcd commit the writes it holds in its batch (it does so every 100 ms),
// so that the size its status reports, which the snapshot expects, is the size of the file a
// snapshot gets: a snapshot commits first, and this one is read to the end and dropped.
func commitBatch(t *testing.T, cli *clientv3.Client) {
	t.Helper()
	r, err := cli.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Close() }()
	if _, err := io.Copy(io.Discard, r); err != nil {
		t.Fatal(err)
	}
}

type failingSink struct{}

func (failingSink) Report(context.Context, etcdv1.SnapshotProgress) error {
	return errors.New("forbidden")
}

// TestSnapshotReportsItsProgressIntoTheStatus takes a 20 MiB snapshot of a real etcd into a
// real MinIO and writes its progress into an EtcdSnapshot's status through the agent's
// status patch (against a fake API server): the first report gives the expected size, the
// reports only grow and are 5 points apart, the last names the whole file written and read
// back, and the status holds it; the end is written whatever the throttle. A sink that fails
// leaves the snapshot alone.
func TestSnapshotReportsItsProgressIntoTheStatus(t *testing.T) {
	ctx := context.Background()
	srv := testminio.Start(t, testminio.Options{})
	bucket := srv.Bucket(t, "snapshots")
	store, err := snapshotstore.NewS3Store(snapshotstore.S3Config{Endpoint: srv.Endpoint, Bucket: bucket, ForcePathStyle: true,
		AccessKeyID: testminio.AccessKey, SecretKey: testminio.SecretKey})
	if err != nil {
		t.Fatal(err)
	}
	src := testetcd.Start(t, t.TempDir(), "src", testetcd.FreePort(t))
	putKeys(t, src, 1000, 5)
	commitBatch(t, src)
	cfg := clientv3.Config{Endpoints: src.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()}

	snap := &etcdv1.EtcdSnapshot{ObjectMeta: metav1.ObjectMeta{Name: "one", Namespace: "ns", UID: "uid-1"}}
	api := fakeAPI(t, snap)
	sink, err := newStatusSink(api, snapshotstore.OwnerOf("ns", "one", "uid-1"))
	if err != nil {
		t.Fatal(err)
	}
	rec := &recordingSink{next: sink}
	throttle := Throttle{MinStep: 5, Heartbeat: time.Hour} // no time bound: as many reports as the steps allow
	res := TakeSnapshot(ctx, SnapshotJob{Etcd: cfg, Store: store, Name: "one.db", URI: "s3://snapshots/one.db", Owner: "ns/one/uid-1",
		Progress: rec, Throttle: throttle})
	if res.Reason != "" {
		t.Fatalf("snapshot failed: %s: %s", res.Reason, res.Message)
	}
	checkReports(t, rec.reports, res.SizeBytes, throttle.MinStep)
	got := &etcdv1.EtcdSnapshot{}
	if err := api.Get(ctx, client.ObjectKeyFromObject(snap), got); err != nil {
		t.Fatal(err)
	}
	if last := rec.reports[len(rec.reports)-1]; got.Status.Progress == nil || got.Status.Progress.BytesVerified != last.BytesVerified || got.Status.Progress.Percent != last.Percent {
		t.Errorf("status.progress %+v, the last report %+v", got.Status.Progress, last)
	}

	// A throttle that lets nothing through after the start: the end is still written.
	coarse := &recordingSink{next: sink}
	dir := TakeSnapshot(ctx, SnapshotJob{Etcd: cfg, Store: snapshotstore.DirStore{Root: t.TempDir()}, Name: "one.db", URI: "pvc://b/one.db",
		Owner: "ns/one/uid-1", Progress: coarse, Throttle: Throttle{MinStep: 100, Heartbeat: time.Hour}})
	if n := len(coarse.reports); dir.Reason != "" || n != 2 || coarse.reports[1].BytesVerified != dir.SizeBytes {
		t.Errorf("with a coarse throttle: %+v, reports %+v; want the start and the end", dir, coarse.reports)
	}

	again := TakeSnapshot(ctx, SnapshotJob{Etcd: cfg, Store: store, Name: "two.db", URI: "s3://snapshots/two.db", Owner: "ns/two/uid-2", Progress: failingSink{}})
	if again.Reason != "" {
		t.Errorf("with a sink that fails: %+v", again)
	}
}

// checkReports: at least the start, a report between and the end; the expected size known
// from the start within 5 % of the file; only growing, minStep apart but for the last; the
// last with the whole file written and read back, below 100 %.
func checkReports(t *testing.T, reports []etcdv1.SnapshotProgress, size int64, minStep int32) {
	t.Helper()
	if len(reports) < 3 {
		t.Fatalf("%d reports %+v: want the start, some between, the end", len(reports), reports)
	}
	first, last := reports[0], reports[len(reports)-1]
	if diff := first.BytesExpected - size; first.BytesWritten != 0 || diff*20 > size || -diff*20 > size {
		t.Errorf("first report %+v: want nothing written of about %d bytes", first, size)
	}
	for i := 1; i < len(reports); i++ {
		prev, cur := reports[i-1], reports[i]
		if cur.Percent < prev.Percent || cur.BytesWritten < prev.BytesWritten || cur.BytesVerified < prev.BytesVerified {
			t.Errorf("report %d went back: %+v after %+v", i, cur, prev)
		}
		if i < len(reports)-1 && cur.Percent-prev.Percent < minStep {
			t.Errorf("report %d only %d points after the one before (%+v, %+v)", i, cur.Percent-prev.Percent, prev, cur)
		}
		if cur.UpdateTime == nil {
			t.Errorf("report %d has no time", i)
		}
	}
	if last.BytesWritten != size || last.BytesVerified != size || last.Percent != 99 {
		t.Errorf("last report %+v: want %d bytes written and verified, 99 %%", last, size)
	}
}

func fakeAPI(t *testing.T, objs ...client.Object) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := etcdv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	return fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithStatusSubresource(&etcdv1.EtcdSnapshot{}).Build()
}
