package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/snapshotstore"
)

// SnapshotJob is one snapshot to take.
type SnapshotJob struct {
	Etcd clientv3.Config
	// Store and Name: where the file goes; URI is how status names it.
	Store snapshotstore.Store
	Name  string
	URI   string
	// Owner is recorded with the file (snapshotstore.OwnerOf): only this EtcdSnapshot may delete it.
	Owner string
	// ScratchDir holds the snapshot file between etcd and the store; the system's temporary
	// directory when empty.
	ScratchDir string
	// Progress receives the snapshot's progress on Throttle's terms (DefaultThrottle when
	// zero); none is reported when nil.
	Progress ProgressSink
	Throttle Throttle
}

// MemberState is what the agent learned about one voter before choosing where to snapshot.
type MemberState struct {
	Name         string
	ClientURL    string
	Leader       bool
	AppliedIndex uint64
	Version      string
	ClusterID    uint64
	// DBSize is the size of the member's database file: what its snapshot will be.
	DBSize int64
	Err    error
}

// ChooseMember picks the member to stream the snapshot from: a voter that answered and has
// applied as much as any other (so the snapshot is up to date), a follower before the leader
// (the leader has the most work already). Learners are never passed in.
func ChooseMember(members []MemberState) (MemberState, bool) {
	var ok []MemberState
	var newest uint64
	for _, m := range members {
		if m.Err != nil || m.ClientURL == "" {
			continue
		}
		ok = append(ok, m)
		newest = max(newest, m.AppliedIndex)
	}
	// A member within this many entries of the newest counts as up to date: followers apply
	// a moment after the leader.
	const slack = 100
	var upToDate []MemberState
	for _, m := range ok {
		if m.AppliedIndex+slack >= newest {
			upToDate = append(upToDate, m)
		}
	}
	if len(upToDate) == 0 {
		return MemberState{}, false
	}
	sort.SliceStable(upToDate, func(i, j int) bool {
		if upToDate[i].Leader != upToDate[j].Leader {
			return !upToDate[i].Leader
		}
		return upToDate[i].AppliedIndex > upToDate[j].AppliedIndex
	})
	return upToDate[0], true
}

// inspectMembers lists the voters and asks each for its status.
func inspectMembers(ctx context.Context, cli *clientv3.Client) ([]MemberState, error) {
	list, err := cli.MemberList(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing the members: %w", err)
	}
	var out []MemberState
	for _, m := range list.Members {
		if m.IsLearner || len(m.ClientURLs) == 0 {
			continue
		}
		st := MemberState{Name: m.Name, ClientURL: m.ClientURLs[0]}
		resp, err := cli.Status(ctx, st.ClientURL)
		if err != nil {
			st.Err = err
		} else {
			st.Leader = resp.Leader == resp.Header.MemberId
			st.AppliedIndex = resp.RaftAppliedIndex
			st.Version = resp.Version
			st.ClusterID = resp.Header.ClusterId
			st.DBSize = resp.DbSize
		}
		out = append(out, st)
	}
	return out, nil
}

// TakeSnapshot streams a snapshot of the cluster into the store and verifies it: etcd's own
// hash at the end of the stream, then the stored copy read back in full. A file under the
// final name appears only after both checks passed.
func TakeSnapshot(ctx context.Context, job SnapshotJob) Result {
	if failure, ok := checkDestination(ctx, job); !ok {
		return failure
	}
	cli, member, err := connectToSnapshotMember(ctx, job.Etcd)
	if err != nil {
		return Result{Reason: etcdv1.ReasonClusterNotAvailable, Message: err.Error()}
	}
	defer cli.Close() //nolint:errcheck // best effort
	scratch, err := createScratch(job.ScratchDir)
	if err != nil {
		return Result{Reason: snapshotstore.Reason(err), Message: fmt.Sprintf("creating the scratch file: %v", err)}
	}
	defer scratch.remove()
	meter := &progressMeter{expected: member.DBSize + snapshotHashSize, written: scratch.stored}
	stopReporting := startReporting(ctx, job.Progress, meter, job.Throttle)
	defer stopReporting()
	tmp, version, failure := streamAndStore(ctx, cli, member, job, scratch)
	if tmp == "" {
		return failure
	}
	sr := scratch.sr
	revision, err := snapshotstore.FileRevision(scratch.path)
	if err != nil {
		_ = job.Store.Remove(ctx, tmp)
		return Result{Reason: etcdv1.ReasonSnapshotCorrupt, Message: err.Error()}
	}
	// The read-back counts as the second half of the work.
	if _, _, err := snapshotstore.VerifyStored(ctx, countingStore{Store: job.Store, n: &meter.verified}, tmp, sr.Checksum()); err != nil {
		_ = job.Store.Remove(ctx, tmp)
		return storeFailure("verifying the stored copy", err)
	}
	if err := job.Store.Commit(ctx, tmp, job.Name, sr.Checksum(), job.Owner); err != nil {
		_ = job.Store.Remove(ctx, tmp)
		return storeFailure("completing the snapshot file", err)
	}
	// The member's server version (3.6.16); the snapshot header's is the storage version
	// (3.6.0), which says less about what made the file.
	if member.Version != "" {
		version = member.Version
	}
	return Result{
		URI: job.URI, SizeBytes: sr.Size(), Checksum: sr.Checksum(),
		Revision: revision, ClusterID: strconv.FormatUint(member.ClusterID, 16),
		Member: member.Name, EtcdVersion: version,
	}
}

// checkDestination fails before any work when the store cannot take the file: the bucket is
// missing or refuses the credentials, or a file of that name exists (never overwritten).
func checkDestination(ctx context.Context, job SnapshotJob) (Result, bool) {
	if s3, ok := job.Store.(*snapshotstore.S3Store); ok {
		if err := s3.CheckBucket(ctx); err != nil {
			return storeFailure("checking the bucket", err), false
		}
	}
	exists, err := job.Store.Exists(ctx, job.Name)
	if err != nil {
		return storeFailure("looking for an earlier file", err), false
	}
	if exists {
		return storeFailure("", fmt.Errorf("%w: %s; the operator never overwrites a snapshot: delete it or pick another name", snapshotstore.ErrAlreadyExists, job.URI)), false
	}
	return Result{}, true
}

// streamAndStore streams the snapshot from member into the scratch file and, at the same
// time, from the scratch file to the store's temporary name; it returns that name and the
// snapshot's version, or "" and the failure. The store sees the end of the file only after
// etcd's hash passed, so a broken or damaged stream fails the upload too (and nothing is
// left under the temporary name); a store that fails stops etcd's stream.
func streamAndStore(ctx context.Context, cli *clientv3.Client, member MemberState, job SnapshotJob, scratch *scratchFile) (string, string, Result) {
	streaming, stop := context.WithCancel(ctx)
	defer stop()
	resp, err := cli.SnapshotWithVersion(streaming)
	if err != nil {
		return "", "", Result{Reason: etcdv1.ReasonClusterNotAvailable, Message: fmt.Sprintf("member %s refused the snapshot: %v", member.Name, err)}
	}
	defer resp.Snapshot.Close() // read to its end or abandoned
	saved := make(chan error, 1)
	go func() { saved <- scratch.save(resp.Snapshot) }()
	tmp, storeErr := writeTemp(ctx, job, scratch)
	if storeErr != nil {
		stop()
	}
	saveErr := <-saved
	// The upload fails too when the stream failed (it reads the stream's error): only a
	// store error that is not the stream's own is the store's fault.
	storeFirst := storeErr != nil && (saveErr == nil || !errors.Is(storeErr, saveErr))
	switch {
	case storeFirst:
		return "", "", storeFailure("writing the snapshot", storeErr)
	case errors.Is(saveErr, snapshotstore.ErrCorrupt):
		return "", "", Result{Reason: etcdv1.ReasonClusterNotAvailable, Message: fmt.Sprintf("the snapshot stream from %s broke off or was damaged: %v", member.Name, saveErr)}
	case saveErr != nil:
		return "", "", Result{Reason: snapshotstore.Reason(saveErr), Message: fmt.Sprintf("saving the snapshot to scratch space: %v", saveErr)}
	}
	return tmp, resp.Version, Result{}
}

// writeTemp copies the scratch file, as it grows, to the store's temporary name.
func writeTemp(ctx context.Context, job SnapshotJob, scratch *scratchFile) (string, error) {
	r, err := scratch.reader()
	if err != nil {
		return "", err
	}
	defer r.Close() // read-only
	return job.Store.WriteTemp(ctx, job.Name, r)
}

// snapshotWindow is how much of etcd's stream may be on its way to the agent, unread: gRPC's
// dynamic window grows to 16 MiB, which the agent held in memory whenever the scratch file's
// writes fell behind the network; a fixed window keeps memory flat, and 1 MiB keeps a local
// network busy.
const snapshotWindow = 1 << 20

// connectToSnapshotMember returns a client of the chosen member only, so the snapshot stream
// comes from it.
func connectToSnapshotMember(ctx context.Context, cfg clientv3.Config) (*clientv3.Client, MemberState, error) {
	all, err := clientv3.New(cfg)
	if err != nil {
		return nil, MemberState{}, fmt.Errorf("connecting to the cluster: %w", err)
	}
	states, err := inspectMembers(ctx, all)
	_ = all.Close()
	if err != nil {
		return nil, MemberState{}, err
	}
	member, ok := ChooseMember(states)
	if !ok {
		return nil, MemberState{}, fmt.Errorf("no voter answered with its status (%d voters)", len(states))
	}
	one := cfg
	one.Endpoints = []string{member.ClientURL}
	one.DialOptions = append(slices.Clone(cfg.DialOptions),
		grpc.WithInitialWindowSize(snapshotWindow), grpc.WithInitialConnWindowSize(snapshotWindow))
	cli, err := clientv3.New(one)
	if err != nil {
		return nil, MemberState{}, fmt.Errorf("connecting to member %s: %w", member.Name, err)
	}
	return cli, member, nil
}

func storeFailure(doing string, err error) Result {
	msg := err.Error()
	if doing != "" {
		msg = doing + ": " + msg
	}
	return Result{Reason: snapshotstore.Reason(err), Message: msg}
}
