package request

import (
	"flag"
	"strconv"
	"time"
)

// CommandArchive is the archiver: a long-running process that stores every change of a
// cluster as segments next to its schedule's snapshots.
const CommandArchive = "archive"

// Archive is `archive`: watch the cluster at Endpoints and store its changes under Prefix.
type Archive struct {
	// Prefix is the archive's S3 key prefix or directory in the volume.
	Prefix string
	// Owner is namespace/name/uid of the EtcdSnapshotSchedule: recorded with every segment,
	// and, with ReportStatus, the schedule whose status.archive the archiver writes.
	Owner string
	// Endpoints, CAFile, CertFile, KeyFile: as a snapshot's.
	Endpoints                 []string
	CAFile, CertFile, KeyFile string
	// SegmentInterval and SegmentMaxBytes close segments (the archive package's defaults
	// when zero).
	SegmentInterval time.Duration
	SegmentMaxBytes int64
	// ReportStatus writes the progress into the schedule's status.archive and reads the
	// revision to prune before from it, with the Pod's ServiceAccount token.
	ReportStatus bool
	Store        Store
}

// Args is the archiver's argv for the request.
func (r Archive) Args() []string {
	args := []string{CommandArchive, "--prefix=" + r.Prefix, "--owner=" + r.Owner}
	args = append(args, etcdAccessArgs(r.Endpoints, r.CAFile, r.CertFile, r.KeyFile)...)
	if r.SegmentInterval > 0 {
		args = append(args, "--segment-interval="+r.SegmentInterval.String())
	}
	if r.SegmentMaxBytes > 0 {
		args = append(args, "--segment-max-bytes="+strconv.FormatInt(r.SegmentMaxBytes, 10))
	}
	if r.ReportStatus {
		args = append(args, "--report-status")
	}
	return append(args, r.Store.args()...)
}

// ParseArchive reads the flags of `archive` (its arguments after the command).
func ParseArchive(args []string) (Archive, error) {
	var r Archive
	var run Run // the archiver runs until stopped and reports through the schedule's status
	err := parseFlags(CommandArchive, args, &r.Store, &run, func(fs *flag.FlagSet) {
		fs.StringVar(&r.Prefix, "prefix", "", "S3 key prefix or directory in --dir of the archive")
		fs.StringVar(&r.Owner, "owner", "", "namespace/name/uid of the EtcdSnapshotSchedule: recorded with every segment")
		bindEtcdAccess(fs, &r.Endpoints, &r.CAFile, &r.CertFile, &r.KeyFile)
		fs.DurationVar(&r.SegmentInterval, "segment-interval", 0, "close a segment with changes at least this often")
		fs.Int64Var(&r.SegmentMaxBytes, "segment-max-bytes", 0, "close a segment once its changes reach this size")
		fs.BoolVar(&r.ReportStatus, "report-status", false, "write the progress into the schedule's status.archive, with the Pod's ServiceAccount token")
	})
	return r, err
}

// ArchiveTarget is a restore's target in an archive: its prefix, and a revision or a time.
type ArchiveTarget struct {
	Prefix   string
	Revision int64
	Time     time.Time
}

// args are the target's flags; none without a prefix.
func (a ArchiveTarget) args() []string {
	if a.Prefix == "" {
		return nil
	}
	args := []string{"--archive-prefix=" + a.Prefix}
	if a.Revision > 0 {
		return append(args, "--to-revision="+strconv.FormatInt(a.Revision, 10))
	}
	return append(args, "--to-time="+a.Time.UTC().Format(time.RFC3339Nano))
}

func (a *ArchiveTarget) bind(fs *flag.FlagSet) {
	fs.StringVar(&a.Prefix, "archive-prefix", "", "restore to a target: the archive's S3 key prefix or directory in --dir")
	fs.Int64Var(&a.Revision, "to-revision", 0, "with --archive-prefix: the revision to restore to")
	fs.Func("to-time", "with --archive-prefix: the time (RFC 3339) to restore to", func(s string) error {
		t, err := time.Parse(time.RFC3339Nano, s)
		a.Time = t
		return err
	})
}
