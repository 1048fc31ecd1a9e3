package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/agent/request"
	"github.com/quorumkeeper/etcd-operator/internal/archive"
	"github.com/quorumkeeper/etcd-operator/internal/snapshotstore"
)

// RunArchiver is `etcd-operator archive`: it archives the cluster's changes until it is
// stopped (SIGTERM), resuming where the stored archive ends. It exits 1 when it cannot start
// or the archive cannot go on (its Deployment starts it again), 2 on bad arguments.
func RunArchiver(args []string) int {
	req, err := request.ParseArchive(args)
	if err != nil {
		return badArguments(err)
	}
	if req.Prefix == "" || req.Owner == "" || len(req.Endpoints) == 0 {
		return badArguments(errors.New("--prefix, --owner and --endpoints are needed"))
	}
	tuneGC()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := runArchiver(ctx, req); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func runArchiver(ctx context.Context, req request.Archive) error {
	opened, err := openStore(req.Store)
	if err != nil {
		return err
	}
	st, ok := opened.(archive.Store)
	if !ok {
		return errors.New("the store cannot list its files")
	}
	cfg, err := etcdConfig(req.Endpoints, req.CAFile, req.CertFile, req.KeyFile)
	if err != nil {
		return err
	}
	if cfg, err = withRootLogin(ctx, cfg); err != nil {
		return err
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return err
	}
	defer cli.Close() //nolint:errcheck // at exit
	a := &archive.Archiver{Etcd: cli, Store: st, Prefix: req.Prefix, Owner: req.Owner,
		Interval: req.SegmentInterval, MaxBytes: int(req.SegmentMaxBytes)}
	if req.ReportStatus {
		cl, err := inClusterClient()
		if err != nil {
			return fmt.Errorf("reporting to the schedule's status: %w", err)
		}
		sink, err := newArchiveSink(cl, req.Owner)
		if err != nil {
			return err
		}
		a.Report, a.Prune = sink.Report, sink.RetainFrom
	}
	fmt.Fprintf(os.Stderr, "archiving %v into %s\n", req.Endpoints, req.Prefix)
	return a.Run(ctx)
}

// archiveReportEvery is how often the archiver writes its progress into the schedule's
// status when nothing but the newest revision changed: status.archive is read by people and
// by the operator's window, both fine with this much delay, and the API server is spared a
// write per segment.
const archiveReportEvery = 15 * time.Second

// archiveSink writes the archiver's progress into the EtcdSnapshotSchedule's status.archive,
// with a merge patch of the archiver's own fields alone (archived, lastGap, storeError, lag,
// updateTime): the operator writes the window and retainFromRevision. The archiver's Role
// allows exactly this patch and reading the schedule (specs.ArchiverAccess).
type archiveSink struct {
	cl              client.Client
	namespace, name string
	now             func() time.Time

	mu   sync.Mutex
	last time.Time
	sent archive.Progress
}

func newArchiveSink(cl client.Client, owner string) (*archiveSink, error) {
	namespace, name, _, ok := snapshotstore.ParseOwner(owner)
	if !ok {
		return nil, fmt.Errorf("--owner %q names no EtcdSnapshotSchedule", owner)
	}
	return &archiveSink{cl: cl, namespace: namespace, name: name, now: time.Now}, nil
}

// Report implements archive.Archiver's Report: at once when a gap or a store error came or
// went, else at most every archiveReportEvery. A failed write is said on stderr and retried
// with the next report.
func (s *archiveSink) Report(ctx context.Context, p archive.Progress) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if !reportDue(s.sent, p, s.last, now) {
		return
	}
	body, err := json.Marshal(map[string]any{"status": map[string]any{"archive": archivePatch(p, now)}})
	if err == nil {
		sc := &etcdv1.EtcdSnapshotSchedule{ObjectMeta: metav1.ObjectMeta{Namespace: s.namespace, Name: s.name}}
		err = s.cl.Status().Patch(ctx, sc, client.RawPatch(types.MergePatchType, body))
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "the progress is not reported: %v\n", err)
		return
	}
	s.last, s.sent = now, p
}

// reportDue says whether progress p is to be written now, after sent was written at last.
func reportDue(sent, p archive.Progress, last, now time.Time) bool {
	changed := (p.Gap == nil) != (sent.Gap == nil) || p.Gap != nil && *p.Gap != *sent.Gap ||
		(p.StoreError == nil) != (sent.StoreError == nil) || p.Chain.First != sent.Chain.First
	return changed || last.IsZero() || now.Sub(last) >= archiveReportEvery
}

// archivePatch is the archiver's fields of status.archive for progress p at now: a field
// that is empty is written as null, so that a gap or a store error gone is cleared.
func archivePatch(p archive.Progress, now time.Time) map[string]any {
	out := map[string]any{"updateTime": metav1.NewTime(now), "archived": nil, "lastGap": nil, "storeError": nil, "lag": nil}
	if p.Chain.First > 0 {
		run := etcdv1.ArchivedRun{FirstRevision: p.Chain.First, LastRevision: p.Chain.Last}
		if !p.Chain.Until.IsZero() {
			run.Until = &metav1.Time{Time: p.Chain.Until}
			out["lag"] = metav1.Duration{Duration: max(now.Sub(p.Chain.Until), 0).Round(time.Second)}
		}
		out["archived"] = run
	}
	if p.Gap != nil {
		out["lastGap"] = etcdv1.ArchiveGap{FromRevision: p.Gap.From, ToRevision: p.Gap.To, Time: &metav1.Time{Time: p.Gap.Time}}
	}
	if p.StoreError != nil {
		out["storeError"] = p.StoreError.Error()
	}
	return out
}

// RetainFrom implements archive.Archiver's Prune: the schedule's status.archive
// .retainFromRevision, which the operator keeps at the oldest Complete snapshot's revision.
func (s *archiveSink) RetainFrom(ctx context.Context) (int64, error) {
	sc := &etcdv1.EtcdSnapshotSchedule{}
	if err := s.cl.Get(ctx, types.NamespacedName{Namespace: s.namespace, Name: s.name}, sc); err != nil {
		return 0, err
	}
	if sc.Status.Archive == nil {
		return 0, nil
	}
	return sc.Status.Archive.RetainFromRevision, nil
}
