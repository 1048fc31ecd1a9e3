package request

import (
	"flag"
	"fmt"
	"strings"
)

// Snapshot is `snapshot-agent`: take one snapshot of the cluster at Endpoints and store it
// as Name, or, with Delete, delete the stored file Name if it is Owner's.
type Snapshot struct {
	// Name is the S3 key or the path in the volume of the snapshot file; URI names it in
	// the result.
	Name, URI string
	// Owner is namespace/name/uid of the EtcdSnapshot: recorded with the file, and the only
	// owner whose file Delete deletes.
	Owner string
	// Delete deletes the stored file (and any partial one) instead of taking a snapshot.
	Delete bool
	// Checksum, with Delete, is the checksum the EtcdSnapshot recorded: it proves a file
	// stored without an owner this snapshot's own.
	Checksum string
	// Endpoints are the client URLs of the cluster's members; CAFile the CA that signed their
	// client certificates (client TLS), CertFile and KeyFile the agent's own (mutual TLS).
	Endpoints                 []string
	CAFile, CertFile, KeyFile string
	// ScratchDir holds the snapshot file between etcd and the store.
	ScratchDir string
	// ReportProgress writes the agent's progress into the status of the EtcdSnapshot Owner
	// names, with the Pod's ServiceAccount token.
	ReportProgress bool
	Store          Store
	Run            Run
}

// Args is the agent's argv for the request.
func (r Snapshot) Args() []string {
	args := []string{CommandSnapshot, "--name=" + r.Name, "--uri=" + r.URI}
	args = append(args, r.Run.timeoutArgs()...)
	args = append(args, "--owner="+r.Owner)
	if r.Delete {
		args = append(args, "--delete")
	}
	args = append(args, optional("checksum", r.Checksum)...)
	args = append(args, etcdAccessArgs(r.Endpoints, r.CAFile, r.CertFile, r.KeyFile)...)
	args = append(args, optional("scratch-dir", r.ScratchDir)...)
	if r.ReportProgress {
		args = append(args, "--report-progress")
	}
	args = append(args, r.Store.args()...)
	return append(args, r.Run.resultFileArgs()...)
}

// ParseSnapshot reads the flags of `snapshot-agent` (its arguments after the command).
func ParseSnapshot(args []string) (Snapshot, error) {
	var r Snapshot
	err := parseFlags(CommandSnapshot, args, &r.Store, &r.Run, func(fs *flag.FlagSet) {
		bindFile(fs, &r.Name, &r.URI)
		fs.StringVar(&r.Owner, "owner", "", "namespace/name/uid of the EtcdSnapshot: recorded with the file, and the only owner whose file --delete deletes")
		fs.BoolVar(&r.Delete, "delete", false, "delete the stored snapshot file (and any partial one) instead of taking one")
		fs.StringVar(&r.Checksum, "checksum", "", "with --delete: the checksum the EtcdSnapshot recorded, which proves a file stored without an owner its own")
		bindEtcdAccess(fs, &r.Endpoints, &r.CAFile, &r.CertFile, &r.KeyFile)
		fs.StringVar(&r.ScratchDir, "scratch-dir", "", "directory for the snapshot file between etcd and the store")
		fs.BoolVar(&r.ReportProgress, "report-progress", false, "write progress into the status of the EtcdSnapshot --owner names, with the Pod's ServiceAccount token")
	})
	return r, err
}

// Restore is `restore-agent`: put the snapshot file Name into a new member's data directory
// before etcd starts, unless the directory holds a member already.
type Restore struct {
	// Name is the S3 key or the path in the volume of the snapshot file; URI names it in
	// messages.
	Name, URI string
	// Checksum is the sha256:<hex> expected of the file; when empty, the one recorded beside
	// the file, if any.
	Checksum string
	// DataDir is etcd's data directory; StagingDir a scratch directory on the same volume.
	DataDir, StagingDir string
	// Etcdutl is the etcdutl of the cluster's etcd version (DefaultEtcdutl when empty).
	Etcdutl string
	// The member's bootstrap, as etcd itself starts with it (--name, --initial-cluster,
	// --initial-cluster-token, --initial-advertise-peer-urls).
	MemberName, InitialCluster, InitialClusterToken, InitialAdvertisePeerURLs string
	// Archive, when its prefix is set, restores to its target: the archive is replayed on
	// the snapshot with Etcd (the etcd of the cluster's version; the image's when empty).
	Archive ArchiveTarget
	Etcd    string
	Store   Store
	Run     Run
}

// EtcdutlOrDefault is the etcdutl the agent runs.
func (r Restore) EtcdutlOrDefault() string {
	if r.Etcdutl == "" {
		return DefaultEtcdutl
	}
	return r.Etcdutl
}

// Args is the agent's argv for the request.
func (r Restore) Args() []string {
	args := []string{CommandRestore, "--uri=" + r.URI, "--data-dir=" + r.DataDir, "--staging-dir=" + r.StagingDir}
	args = append(args, optional("etcdutl", r.Etcdutl)...)
	args = append(args, "--member-name="+r.MemberName, "--initial-cluster="+r.InitialCluster,
		"--initial-cluster-token="+r.InitialClusterToken, "--initial-advertise-peer-urls="+r.InitialAdvertisePeerURLs)
	args = append(args, optional("checksum", r.Checksum)...)
	args = append(append(args, r.Store.args()...), "--name="+r.Name)
	args = append(args, r.Run.timeoutArgs()...)
	args = append(args, r.Run.resultFileArgs()...)
	// Last, and only when set: a restore without a target keeps the argv of earlier releases.
	args = append(args, r.Archive.args()...)
	return append(args, optional("etcd", r.Etcd)...)
}

// ParseRestore reads the flags of `restore-agent` (its arguments after the command).
func ParseRestore(args []string) (Restore, error) {
	var r Restore
	err := parseFlags(CommandRestore, args, &r.Store, &r.Run, func(fs *flag.FlagSet) {
		bindFile(fs, &r.Name, &r.URI)
		fs.StringVar(&r.Checksum, "checksum", "", "expected sha256:<hex> of the file")
		fs.StringVar(&r.DataDir, "data-dir", "", "etcd's data directory")
		fs.StringVar(&r.StagingDir, "staging-dir", "", "scratch directory on the same volume")
		fs.StringVar(&r.Etcdutl, "etcdutl", "", "etcdutl of the cluster's version (default "+DefaultEtcdutl+")")
		fs.StringVar(&r.MemberName, "member-name", "", "etcd --name")
		fs.StringVar(&r.InitialCluster, "initial-cluster", "", "etcd --initial-cluster")
		fs.StringVar(&r.InitialClusterToken, "initial-cluster-token", "", "etcd --initial-cluster-token")
		fs.StringVar(&r.InitialAdvertisePeerURLs, "initial-advertise-peer-urls", "", "etcd --initial-advertise-peer-urls")
		r.Archive.bind(fs)
		fs.StringVar(&r.Etcd, "etcd", "", "with --archive-prefix: the etcd binary to replay the archive on")
	})
	if err == nil && r.Archive.Prefix != "" && (r.Archive.Revision > 0) == !r.Archive.Time.IsZero() {
		err = fmt.Errorf("%s: --archive-prefix needs exactly one of --to-revision or --to-time", CommandRestore)
	}
	return r, err
}

// Verify is `verify-agent`: read the stored file Name whole, as a restore of it would,
// and check that it has Checksum.
type Verify struct {
	// Name is the S3 key or the path in the volume of the snapshot file; URI names it in
	// messages.
	Name, URI string
	// Checksum is the sha256:<hex> the EtcdSnapshot recorded.
	Checksum string
	Store    Store
	Run      Run
}

// Args is the agent's argv for the request.
func (r Verify) Args() []string {
	args := []string{CommandVerify, "--name=" + r.Name, "--uri=" + r.URI, "--checksum=" + r.Checksum}
	args = append(args, r.Run.timeoutArgs()...)
	args = append(args, r.Store.args()...)
	return append(args, r.Run.resultFileArgs()...)
}

// ParseVerify reads the flags of `verify-agent` (its arguments after the command).
func ParseVerify(args []string) (Verify, error) {
	var r Verify
	err := parseFlags(CommandVerify, args, &r.Store, &r.Run, func(fs *flag.FlagSet) {
		bindFile(fs, &r.Name, &r.URI)
		fs.StringVar(&r.Checksum, "checksum", "", "expected sha256:<hex> of the file (the EtcdSnapshot's)")
	})
	return r, err
}

// CopySelf is `copy-self DEST`: copy the running binary to Dest, so that a container of
// another image (etcd's, which has etcdutl but no shell) can run the restore agent.
type CopySelf struct {
	Dest string
}

// Args is the agent's argv for the request.
func (r CopySelf) Args() []string {
	return []string{CommandCopySelf, r.Dest}
}

// ParseCopySelf reads the arguments of `copy-self` (after the command): one destination.
func ParseCopySelf(args []string) (CopySelf, error) {
	if len(args) != 1 {
		return CopySelf{}, fmt.Errorf("usage: %s DEST", CommandCopySelf)
	}
	return CopySelf{Dest: args[0]}, nil
}

// bindEtcdAccess binds the flags that say how an agent reaches the cluster's etcd: the
// members' client URLs, the CA of their certificates (client TLS), and the agent's own
// certificate and key (mutual TLS). Every agent command that talks to etcd takes them.
func bindEtcdAccess(fs *flag.FlagSet, endpoints *[]string, caFile, certFile, keyFile *string) {
	fs.Func("endpoints", "comma-separated client URLs of the cluster's members", func(s string) error {
		*endpoints = splitList(s)
		return nil
	})
	fs.StringVar(caFile, "ca-file", "", "CA that signed the members' client certificates (client TLS)")
	fs.StringVar(certFile, "cert-file", "", "client certificate (mutual TLS)")
	fs.StringVar(keyFile, "key-file", "", "client key (mutual TLS)")
}

// etcdAccessArgs is the argv of bindEtcdAccess's flags; an empty one is left out.
func etcdAccessArgs(endpoints []string, caFile, certFile, keyFile string) []string {
	args := optional("endpoints", strings.Join(endpoints, ","))
	args = append(args, optional("ca-file", caFile)...)
	args = append(args, optional("cert-file", certFile)...)
	return append(args, optional("key-file", keyFile)...)
}
