package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/agent/request"
	"github.com/quorumkeeper/etcd-operator/internal/archive"
	"github.com/quorumkeeper/etcd-operator/internal/snapshotstore"
)

// RestoreJob puts one snapshot into a new member's data directory.
type RestoreJob struct {
	Store snapshotstore.Store
	Name  string // S3 key or path in the volume
	URI   string
	// Checksum expected; when empty, the one the snapshot agent recorded beside the file, if
	// any. etcd's own integrity hash is checked always.
	Checksum string
	// DataDir is etcd's --data-dir; Staging a directory on the same volume for the download
	// and etcdutl's output, renamed onto DataDir at the end.
	DataDir, Staging string
	// Etcdutl is the etcdutl binary of the cluster's etcd version.
	Etcdutl string
	// Member's bootstrap: the same values etcd itself starts with.
	MemberName, InitialCluster, ClusterToken, PeerURL string
	// Archive, when set, restores to a revision or a time: the snapshot is the base the
	// archive is replayed on (replayArchive) with Etcd (DefaultEtcd when empty).
	Archive *ArchiveTarget
	Etcd    string
}

// Restore downloads, verifies and restores the snapshot, unless the data directory holds a
// member already (a restarted Pod after a successful restore, or a crash after the rename):
// then it does nothing, so a member never restores twice and never loses later writes.
func Restore(ctx context.Context, job RestoreJob) Result {
	if _, err := os.Stat(filepath.Join(job.DataDir, "member")); err == nil {
		return Result{URI: job.URI, Message: "the data directory holds a member already: nothing to restore"}
	}
	// What a crash left half-done is started over.
	if err := os.RemoveAll(job.Staging); err != nil {
		return Result{Reason: etcdv1.ReasonRestoreFailed, Message: err.Error()}
	}
	if err := os.MkdirAll(job.Staging, 0o700); err != nil {
		return Result{Reason: etcdv1.ReasonRestoreFailed, Message: err.Error()}
	}
	file := filepath.Join(job.Staging, "snapshot.db")
	checksum, size, err := download(ctx, job, file)
	if err != nil {
		return Result{Reason: snapshotstore.Reason(err), Message: fmt.Sprintf("restoring %s: %v", job.URI, err)}
	}
	message := "restored"
	var revision int64
	if job.Archive != nil {
		replayedFile, replayed, failure := replayArchive(ctx, job, file)
		if failure != nil {
			return *failure
		}
		file, revision = replayedFile, replayed.Revision
		message = fmt.Sprintf("restored to %s: revision %d, %d changes replayed from the archive", job.Archive.Target, replayed.Revision, replayed.Events)
	}
	staged := filepath.Join(job.Staging, "data")
	cmd := exec.CommandContext(ctx, job.Etcdutl, "snapshot", "restore", file,
		"--data-dir="+staged, "--name="+job.MemberName, "--initial-cluster="+job.InitialCluster,
		"--initial-cluster-token="+job.ClusterToken, "--initial-advertise-peer-urls="+job.PeerURL)
	if out, err := cmd.CombinedOutput(); err != nil {
		return Result{Reason: etcdv1.ReasonSnapshotCorrupt, Message: fmt.Sprintf("etcdutl snapshot restore of %s failed: %v: %s", job.URI, err, tail(out))}
	}
	if err := os.RemoveAll(job.DataDir); err != nil {
		return Result{Reason: etcdv1.ReasonRestoreFailed, Message: err.Error()}
	}
	if err := os.Rename(staged, job.DataDir); err != nil {
		return Result{Reason: etcdv1.ReasonRestoreFailed, Message: err.Error()}
	}
	_ = os.RemoveAll(job.Staging)
	return Result{URI: job.URI, SizeBytes: size, Checksum: checksum, Member: job.MemberName, Revision: revision, Message: message}
}

// download copies the snapshot to file, checking etcd's hash and the expected checksum as it
// streams.
func download(ctx context.Context, job RestoreJob, file string) (string, int64, error) {
	want := job.Checksum
	if want == "" {
		recorded, err := job.Store.RecordedChecksum(ctx, job.Name)
		if err != nil {
			return "", 0, err
		}
		want = recorded
	}
	rc, err := job.Store.Open(ctx, job.Name)
	if err != nil {
		return "", 0, err
	}
	defer rc.Close() // read-only
	f, err := os.OpenFile(file, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return "", 0, err
	}
	// Not synced: etcdutl reads it from the page cache and syncs what it writes, and a restore
	// a crash interrupted starts over from the download (the staging directory is removed
	// first).
	sr := snapshotstore.NewSnapshotReader(rc)
	_, err = snapshotstore.Copy(f, sr)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", 0, err
	}
	if want != "" && sr.Checksum() != want {
		return "", 0, fmt.Errorf("%w: the file's checksum is %s, %s was recorded when it was taken", snapshotstore.ErrCorrupt, sr.Checksum(), want)
	}
	return sr.Checksum(), sr.Size(), nil
}

func tail(out []byte) string {
	const n = 1000
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return string(out)
}

// RunRestoreAgent is `etcd-operator restore-agent`.
func RunRestoreAgent(args []string) int {
	req, err := request.ParseRestore(args)
	if err != nil {
		return badArguments(err)
	}
	return runOnStore(req.Store, req.Run, func(ctx context.Context, st snapshotstore.Store) Result {
		job := RestoreJob{
			Store: st, Name: req.Name, URI: req.URI, Checksum: req.Checksum,
			DataDir: req.DataDir, Staging: req.StagingDir, Etcdutl: req.EtcdutlOrDefault(),
			MemberName: req.MemberName, InitialCluster: req.InitialCluster,
			ClusterToken: req.InitialClusterToken, PeerURL: req.InitialAdvertisePeerURLs, Etcd: req.Etcd,
		}
		if a := req.Archive; a.Prefix != "" {
			job.Archive = &ArchiveTarget{Prefix: a.Prefix, Target: archive.Target{Revision: a.Revision, Time: a.Time}}
		}
		return Restore(ctx, job)
	})
}

// RunCopySelf is `etcd-operator copy-self DEST`: it copies the running binary to DEST, so that
// a container of another image (etcd's, which has etcdutl but no shell) can run the restore
// agent.
func RunCopySelf(args []string) int {
	req, err := request.ParseCopySelf(args)
	if err != nil {
		return badArguments(err)
	}
	if err := copySelf(req.Dest); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func copySelf(dest string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	in, err := os.Open(self)
	if err != nil {
		return err
	}
	defer in.Close() // read-only
	tmp := dest + ".tmp"
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, dest); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return nil
}
