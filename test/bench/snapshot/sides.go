package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/minio/minio-go/v7"

	"github.com/quorumkeeper/etcd-operator/internal/agent"
)

// What is measured, and who does it.
const (
	snapshotMetric = "snapshot to S3"
	restoreMetric  = "restore from S3"
	agentSide      = "agent"
	handSide       = "by hand"
)

var metrics = []string{snapshotMetric, restoreMetric}

// operation is one side's way to do one metric in the given run (0-based).
type operation func(ctx context.Context, run int) (cost, error)

// timedRun measures both metrics on both sides. Which side goes first alternates between
// runs, so that a slow moment of the shared machine does not fall on one side only. The
// restores are of the agent's snapshot of the same run.
func (b *bench) timedRun(ctx context.Context, run int, res *results) error {
	sides := []string{handSide, agentSide}
	if run%2 == 1 {
		slices.Reverse(sides)
	}
	ops := map[string]map[string]operation{
		snapshotMetric: {agentSide: b.agentSnapshot, handSide: b.handSnapshot},
		restoreMetric:  {agentSide: b.agentRestore, handSide: b.handRestore},
	}
	for _, metric := range metrics {
		for _, side := range sides {
			c, err := ops[metric][side](ctx, run)
			if err != nil {
				return fmt.Errorf("%s, %s: %w", side, metric, err)
			}
			logf("%-7s %-15s %6.2fs  peak %5.1f MiB", side, metric, c.wall.Seconds(), mib(c.peak))
			res.add(metric, side, c)
		}
	}
	return b.removeObjects(ctx, run)
}

// objectName is the key of a side's snapshot in a run.
func objectName(run int, side string) string {
	who := "hand"
	if side == agentSide {
		who = "agent"
	}
	return fmt.Sprintf("run%d/%s.db", run+1, who)
}

func uri(name string) string { return "s3://" + bucket + "/" + name }

// agentSnapshot is `etcd-operator snapshot-agent`, as the operator's Job runs it.
func (b *bench) agentSnapshot(ctx context.Context, run int) (cost, error) {
	name := objectName(run, agentSide)
	scratch := b.path("scratch")
	if err := os.MkdirAll(scratch, 0o700); err != nil {
		return cost{}, err
	}
	defer os.RemoveAll(scratch)
	res, c, err := b.agent(ctx, "snapshot-agent", "--endpoints="+b.etcdURL, "--name="+name, "--uri="+uri(name),
		"--owner=bench/"+name+"/bench", "--scratch-dir="+scratch)
	if err != nil {
		return cost{}, err
	}
	// No write reaches etcd after the load: the snapshot must be of the loaded revision.
	if res.Revision != b.db.revision || res.SizeBytes == 0 {
		return cost{}, fmt.Errorf("the agent reported revision %d and %d bytes; the database is at revision %d", res.Revision, res.SizeBytes, b.db.revision)
	}
	return c.childless(), nil
}

// idleAgent is the snapshot agent deleting a snapshot that does not exist: what the agent's
// binary costs before it does any work, the base of its peaks.
func (b *bench) idleAgent(ctx context.Context) (cost, error) {
	name := "idle/none.db"
	_, c, err := b.agent(ctx, "snapshot-agent", "--delete", "--name="+name, "--uri="+uri(name), "--owner=bench/idle/bench")
	return c.childless(), err
}

// handSnapshot is `etcdctl snapshot save` to a file, then `mc cp` of that file to the bucket.
func (b *bench) handSnapshot(ctx context.Context, run int) (cost, error) {
	dir := b.path("hand")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return cost{}, err
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "snapshot.db")
	save, err := b.command(ctx, nil, b.o.etcd("etcdctl"), "--endpoints="+b.etcdURL, "snapshot", "save", file)
	if err != nil {
		return cost{}, err
	}
	upload, err := b.mc(ctx, "cp", file, b.mcPath(objectName(run, handSide)))
	if err != nil {
		return cost{}, err
	}
	return save.childless().plus(upload), nil
}

// The member a restore makes: the same values on both sides. Its peer URL is only a name
// written into the data directory; no etcd starts on it.
const (
	restoredName  = "restored"
	restoredPeer  = "http://127.0.0.1:2380"
	restoredToken = "bench-restore"
)

// agentRestore is `etcd-operator restore-agent` of the agent's snapshot of the run, as the
// first member's init container runs it.
func (b *bench) agentRestore(ctx context.Context, run int) (cost, error) {
	dir := b.path("restore-agent")
	defer os.RemoveAll(dir)
	name := objectName(run, agentSide)
	_, c, err := b.agent(ctx, "restore-agent", "--name="+name, "--uri="+uri(name),
		"--data-dir="+filepath.Join(dir, "data"), "--staging-dir="+filepath.Join(dir, "staging"),
		"--etcdutl="+b.o.etcd("etcdutl"), "--member-name="+restoredName,
		"--initial-cluster="+restoredName+"="+restoredPeer, "--initial-cluster-token="+restoredToken,
		"--initial-advertise-peer-urls="+restoredPeer)
	if err != nil {
		return cost{}, err
	}
	return c, restoredData(filepath.Join(dir, "data"))
}

// handRestore is `mc cp` of the same object to a file, then `etcdutl snapshot restore`.
func (b *bench) handRestore(ctx context.Context, run int) (cost, error) {
	dir := b.path("restore-hand")
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "snapshot.db")
	download, err := b.mc(ctx, "cp", b.mcPath(objectName(run, agentSide)), file)
	if err != nil {
		return cost{}, err
	}
	restore, err := b.command(ctx, nil, b.o.etcd("etcdutl"), "snapshot", "restore", file,
		"--data-dir="+filepath.Join(dir, "data"), "--name="+restoredName,
		"--initial-cluster="+restoredName+"="+restoredPeer, "--initial-cluster-token="+restoredToken,
		"--initial-advertise-peer-urls="+restoredPeer)
	if err != nil {
		return cost{}, err
	}
	return download.plus(restore.childless()), restoredData(filepath.Join(dir, "data"))
}

// restoredData fails unless dataDir holds a member's database the size of the loaded one.
func restoredData(dataDir string) error {
	st, err := os.Stat(filepath.Join(dataDir, "member", "snap", "db"))
	if err != nil {
		return fmt.Errorf("no restored database: %w", err)
	}
	if st.Size() == 0 {
		return fmt.Errorf("the restored database in %s is empty", dataDir)
	}
	return nil
}

// agent runs one of the agents with the bench's S3 store and reads its result; a result
// with a reason is a failure even when the exit code said otherwise.
func (b *bench) agent(ctx context.Context, args ...string) (agent.Result, cost, error) {
	resultFile := b.path("result.json")
	defer func() { _ = os.Remove(resultFile) }()
	args = append(args, "--result-file="+resultFile, "--timeout="+b.o.timeout.String(),
		"--s3-endpoint="+b.s3URL, "--s3-bucket="+bucket, "--s3-region=us-east-1", "--s3-path-style")
	env := []string{agent.EnvAccessKeyID + "=" + accessKey, agent.EnvSecretKey + "=" + secretKey}
	c, err := b.command(ctx, env, b.o.agent, args...)
	if err != nil {
		return agent.Result{}, cost{}, err
	}
	data, err := os.ReadFile(resultFile)
	if err != nil {
		return agent.Result{}, cost{}, err
	}
	res, ok := agent.ParseResult(string(data))
	if !ok || res.Reason != "" {
		return agent.Result{}, cost{}, fmt.Errorf("the agent's result: %s", data)
	}
	return res, c, nil
}

// mc runs the MinIO client with its configuration in the temporary directory and the
// bench's MinIO under the alias mcAlias.
func (b *bench) mc(ctx context.Context, args ...string) (cost, error) {
	env := []string{"MC_HOST_" + mcAlias + "=http://" + accessKey + ":" + secretKey + "@" + hostPort(b.s3URL)}
	c, err := b.command(ctx, env, b.o.minio("mc"), append([]string{"--config-dir=" + b.path("mc"), "--quiet", "--no-color"}, args...)...)
	return c.childless(), err
}

func (b *bench) mcPath(name string) string { return mcAlias + "/" + bucket + "/" + name }

// removeObjects deletes a run's two snapshots, and fails when the bucket holds anything
// else under the run's prefix: a partial object the agent left would show here.
func (b *bench) removeObjects(ctx context.Context, run int) error {
	want := []string{objectName(run, agentSide), objectName(run, handSide)}
	var got []string
	prefix := fmt.Sprintf("run%d/", run+1)
	for obj := range b.s3.ListObjects(ctx, bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if obj.Err != nil {
			return obj.Err
		}
		got = append(got, obj.Key)
	}
	for _, key := range got {
		if err := b.s3.RemoveObject(ctx, bucket, key, minio.RemoveObjectOptions{}); err != nil {
			return err
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		return fmt.Errorf("the bucket held %v after run %d, want %v", got, run+1, want)
	}
	return nil
}
