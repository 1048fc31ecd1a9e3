package agent

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/backup"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// Environment variables the agents read secrets from (never flags: flags show in the Pod spec).
const (
	EnvPassword        = "ETCD_ROOT_PASSWORD"
	EnvAppliedPassword = "ETCD_ROOT_PASSWORD_APPLIED"
	// The S3 credentials and CA bundle, as the Pod specs of package specs set them.
	EnvAccessKeyID = specs.EnvAWSAccessKeyID
	EnvSecretKey   = specs.EnvAWSSecretAccessKey
	EnvS3CA        = specs.EnvS3CA
)

// storeFlags say where snapshots are stored: S3 or a directory (a mounted PVC).
type storeFlags struct {
	endpoint, bucket, region, caFile string
	pathStyle                        bool
	dir                              string
}

func (s *storeFlags) bind(fs *flag.FlagSet) {
	fs.StringVar(&s.endpoint, "s3-endpoint", "", "S3 endpoint URL")
	fs.StringVar(&s.bucket, "s3-bucket", "", "S3 bucket")
	fs.StringVar(&s.region, "s3-region", "", "S3 region")
	fs.BoolVar(&s.pathStyle, "s3-path-style", false, "address the bucket in the path")
	fs.StringVar(&s.caFile, "s3-ca-file", "", "CA bundle to trust for an https endpoint")
	fs.StringVar(&s.dir, "dir", "", "root of the mounted volume, instead of S3")
}

func (s *storeFlags) open() (backup.Store, error) {
	if s.dir != "" {
		return backup.DirStore{Root: s.dir}, nil
	}
	if s.endpoint == "" || s.bucket == "" {
		return nil, errors.New("either --dir or --s3-endpoint and --s3-bucket are needed")
	}
	cfg := backup.S3Config{
		Endpoint: s.endpoint, Bucket: s.bucket, Region: s.region, ForcePathStyle: s.pathStyle,
		AccessKeyID: os.Getenv(EnvAccessKeyID), SecretKey: os.Getenv(EnvSecretKey),
	}
	switch {
	case s.caFile != "":
		pem, err := os.ReadFile(s.caFile)
		if err != nil {
			return nil, err
		}
		cfg.CAPEM = pem
	case os.Getenv(EnvS3CA) != "":
		cfg.CAPEM = []byte(os.Getenv(EnvS3CA))
	}
	return backup.NewS3Store(cfg)
}

// agentGCPercent is the agents' GOGC, unless the environment sets one. Their live heap is a
// few MiB, most of it the packages' own from start-up (files stream through fixed buffers,
// parts are uploaded from the scratch file), but etcd's stream leaves garbage at its own
// rate: at GOGC's 100 the heap doubled between collections. Measured with a 140 MiB
// database: the snapshot agent's anonymous peak 22 MiB at 100, 18 at 50 (VmHWM 63-65 and 60-62
// MiB), time within the noise; a memory limit of 20 MiB saved 1.5 MiB more but slowed the
// stream.
const agentGCPercent = 50

// tuneGC sets agentGCPercent for an agent process.
func tuneGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(agentGCPercent)
	}
}

// agentFlags are the flags every agent has: its store, its result file and its deadline.
type agentFlags struct {
	store      storeFlags
	resultFile string
	timeout    time.Duration
}

// parse binds the common flags, parses args and starts the deadline; ok is false on bad flags.
func (a *agentFlags) parse(fs *flag.FlagSet, args []string) (context.Context, context.CancelFunc, bool) {
	fs.StringVar(&a.resultFile, "result-file", "/dev/termination-log", "where the JSON result goes")
	fs.DurationVar(&a.timeout, "timeout", 30*time.Minute, "give up after this long")
	a.store.bind(fs)
	if err := fs.Parse(args); err != nil {
		return nil, nil, false
	}
	tuneGC()
	ctx, cancel := context.WithTimeout(context.Background(), a.timeout)
	return ctx, cancel, true
}

// runOnStore parses args, opens the store the flags name and runs act on it within the
// deadline; it writes act's result, or why the arguments or the store are wrong, to the
// result file and returns the agent's exit code (2 for bad flags).
func (a *agentFlags) runOnStore(fs *flag.FlagSet, args []string, act func(context.Context, backup.Store) Result) int {
	ctx, cancel, ok := a.parse(fs, args)
	if !ok {
		return 2
	}
	defer cancel()
	st, err := a.store.open()
	if err != nil {
		return finish(a.resultFile, Result{Reason: etcdv1.ReasonInvalidArguments, Message: err.Error()})
	}
	return finish(a.resultFile, act(ctx, st))
}

// RunSnapshotAgent is `etcd-operator snapshot-agent`: it takes one snapshot and exits 0 when it
// is stored and verified, 1 otherwise; the outcome is in --result-file either way.
func RunSnapshotAgent(args []string) int {
	fs := flag.NewFlagSet("snapshot-agent", flag.ContinueOnError)
	var (
		endpoints, caFile, certFile, keyFile, name, uri, scratch string
		owner, checksum                                          string
		remove                                                   bool
		common                                                   agentFlags
	)
	fs.StringVar(&owner, "owner", "", "namespace/name/uid of the EtcdSnapshot: recorded with the file, and the only owner whose file --delete deletes")
	fs.StringVar(&checksum, "checksum", "", "with --delete: the checksum the EtcdSnapshot recorded, which proves a file stored without an owner its own")
	fs.StringVar(&scratch, "scratch-dir", "", "directory for the snapshot file between etcd and the store")
	fs.BoolVar(&remove, "delete", false, "delete the stored snapshot file (and any partial one) instead of taking one")
	fs.StringVar(&endpoints, "endpoints", "", "comma-separated client URLs of the cluster's members")
	fs.StringVar(&caFile, "ca-file", "", "CA that signed the members' client certificates (client TLS)")
	fs.StringVar(&certFile, "cert-file", "", "client certificate (mutual TLS)")
	fs.StringVar(&keyFile, "key-file", "", "client key (mutual TLS)")
	fs.StringVar(&name, "name", "", "S3 key or path in --dir of the snapshot file")
	fs.StringVar(&uri, "uri", "", "uri reported for the snapshot")
	ctx, cancel, ok := common.parse(fs, args)
	if !ok {
		return 2
	}
	defer cancel()
	var res Result
	if remove {
		res = removeSnapshot(ctx, fileOwner{name: name, uri: uri, owner: owner, checksum: checksum}, &common.store)
	} else {
		res = runSnapshot(ctx, endpoints, caFile, certFile, keyFile, fileOwner{name: name, uri: uri, owner: owner}, scratch, &common.store)
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) && res.Reason != "" {
		res.Reason, res.Message = etcdv1.ReasonDeadlineExceeded, fmt.Sprintf("the snapshot did not finish within %s: %s", common.timeout, res.Message)
	}
	return finish(common.resultFile, res)
}

// fileOwner is a snapshot file and the EtcdSnapshot it is, or is to be, recorded for.
type fileOwner struct {
	name, uri, owner string
	// checksum is what the EtcdSnapshot's status recorded; "" when it recorded none.
	checksum string
}

func runSnapshot(ctx context.Context, endpoints, caFile, certFile, keyFile string, f fileOwner, scratch string, store *storeFlags) Result {
	if endpoints == "" || f.name == "" || f.owner == "" {
		return Result{Reason: etcdv1.ReasonInvalidArguments, Message: "--endpoints, --name and --owner are needed"}
	}
	st, err := store.open()
	if err != nil {
		return Result{Reason: etcdv1.ReasonInvalidArguments, Message: err.Error()}
	}
	cfg, err := etcdConfig(strings.Split(endpoints, ","), caFile, certFile, keyFile)
	if err != nil {
		return Result{Reason: etcdv1.ReasonInvalidArguments, Message: err.Error()}
	}
	cfg, err = withRootLogin(ctx, cfg)
	if err != nil {
		return Result{Reason: etcdv1.ReasonClusterNotAvailable, Message: err.Error()}
	}
	return TakeSnapshot(ctx, SnapshotJob{Etcd: cfg, Store: st, Name: f.name, URI: f.uri, Owner: f.owner, ScratchDir: scratch})
}

// removeSnapshot deletes a snapshot file, with what is recorded beside it and its partial
// upload, when it is f.owner's (backup.MayDelete); a file that is gone already is no error,
// and a file that is another's is kept: the result says so, and the deletion succeeds, as
// there is nothing of this snapshot's to delete.
func removeSnapshot(ctx context.Context, f fileOwner, store *storeFlags) Result {
	if f.name == "" || f.owner == "" {
		return Result{Reason: etcdv1.ReasonInvalidArguments, Message: "--name and --owner are needed"}
	}
	st, err := store.open()
	if err != nil {
		return Result{Reason: etcdv1.ReasonInvalidArguments, Message: err.Error()}
	}
	recorded, err := st.RecordedOwner(ctx, f.name)
	switch {
	case errors.Is(err, backup.ErrNotFound):
		// The file is gone already: there is no owner to compare, and nothing of another's
		// to keep; what is left (its partial upload, if any) goes below.
	case err != nil:
		return storeFailure("reading the owner of "+f.uri, err)
	default:
		sum, err := st.RecordedChecksum(ctx, f.name)
		if err != nil {
			return storeFailure("reading the checksum of "+f.uri, err)
		}
		if !backup.MayDelete(recorded, sum, f.owner, f.checksum) {
			return Result{URI: f.uri, Message: keptMessage(f, recorded)}
		}
	}
	for _, n := range []string{f.name, backup.PartialName(f.name)} {
		if err := st.Remove(ctx, n); err != nil {
			return storeFailure("deleting "+f.uri, err)
		}
	}
	return Result{URI: f.uri, Message: MessageDeleted}
}

// MessageDeleted is a delete agent's message when it deleted the file (or found none).
const MessageDeleted = "deleted"

func keptMessage(f fileOwner, recorded string) string {
	if recorded == "" {
		return fmt.Sprintf("kept %s: it records no owner and not this snapshot's checksum, so this snapshot did not write it", f.uri)
	}
	return fmt.Sprintf("kept %s: it belongs to EtcdSnapshot %s, not to %s", f.uri, recorded, f.owner)
}

func etcdConfig(endpoints []string, caFile, certFile, keyFile string) (clientv3.Config, error) {
	cfg := clientv3.Config{Endpoints: endpoints, DialTimeout: 10 * time.Second, Logger: zap.NewNop()}
	if caFile == "" {
		return cfg, nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return cfg, err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return cfg, fmt.Errorf("%s holds no PEM certificate", caFile)
	}
	tlsCfg := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	if certFile != "" {
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return cfg, err
		}
		tlsCfg.Certificates = []tls.Certificate{pair}
	}
	cfg.TLS = tlsCfg
	return cfg, nil
}

// withRootLogin adds root's credentials when the cluster has auth: the password last applied
// first, then the one wanted (right after a password change only one of them works).
func withRootLogin(ctx context.Context, cfg clientv3.Config) (clientv3.Config, error) {
	var passwords []string
	for _, env := range []string{EnvAppliedPassword, EnvPassword} {
		if p := os.Getenv(env); p != "" {
			passwords = append(passwords, p)
		}
	}
	if len(passwords) == 0 {
		return cfg, nil
	}
	var lastErr error
	for _, p := range passwords {
		try := cfg
		try.Username, try.Password, try.Context = "root", p, ctx
		cli, err := clientv3.New(try)
		if err == nil {
			_ = cli.Close()
			return try, nil
		}
		lastErr = err
		if !errors.Is(err, rpctypes.ErrAuthFailed) {
			break
		}
	}
	return cfg, fmt.Errorf("logging in as root: %w", lastErr)
}

func finish(resultFile string, res Result) int {
	if err := writeResult(resultFile, res); err != nil {
		fmt.Fprintf(os.Stderr, "writing the result to %s: %v\n", resultFile, err)
	}
	if res.Reason != "" {
		fmt.Fprintf(os.Stderr, "%s: %s\n", res.Reason, res.Message)
		return 1
	}
	fmt.Fprintf(os.Stderr, "done: %s\n", res.URI)
	return 0
}
