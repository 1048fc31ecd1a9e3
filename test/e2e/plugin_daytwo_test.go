package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/plugin"
	"github.com/quorumkeeper/etcd-operator/internal/plugin/report"
)

// The plugin's day-two commands against a cluster with mutual TLS and auth, run on the host:
// version, -o name and wide, forfeit-leadership, snapshot CLUSTER PATH, logs, report (with no
// Secret's data in it) and restart (refused mid-scale; then every member once, one at a time,
// the leader last, no write lost).
func TestPluginDayTwoCommandsAgainstTLSAndAuthCluster(t *testing.T) {
	t.Parallel()
	run := securePluginRun(t)
	p := dayTwoRun{pluginRun: run, access: root(access{TLS: secretTLS(t, journeyAppClient(t, run.ns), clientServiceHost(run.ns, journeyCluster))}, run.password)}
	t.Run("version", p.version)
	t.Run("-o name and wide", p.outputFormats)
	t.Run("forfeit-leadership", p.forfeitLeadership)
	t.Run("snapshot CLUSTER PATH", p.snapshotToPath)
	t.Run("logs", p.logs)
	t.Run("report", p.report)
	t.Run("restart", p.restart)
}

// dayTwoRun is the cluster the day-two plugin test works on, and how to write to it.
type dayTwoRun struct {
	pluginRun
	access access
}

func (p dayTwoRun) status(t *testing.T) plugin.ClusterStatus {
	t.Helper()
	var st plugin.ClusterStatus
	if err := json.Unmarshal([]byte(mustPlugin(t, p.bin, p.ns, "status", journeyCluster, "-o", "json")), &st); err != nil {
		t.Fatal(err)
	}
	return st
}

func (p dayTwoRun) leader(t *testing.T) string {
	t.Helper()
	for _, r := range p.status(t).Members {
		if r.Leader {
			return r.Name
		}
	}
	t.Fatal("status shows no leader")
	return ""
}

// version: the plugin's, the operator's from its Deployment (deployed from config/), and the
// API server's.
func (p dayTwoRun) version(t *testing.T) {
	var info plugin.VersionInfo
	if err := json.Unmarshal([]byte(mustPlugin(t, p.bin, p.ns, "version", "-o", "json")), &info); err != nil {
		t.Fatal(err)
	}
	if info.Plugin.Version == "" || info.Server == "" || info.ServerError != "" || info.OperatorError != "" {
		t.Fatalf("version: %+v", info)
	}
	found := slices.ContainsFunc(info.Operators, func(op plugin.OperatorVersion) bool {
		return op.Namespace == "etcd-operator-system" && op.Deployment == "etcd-operator" && op.Image != "" && op.Ready >= 1 && len(op.ImageIDs) > 0
	})
	if !found {
		t.Errorf("version names no running operator Deployment etcd-operator-system/etcd-operator: %+v", info.Operators)
	}
	if out := mustPlugin(t, p.bin, p.ns, "--version"); !strings.Contains(out, info.Plugin.Version) {
		t.Errorf("--version said %q, version %q", out, info.Plugin.Version)
	}
}

func (p dayTwoRun) outputFormats(t *testing.T) {
	var want []string
	for _, m := range p.members {
		want = append(want, "etcdmember.etcd-operator.cozystack.io/"+m)
	}
	for _, cmd := range []string{"status", "members"} {
		got := strings.Fields(mustPlugin(t, p.bin, p.ns, cmd, journeyCluster, "-o", "name"))
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s -o name: %q, want %q", cmd, got, want)
		}
	}
	if wide := mustPlugin(t, p.bin, p.ns, "status", journeyCluster, "-o", "wide"); !strings.Contains(wide, "POD IP") || !strings.Contains(wide, "RESTARTS") {
		t.Errorf("status -o wide:\n%s", wide)
	}
	if _, err := runPlugin(p.bin, p.ns, "version", "-o", "name"); err == nil {
		t.Error("version -o name: no refusal")
	}
}

// forfeitLeadership: Cozystack's name; the leader hands leadership to another voter.
func (p dayTwoRun) forfeitLeadership(t *testing.T) {
	was := p.leader(t)
	out := mustPlugin(t, p.bin, p.ns, "forfeit-leadership", journeyCluster)
	var from, to, id string
	if _, err := fmt.Sscanf(out, "%s handed leadership to %s (%s", &from, &to, &id); err != nil || from != was || to == was {
		t.Fatalf("forfeit-leadership said %q (leader before: %s)", out, was)
	}
	eventually(t, time.Minute, to+" leads", func() error {
		if now := p.leader(t); now != to {
			return fmt.Errorf("%s leads", now)
		}
		return nil
	})
}

// snapshotToPath: Cozystack's `snapshot PATH`, here `snapshot CLUSTER PATH`.
func (p dayTwoRun) snapshotToPath(t *testing.T) {
	file := filepath.Join(t.TempDir(), "secure.db")
	checkSavedSnapshot(t, file, mustPlugin(t, p.bin, p.ns, "snapshot", journeyCluster, file))
	if _, err := runPlugin(p.bin, p.ns, "snapshot", journeyCluster, file+".2", "--s3-bucket", "b"); err == nil || !strings.Contains(err.Error(), "exclude each other") {
		t.Errorf("snapshot PATH with --s3-bucket: %v; want a refusal", err)
	}
}

func (p dayTwoRun) logs(t *testing.T) {
	one := strings.TrimSpace(mustPlugin(t, p.bin, p.ns, "logs", journeyCluster, p.members[0], "--tail", "5"))
	if lines := strings.Split(one, "\n"); one == "" || len(lines) > 5 || strings.HasPrefix(lines[0], "[") {
		t.Errorf("logs of %s --tail 5:\n%s", p.members[0], one)
	}
	p.checkPrefixed(t, mustPlugin(t, p.bin, p.ns, "logs", journeyCluster, "--tail", "3"))
	p.checkPrefixed(t, p.follow(t))
	// A member whose container never restarted has no previous log: named, and an error.
	if _, err := runPlugin(p.bin, p.ns, "logs", journeyCluster, p.members[0], "--previous"); err == nil || !strings.Contains(err.Error(), p.members[0]) {
		t.Errorf("logs --previous of a member never restarted: %v", err)
	}
}

// follow runs `logs CLUSTER -f --tail 1` for a few seconds and returns what it printed.
func (p dayTwoRun) follow(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, p.bin, "--kubeconfig", os.Getenv("KUBECONFIG"), "-n", p.ns, "logs", journeyCluster, "-f", "--tail", "1")
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Run(); err != nil && ctx.Err() == nil {
		t.Fatalf("logs -f: %v", err)
	}
	return out.String()
}

// checkPrefixed: every line names its member, and every member has a line.
func (p dayTwoRun) checkPrefixed(t *testing.T, out string) {
	t.Helper()
	seen := map[string]bool{}
	for line := range strings.Lines(strings.TrimSpace(out)) {
		name, _, ok := strings.Cut(strings.TrimPrefix(line, "["), "] ")
		if !strings.HasPrefix(line, "[") || !ok || !slices.Contains(p.members, name) {
			t.Errorf("line without its member: %q", line)
			continue
		}
		seen[name] = true
	}
	if len(seen) != len(p.members) {
		t.Errorf("lines of %v only:\n%s", seen, out)
	}
}

// report: the bundle has the cluster's objects, etcd's status and the logs, the Secrets by
// name, and no root password or private key of any Secret in the namespace.
func (p dayTwoRun) report(t *testing.T) {
	file := filepath.Join(t.TempDir(), "report.tar.gz")
	mustPlugin(t, p.bin, p.ns, "report", journeyCluster, "-f", file)
	files := readReport(t, file)
	for name, want := range map[string]string{
		"etcdcluster.yaml": "kind: EtcdCluster", "etcdmembers.yaml": p.members[2], "pods.yaml": p.members[1],
		"pvcs.yaml": p.members[0], "services.yaml": journeyCluster + "-client", "events.yaml": "kind: List",
		"secrets.txt": "secure-root", "logs/" + p.members[0] + ".log": "etcd", "README.txt": journeyCluster,
	} {
		if !strings.Contains(files[name], want) {
			t.Errorf("%s in the report lacks %q:\n%s", name, want, files[name])
		}
	}
	var st plugin.ClusterStatus
	if err := json.Unmarshal([]byte(files["etcd/status.json"]), &st); err != nil || len(st.Members) != 3 {
		t.Errorf("etcd/status.json: %v\n%s", err, files["etcd/status.json"])
	}
	secrets := &corev1.SecretList{}
	if err := k8s.List(context.Background(), secrets, client.InNamespace(p.ns)); err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets.Items {
		for _, key := range []string{"password", corev1.TLSPrivateKeyKey} {
			v := s.Data[key]
			if len(v) == 0 {
				continue
			}
			for name, body := range files {
				if strings.Contains(body, string(v)) || strings.Contains(body, base64.StdEncoding.EncodeToString(v)) {
					t.Errorf("%s in the report holds Secret %s's %s", name, s.Name, key)
				}
			}
		}
	}
}

// readReport is the report's files by their name inside its one directory.
func readReport(t *testing.T, file string) map[string]string {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	_, files, err := report.Files(f)
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// restart: refused while the cluster is mid-scale; at rest, every member restarts once, one at
// a time, the leader last, with its ID and no write lost beyond the roll's own.
func (p dayTwoRun) restart(t *testing.T) {
	mustPlugin(t, p.bin, p.ns, "add-member", journeyCluster)
	if _, err := runPlugin(p.bin, p.ns, "restart", journeyCluster); err == nil || !strings.Contains(err.Error(), "not restarting "+journeyCluster) {
		t.Errorf("restart right after add-member: %v; want a refusal", err)
	}
	waitSettled(t, p.ns, journeyCluster, 4, 5*time.Minute)
	mustPlugin(t, p.bin, p.ns, "remove-member", journeyCluster)
	before := waitSettled(t, p.ns, journeyCluster, 3, 5*time.Minute)

	roll := watchRollWith(t, p.ns, journeyCluster, before, p.access)
	w := startWriterWith(t, p.ns, journeyCluster, "restart", p.access)
	asked := time.Now()
	out := mustPlugin(t, p.bin, p.ns, "restart", journeyCluster, "--timeout", "10m")
	if strings.Count(out, " is back: ") != 3 || !strings.Contains(out, "restarted every member of "+journeyCluster) {
		t.Errorf("restart said:\n%s", out)
	}
	if getCluster(t, p.ns, journeyCluster).Annotations[etcdv1.AnnotationRestartedAt] == "" {
		t.Error("restart left no restarted-at annotation")
	}
	after := waitSettledAfter(t, p.ns, journeyCluster, 3, asked, 4*time.Minute)
	if b, a := fmt.Sprint(sorted(memberIDs(before))), fmt.Sprint(sorted(memberIDs(after))); a != b {
		t.Fatalf("member IDs changed across the restart:\n before %s\n after  %s", b, a)
	}
	w.stopAndVerifyAtMost(t, 20, roll.check(t, "kubectl etcd restart"))
}
