package agent

import (
	"context"
	"errors"
	"fmt"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/agent/request"
	"github.com/quorumkeeper/etcd-operator/internal/snapshotstore"
)

// VerifyJob is one stored snapshot file to read whole, as a restore of it would, without
// restoring it: the check a recovery from an EtcdSnapshot makes before it discards anything.
type VerifyJob struct {
	Store snapshotstore.Store
	Name  string // S3 key or path in the volume
	URI   string
	// Checksum is the sha256 the EtcdSnapshot recorded when it was taken; required: a file
	// that passes etcd's own hash but is another snapshot (overwritten) must not pass.
	Checksum string
}

// Verify reads the file through the store code the restore agent uses (Store.Open and
// snapshotstore.SnapshotReader, snapshotstore.VerifyStored) to its end, checking etcd's integrity hash and
// the recorded checksum. The result names the checksum read, so that the operator trusts it
// for that checksum only; a failure carries the store's reason (SnapshotNotFound,
// SnapshotCorrupt, CredentialsRejected, ...), what a person fixes.
func Verify(ctx context.Context, job VerifyJob) Result {
	if job.Name == "" || job.Checksum == "" {
		return Result{Reason: etcdv1.ReasonInvalidArguments, Message: "--name and --checksum are needed"}
	}
	sum, size, err := snapshotstore.VerifyStored(ctx, job.Store, job.Name, job.Checksum)
	if err != nil {
		return Result{Reason: snapshotstore.Reason(err), Message: fmt.Sprintf("verifying %s: %v", job.URI, err)}
	}
	return Result{URI: job.URI, SizeBytes: size, Checksum: sum, Message: "verified"}
}

// RunVerifyAgent is `etcd-operator verify-agent`: it exits 0 when the stored file was read
// whole and has the expected checksum, 1 otherwise; the outcome is in --result-file either way.
func RunVerifyAgent(args []string) int {
	req, err := request.ParseVerify(args)
	if err != nil {
		return badArguments(err)
	}
	return runOnStore(req.Store, req.Run, func(ctx context.Context, st snapshotstore.Store) Result {
		res := Verify(ctx, VerifyJob{Store: st, Name: req.Name, URI: req.URI, Checksum: req.Checksum})
		if errors.Is(ctx.Err(), context.DeadlineExceeded) && res.Reason != "" {
			res.Reason, res.Message = etcdv1.ReasonDeadlineExceeded, fmt.Sprintf("the verification did not finish within %s: %s", req.Run.TimeoutOrDefault(), res.Message)
		}
		return res
	})
}
