package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/test/docs"
)

// Sections of the reference docs that walk through one capability step by step, each run as
// written by one test below: its YAML blocks saved under their names, then every command of
// its shell blocks marked run, in order, in one bash with kubectl and the plugin on PATH and a
// kubeconfig of its own whose namespace is the test's. Each command must succeed within its
// own timeout and print what a one-word comment says; then the test checks what the section
// claims in the cluster itself.

// readSection reads and parses one section of the document at path, from the checkout's
// root, as a walkthrough.
func readSection(t *testing.T, path, heading string) docs.Walkthrough {
	t.Helper()
	var w docs.Walkthrough
	doc, err := docs.Read(path)
	if err == nil {
		w, err = docs.ParseSection(doc, heading)
	}
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return w
}

// sectionShell saves the walkthrough's files in a directory of the test's and starts the
// walkthrough's shell there, its environment walkthroughEnv's and env.
func sectionShell(t *testing.T, ns string, w docs.Walkthrough, env ...string) *shell {
	t.Helper()
	dir := t.TempDir()
	for name, text := range w.Files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return startShell(t, dir, dir, append(walkthroughEnv(t, dir, ns, w), env...))
}

// runSection runs the commands in order and stops the test at the first that does not do
// what the document says, or whose output check (when not nil) finds wanting: check returns
// what is wrong with a command's stdout, "" when nothing is (or it does not know the command).
func runSection(t *testing.T, doc string, sh *shell, cmds []docs.Command, check func(c docs.Command, stdout string) string) {
	t.Helper()
	for _, c := range cmds {
		stdout, stderr, err := sh.run(c.Text, c.Timeout())
		t.Logf("%s:%d: %s\n%s%s", doc, c.Line, c.Text, stdout, stderr)
		msg := judge(c, stdout, stderr, err)
		if msg == "" && check != nil {
			msg = check(c, stdout)
		}
		if msg != "" {
			t.Fatalf("%s:%d: %s: %s", doc, c.Line, c.Text, msg)
		}
	}
}

// shellVariable is the value of a variable the walkthrough's commands set in sh.
func shellVariable(t *testing.T, sh *shell, name string) string {
	t.Helper()
	stdout, stderr, err := sh.run(`printf '%s' "$`+name+`"`, time.Minute)
	if err != nil || stdout == "" {
		t.Fatalf("the walkthrough's $%s: %q (%v %s)", name, stdout, err, stderr)
	}
	return stdout
}

// healthyMembers checks the output of etcdctl endpoint health --cluster: every one of n
// members healthy.
func healthyMembers(stdout string, n int) string {
	if got := strings.Count(stdout, "is healthy"); got != n {
		return fmt.Sprintf("%d members report healthy, want %d", got, n)
	}
	return ""
}

// The PITR section's names: the cluster, its schedule and the cluster restored to T.
const (
	pitrDocCluster  = "orders"
	pitrDocSchedule = "orders-nightly"
	pitrDocRestored = "orders-before-mistake"
)

// docs/backup-restore.md, "Point-in-time recovery", as a reader runs its step by step: the
// store's coordinates are the local cluster's MinIO, given as the environment the section
// names, with a bucket of the test's. A schedule with spec.archive archives a 3-member
// cluster; two keys are written and archived, a time T noted, one key deleted and another
// written; kubectl etcd restore --to T makes a cluster that holds exactly the two keys as
// they were, at the revision of the second (every key, value, create and mod revision the
// source had then), none of the mistake, while the source holds the mistake.
func TestPointInTimeRecoveryAsWritten(t *testing.T) {
	t.Parallel()
	w := readSection(t, "docs/backup-restore.md", "## Point-in-time recovery")
	ns := namespace(t)
	bucket := bucketFor(t, ns)
	s3 := localS3(t)
	sh := sectionShell(t, ns, w, "S3_ENDPOINT="+s3.endpoint, "S3_BUCKET="+bucket, "AWS_REGION=us-east-1",
		"S3_FORCE_PATH_STYLE=true", "AWS_ACCESS_KEY_ID="+s3.accessKey, "AWS_SECRET_ACCESS_KEY="+s3.secretKey)
	checked := 0
	runSection(t, "backup-restore.md", sh, w.Commands, func(c docs.Command, stdout string) string {
		if c.Text != "kubectl exec "+pitrDocRestored+"-1 -- etcdctl get /orders/ --prefix" {
			return ""
		}
		checked++
		if stdout != "/orders/1\npaid\n/orders/2\npaid\n" {
			return "want /orders/1 and /orders/2, each paid, as the section says"
		}
		return ""
	})
	if checked != 1 {
		t.Fatalf("the section's listing of the restored keys ran %d times, want once", checked)
	}
	target, err := time.Parse(time.RFC3339, shellVariable(t, sh, "T"))
	if err != nil {
		t.Fatal(err)
	}
	rev, err := strconv.ParseInt(shellVariable(t, sh, "REV"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}

	restored := getCluster(t, ns, pitrDocRestored).Spec.Bootstrap
	if restored == nil || restored.Restore == nil || restored.Restore.Source.ScheduleRef == nil || restored.Restore.Source.ScheduleRef.Name != pitrDocSchedule ||
		restored.Restore.Target == nil || restored.Restore.Target.Time == nil || !restored.Restore.Target.Time.Time.Equal(target) {
		t.Fatalf("kubectl etcd restore made spec.bootstrap %+v; want the schedule %s and the time %s", restored, pitrDocSchedule, target)
	}
	checkRestoredBeforeTheMistake(t, ns, rev, target)
}

// checkRestoredBeforeTheMistake checks that the source holds the mistake and the cluster
// restored to target exactly what the source held at rev, at rev.
func checkRestoredBeforeTheMistake(t *testing.T, ns string, rev int64, target time.Time) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	src := dialClusterWith(t, ns, pitrDocCluster, access{})
	then, err := src.Get(ctx, "/orders/", clientv3.WithPrefix(), clientv3.WithRev(rev))
	if err != nil {
		t.Fatal(err)
	}
	now, err := src.Get(ctx, "/orders/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	if keys := kvKeys(now.Kvs); keys != "/orders/2 /orders/3" {
		t.Fatalf("the source holds %s: the mistake (/orders/1 deleted, /orders/3 written) did not happen", keys)
	}
	got, err := dialClusterWith(t, ns, pitrDocRestored, access{}).Get(ctx, "/orders/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if got.Header.Revision != rev {
		t.Errorf("the cluster restored to %s is at revision %d; want %d, the second key's (nothing was written between it and the mistake)", target, got.Header.Revision, rev)
	}
	if a, b := kvText(then.Kvs), kvText(got.Kvs); a != b || kvKeys(got.Kvs) != "/orders/1 /orders/2" {
		t.Fatalf("restored to %s:\n%s\nwant what the source held at revision %d:\n%s", target, b, rev, a)
	}
}

// kvKeys is the keys, in order, separated by spaces.
func kvKeys(kvs []*mvccpb.KeyValue) string {
	var keys []string
	for _, kv := range kvs {
		keys = append(keys, string(kv.Key))
	}
	return strings.Join(keys, " ")
}

// kvText is every key with its value, create and mod revision and version, a line each.
func kvText(kvs []*mvccpb.KeyValue) string {
	var b strings.Builder
	for _, kv := range kvs {
		fmt.Fprintf(&b, "%s=%s create %d mod %d version %d\n", kv.Key, kv.Value, kv.CreateRevision, kv.ModRevision, kv.Version)
	}
	return b.String()
}

// The cluster of day-two.md's step by step of going back a version.
const downgradeDocCluster = "example"

// docs/day-two.md, "Going back a version", as a reader runs its step by step: a 3-member
// cluster on 3.6.16, a key written, spec.version set to 3.5.35, and the waits for each stage
// (Downgrading, status.version 3.5.35, Progressing Idle, the DowngradeEnabled
// event; not Downgraded, sent alongside Idle and so not yet listed at times). The section's member list must show every member on 3.5.35, etcdctl every member
// healthy and the key; then every member runs the 3.5.35 image with the member ID it had on
// 3.6.16, etcd itself says no downgrade is in progress, and the key reads back through the
// client Service.
func TestGoingBackAVersionAsWritten(t *testing.T) {
	t.Parallel()
	w := readSection(t, "docs/day-two.md", "## Going back a version")
	ns := namespace(t)
	sh := sectionShell(t, ns, w)
	var before *etcdv1.EtcdCluster
	checked := 0
	runSection(t, "day-two.md", sh, w.Commands, func(c docs.Command, stdout string) string {
		switch {
		case strings.Contains(c.Text, "etcdctl put greeting hello"):
			// The member IDs on 3.6.16, once the cluster settled, before the change.
			before = waitSettled(t, ns, downgradeDocCluster, 3, 4*time.Minute)
			if runningVersions(before, etcdVersion) != 3 {
				return fmt.Sprintf("before the change, want 3 members on %s: %+v", etcdVersion, before.Status.Members)
			}
		case strings.Contains(c.Text, "{range .status.members[*]}"):
			checked++
			if n := strings.Count(stdout, " "+newest35+"\n"); n != 3 {
				return fmt.Sprintf("%d members listed on %s, want 3", n, newest35)
			}
		case strings.Contains(c.Text, "etcdctl endpoint health --cluster"):
			checked++
			return healthyMembers(stdout, 3)
		}
		return ""
	})
	if before == nil || checked != 2 {
		t.Fatalf("the section's key before the change (%v) and its two checks after it (%d ran: the members' versions, endpoint health)", before != nil, checked)
	}
	checkDowngraded(t, ns, before)
}

// checkDowngraded checks the section's cluster after the downgrade: settled, every member on
// 3.5.35 (its image too) with the ID it had before, etcd's downgrade over, and the key kept.
func checkDowngraded(t *testing.T, ns string, before *etcdv1.EtcdCluster) {
	t.Helper()
	after := waitSettled(t, ns, downgradeDocCluster, 3, 4*time.Minute)
	if b, a := fmt.Sprint(sorted(memberIDs(before))), fmt.Sprint(sorted(memberIDs(after))); a != b {
		t.Fatalf("member IDs changed across the downgrade:\n before %s\n after  %s", b, a)
	}
	if got := runningVersions(after, newest35); got != 3 || after.Status.Version != newest35 {
		t.Fatalf("%d of 3 members report %s, status.version %s", got, newest35, after.Status.Version)
	}
	checkEtcdPods(t, ns, downgradeDocCluster, newest35)

	cli := dialClusterWith(t, ns, downgradeDocCluster, access{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// etcd's own word that the downgrade is over, as TestDowngradeFrom36To35UnderLoad asks it:
	// a validation of 3.4, which changes nothing, is refused while a downgrade is on.
	if _, err := cli.Downgrade(ctx, clientv3.DowngradeValidate, "3.4.0"); errors.Is(err, rpctypes.ErrDowngradeInProcess) || (err != nil && strings.Contains(err.Error(), "downgrade job in progress")) {
		t.Fatalf("the section ended but etcd still has the downgrade enabled: %v", err)
	} else if err != nil {
		t.Fatalf("asking etcd about the downgrade: %v", err)
	}
	got, err := cli.Get(ctx, "greeting")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Kvs) != 1 || string(got.Kvs[0].Value) != "hello" {
		t.Fatalf("greeting after the downgrade: %v; want hello", got.Kvs)
	}
}
