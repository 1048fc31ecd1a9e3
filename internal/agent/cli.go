package agent

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/agent/request"
	"github.com/quorumkeeper/etcd-operator/internal/snapshotstore"
)

// Environment variables the agents read secrets from (never flags: flags show in the Pod spec);
// their names are the contract's (package request), here under the names the agent's callers
// know.
const (
	EnvPassword        = request.EnvRootPassword
	EnvAppliedPassword = request.EnvRootPasswordApplied
	EnvAccessKeyID     = request.EnvAWSAccessKeyID
	EnvSecretKey       = request.EnvAWSSecretAccessKey
	EnvS3CA            = request.EnvS3CA
)

// openStore opens the store a request names: a directory (a mounted PVC) or S3, with the CA
// bundle from the environment and the credentials the default chain finds there
// (snapshotstore.ChooseCredentials): the credentials Secret's keys, or else the Pod's cloud
// identity.
func openStore(s request.Store) (snapshotstore.Store, error) {
	if s.Dir != "" {
		return snapshotstore.DirStore{Root: s.Dir}, nil
	}
	if s.S3Endpoint == "" || s.S3Bucket == "" {
		return nil, errors.New("either --dir or --s3-endpoint and --s3-bucket are needed")
	}
	cfg := snapshotstore.S3Config{Endpoint: s.S3Endpoint, Bucket: s.S3Bucket, Region: s.S3Region, ForcePathStyle: s.S3PathStyle}
	switch {
	case s.S3CAFile != "":
		pem, err := os.ReadFile(s.S3CAFile)
		if err != nil {
			return nil, err
		}
		cfg.CAPEM = pem
	case os.Getenv(EnvS3CA) != "":
		cfg.CAPEM = []byte(os.Getenv(EnvS3CA))
	}
	return snapshotstore.NewS3Store(cfg)
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

// badArguments reports why the arguments do not parse and is the agent's exit code for that.
func badArguments(err error) int {
	fmt.Fprintln(os.Stderr, err)
	return 2
}

// start tunes the agent's process and starts its deadline.
func start(run request.Run) (context.Context, context.CancelFunc) {
	tuneGC()
	return context.WithTimeout(context.Background(), run.TimeoutOrDefault())
}

// runOnStore opens the store the request names and runs act on it within the deadline; it
// writes act's result, or why the store is wrong, to the result file and returns the agent's
// exit code.
func runOnStore(store request.Store, run request.Run, act func(context.Context, snapshotstore.Store) Result) int {
	ctx, cancel := start(run)
	defer cancel()
	st, err := openStore(store)
	if err != nil {
		return finish(run.ResultFileOrDefault(), Result{Reason: etcdv1.ReasonInvalidArguments, Message: err.Error()})
	}
	return finish(run.ResultFileOrDefault(), act(ctx, st))
}

// RunSnapshotAgent is `etcd-operator snapshot-agent`: it takes one snapshot and exits 0 when it
// is stored and verified, 1 otherwise; the outcome is in --result-file either way.
func RunSnapshotAgent(args []string) int {
	req, err := request.ParseSnapshot(args)
	if err != nil {
		return badArguments(err)
	}
	ctx, cancel := start(req.Run)
	defer cancel()
	f := fileOwner{name: req.Name, uri: req.URI, owner: req.Owner}
	var res Result
	if req.Delete {
		f.checksum = req.Checksum
		res = removeSnapshot(ctx, f, req.Store)
	} else {
		res = runSnapshot(ctx, req, f)
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) && res.Reason != "" {
		res.Reason, res.Message = etcdv1.ReasonDeadlineExceeded, fmt.Sprintf("the snapshot did not finish within %s: %s", req.Run.TimeoutOrDefault(), res.Message)
	}
	return finish(req.Run.ResultFileOrDefault(), res)
}

// fileOwner is a snapshot file and the EtcdSnapshot it is, or is to be, recorded for.
type fileOwner struct {
	name, uri, owner string
	// checksum is what the EtcdSnapshot's status recorded; "" when it recorded none.
	checksum string
}

func runSnapshot(ctx context.Context, req request.Snapshot, f fileOwner) Result {
	if len(req.Endpoints) == 0 || f.name == "" || f.owner == "" {
		return Result{Reason: etcdv1.ReasonInvalidArguments, Message: "--endpoints, --name and --owner are needed"}
	}
	st, err := openStore(req.Store)
	if err != nil {
		return Result{Reason: etcdv1.ReasonInvalidArguments, Message: err.Error()}
	}
	cfg, err := etcdConfig(req.Endpoints, req.CAFile, req.CertFile, req.KeyFile)
	if err != nil {
		return Result{Reason: etcdv1.ReasonInvalidArguments, Message: err.Error()}
	}
	cfg, err = withRootLogin(ctx, cfg)
	if err != nil {
		return Result{Reason: etcdv1.ReasonClusterNotAvailable, Message: err.Error()}
	}
	return TakeSnapshot(ctx, SnapshotJob{Etcd: cfg, Store: st, Name: f.name, URI: f.uri, Owner: f.owner, ScratchDir: req.ScratchDir,
		Progress: progressSink(req.ReportProgress, f.owner)})
}

// removeSnapshot deletes a snapshot file, with what is recorded beside it and its partial
// upload, when it is f.owner's (snapshotstore.MayDelete); a file that is gone already is no error,
// and a file that is another's is kept: the result says so, and the deletion succeeds, as
// there is nothing of this snapshot's to delete.
func removeSnapshot(ctx context.Context, f fileOwner, store request.Store) Result {
	if f.name == "" || f.owner == "" {
		return Result{Reason: etcdv1.ReasonInvalidArguments, Message: "--name and --owner are needed"}
	}
	st, err := openStore(store)
	if err != nil {
		return Result{Reason: etcdv1.ReasonInvalidArguments, Message: err.Error()}
	}
	recorded, err := st.RecordedOwner(ctx, f.name)
	switch {
	case errors.Is(err, snapshotstore.ErrNotFound):
		// The file is gone already: there is no owner to compare, and nothing of another's
		// to keep; what is left (its partial upload, if any) goes below.
	case err != nil:
		return storeFailure("reading the owner of "+f.uri, err)
	default:
		sum, err := st.RecordedChecksum(ctx, f.name)
		if err != nil {
			return storeFailure("reading the checksum of "+f.uri, err)
		}
		if !snapshotstore.MayDelete(recorded, sum, f.owner, f.checksum) {
			return Result{URI: f.uri, Message: keptMessage(f, recorded)}
		}
	}
	for _, n := range []string{f.name, snapshotstore.PartialName(f.name)} {
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
