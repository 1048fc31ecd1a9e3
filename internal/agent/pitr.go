package agent

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/archive"
	"github.com/quorumkeeper/etcd-operator/internal/snapshotstore"
)

// ArchiveTarget is a restore to a revision or a time: the archive's prefix in the restore's
// store, and the target.
type ArchiveTarget struct {
	Prefix string
	Target archive.Target
}

// DefaultEtcd is the etcd binary of the etcd image the restore agent runs in.
const DefaultEtcd = "/usr/local/bin/etcd"

// replayArchive makes, from the downloaded base snapshot file, a snapshot at the target: it
// restores the file into a scratch etcd, replays the archive's segments from the file's
// revision up to the target (archive.Plan, archive.Replay), and snapshots the scratch etcd
// into staging. It returns that file and what the replay reached; a failure's Result says why.
func replayArchive(ctx context.Context, job RestoreJob, base string) (string, archive.Replayed, *Result) {
	fail := func(reason string, err error) (string, archive.Replayed, *Result) {
		return "", archive.Replayed{}, &Result{Reason: reason, Message: fmt.Sprintf("restoring to %s from %s: %v", job.Archive.Target, job.URI, err)}
	}
	st, ok := job.Store.(archive.Store)
	if !ok {
		return fail(etcdv1.ReasonInvalidArguments, errors.New("the store cannot list the archive"))
	}
	baseRev, err := snapshotstore.FileRevision(base)
	if err != nil {
		return fail(etcdv1.ReasonSnapshotCorrupt, err)
	}
	names, err := st.List(ctx, job.Archive.Prefix+"/"+archive.SegmentsDir+"/")
	if err != nil {
		return fail(snapshotstore.Reason(err), err)
	}
	plan, err := archive.Plan(archive.ParseNames(names), baseRev, job.Archive.Target)
	switch {
	case errors.Is(err, archive.ErrGap):
		return fail(etcdv1.ReasonArchiveGap, err)
	case errors.Is(err, archive.ErrBeyond):
		return fail(etcdv1.ReasonArchiveBehindTarget, err)
	case err != nil:
		return fail(etcdv1.ReasonArchiveReplayFailed, err)
	}
	etcd := job.Etcd
	if etcd == "" {
		etcd = DefaultEtcd
	}
	scratch, err := startScratchEtcd(ctx, etcd, job.Etcdutl, base, filepath.Join(job.Staging, "scratch"))
	if err != nil {
		return fail(etcdv1.ReasonArchiveReplayFailed, err)
	}
	defer scratch.stop()
	replayed, err := archive.Replay(ctx, scratch.cli, st, plan, baseRev, job.Archive.Target)
	if err != nil {
		return fail(etcdv1.ReasonArchiveReplayFailed, err)
	}
	out := filepath.Join(job.Staging, "replayed.db")
	if err := scratch.snapshot(ctx, out); err != nil {
		return fail(etcdv1.ReasonArchiveReplayFailed, fmt.Errorf("snapshotting the replayed etcd: %w", err))
	}
	return out, replayed, nil
}
