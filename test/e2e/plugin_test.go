package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/plugin"
)

// buildPlugin compiles kubectl-etcd into a temporary directory.
func buildPlugin(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "kubectl-etcd")
	build := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "./cmd/kubectl-etcd")
	// Built in the product's module, so with the versions its go.mod ships, not the test module's.
	build.Dir = "../.."
	out, err := build.CombinedOutput()
	if err != nil {
		t.Fatalf("go build kubectl-etcd: %v\n%s", err, out)
	}
	return bin
}

// runPlugin runs `kubectl etcd` in the namespace with the test's kubeconfig. The plugin runs
// on the host and reaches members only through the API server's port-forward.
func runPlugin(bin, ns string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"--kubeconfig", os.Getenv("KUBECONFIG"), "-n", ns}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("kubectl etcd %v: %w: %s", args, err, stderr.String())
	}
	return stdout.String(), nil
}

func mustPlugin(t *testing.T, bin, ns string, args ...string) string {
	t.Helper()
	out, err := runPlugin(bin, ns, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// etcdStatus is one entry of `etcdctl endpoint status -w json`, etcd's own answer.
type etcdStatus struct {
	Status etcdMemberStatus `json:"Status"`
}

type etcdMemberStatus struct {
	Header struct {
		MemberID json.Number `json:"member_id"`
	} `json:"header"`
	Version     string      `json:"version"`
	DBSize      int64       `json:"dbSize"`
	DBSizeInUse int64       `json:"dbSizeInUse"`
	Leader      json.Number `json:"leader"`
	RaftIndex   uint64      `json:"raftIndex"`
	RaftTerm    uint64      `json:"raftTerm"`
	IsLearner   bool        `json:"isLearner"`
}

// etcdSelfStatus asks a member about itself with etcdctl inside its Pod, as root.
func etcdSelfStatus(t *testing.T, ns, member, password string) etcdStatus {
	t.Helper()
	out := guideEtcdctl(t, ns, journeyCluster, member, "--user", "root:"+password, "endpoint", "status", "-w", "json")
	var list []etcdStatus
	dec := json.NewDecoder(strings.NewReader(out))
	dec.UseNumber()
	if err := dec.Decode(&list); err != nil || len(list) != 1 {
		t.Fatalf("etcdctl endpoint status of %s: %v\n%s", member, err, out)
	}
	return list[0]
}

func hexID(t *testing.T, n json.Number) string {
	t.Helper()
	id, err := strconv.ParseUint(n.String(), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return strconv.FormatUint(id, 16)
}

// Every command of `kubectl etcd` against a cluster with mutual TLS and auth, run on the host:
// status field by field against etcd's own answers, members, compact, defrag, alarms,
// move-leader, snapshot save, snapshot (an EtcdSnapshot to MinIO), pause/resume,
// add/remove-member and replace-member.
func TestPluginAgainstTLSAndAuthCluster(t *testing.T) {
	t.Parallel()
	p := securePluginRun(t)
	p.leader = checkPluginStatus(t, p.bin, p.ns, p.password, p.members)
	t.Run("members", p.pluginMembers)
	t.Run("compact", p.pluginCompact)
	t.Run("defrag --all, leader last", p.pluginDefrag)
	t.Run("alarm", p.pluginAlarm)
	t.Run("move-leader", p.pluginMoveLeader)
	t.Run("snapshot save", p.pluginSnapshotSave)
	t.Run("snapshot (EtcdSnapshot to S3)", p.pluginSnapshotToS3)
	t.Run("pause and resume", p.pluginPauseResume)
	t.Run("add-member and remove-member", p.pluginAddRemove)
	t.Run("replace-member", p.pluginReplace)
}

// pluginRun is the cluster the plugin test works on.
type pluginRun struct {
	bin, ns, password, leader string
	members                   []string
}

// securePluginRun builds the plugin and brings up the journey's cluster with mutual TLS and
// auth, settled, in a namespace of the test's own.
func securePluginRun(t *testing.T) pluginRun {
	t.Helper()
	bin := buildPlugin(t)
	ns := namespace(t)
	journeyCA(t, ns)
	applyJourney(t, ns, "etcd-cluster-auth.yaml")
	waitSettled(t, ns, journeyCluster, 3, 5*time.Minute)
	waitAuthEnabled(t, ns)
	password := string(getSecret(t, ns, "secure-root").Data["password"])
	members := []string{journeyCluster + "-1", journeyCluster + "-2", journeyCluster + "-3"}
	return pluginRun{bin: bin, ns: ns, password: password, members: members}
}

func (p pluginRun) pluginMembers(t *testing.T) {
	var rows []plugin.MemberRow
	if err := json.Unmarshal([]byte(mustPlugin(t, p.bin, p.ns, "members", journeyCluster, "-o", "json")), &rows); err != nil {
		t.Fatal(err)
	}
	list := guideEtcdctl(t, p.ns, journeyCluster, p.members[0], "--user", "root:"+p.password, "member", "list")
	if len(rows) != 3 {
		t.Fatalf("members: %+v", rows)
	}
	for _, r := range rows {
		if !strings.Contains(list, r.ID+", started, "+r.Name+", ") || r.Learner {
			t.Errorf("member %+v is not in etcdctl's list as a started voter:\n%s", r, list)
		}
	}
}

func (p pluginRun) pluginCompact(t *testing.T) {
	guideEtcdctl(t, p.ns, journeyCluster, p.members[0], "--user", "root:"+p.password, "put", "k", "v1")
	guideEtcdctl(t, p.ns, journeyCluster, p.members[0], "--user", "root:"+p.password, "put", "k", "v2")
	out := mustPlugin(t, p.bin, p.ns, "compact", journeyCluster)
	var rev int64
	if _, err := fmt.Sscanf(out, "compacted revision %d", &rev); err != nil {
		t.Fatalf("compact said %q", out)
	}
	_, err := runKubectl(p.ns, "", guideEtcdctlArgs(p.ns, journeyCluster, p.members[1], "--user", "root:"+p.password, "get", "k", fmt.Sprintf("--rev=%d", rev-1))...)
	if err == nil || !strings.Contains(err.Error(), "compacted") {
		t.Fatalf("reading revision %d after compacting to %d: %v; want compacted", rev-1, rev, err)
	}
}

func (p pluginRun) pluginDefrag(t *testing.T) {
	out := mustPlugin(t, p.bin, p.ns, "defrag", journeyCluster, "--all")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || lines[2] != "defragmented "+p.leader {
		t.Fatalf("defrag --all said %q; want three members, %s last", out, p.leader)
	}
	if out := mustPlugin(t, p.bin, p.ns, "defrag", journeyCluster, p.members[0]); strings.TrimSpace(out) != "defragmented "+p.members[0] {
		t.Fatalf("defrag %s said %q", p.members[0], out)
	}
}

func (p pluginRun) pluginAlarm(t *testing.T) {
	if out := strings.TrimSpace(mustPlugin(t, p.bin, p.ns, "alarm", "list", journeyCluster, "-o", "json")); out != "[]" {
		t.Fatalf("alarm list: %q", out)
	}
	if out := strings.TrimSpace(mustPlugin(t, p.bin, p.ns, "alarm", "disarm", journeyCluster)); out != "no alarm raised" {
		t.Fatalf("alarm disarm: %q", out)
	}
}

func (p pluginRun) pluginMoveLeader(t *testing.T) {
	target := p.members[0]
	if target == p.leader {
		target = p.members[1]
	}
	mustPlugin(t, p.bin, p.ns, "move-leader", journeyCluster, target)
	st := etcdSelfStatus(t, p.ns, target, p.password)
	if st.Status.Leader.String() != st.Status.Header.MemberID.String() {
		t.Fatalf("%s does not lead after move-leader: leader %s, itself %s", target, st.Status.Leader, st.Status.Header.MemberID)
	}
}

func (p pluginRun) pluginSnapshotSave(t *testing.T) {
	file := filepath.Join(t.TempDir(), "secure.db")
	checkSavedSnapshot(t, file, mustPlugin(t, p.bin, p.ns, "snapshot", "save", journeyCluster, file))
}

// checkSavedSnapshot: the command that saved the snapshot to file said how large it is, and
// it is a sound snapshot.
func checkSavedSnapshot(t *testing.T, file, out string) {
	t.Helper()
	fi, err := os.Stat(file)
	if err != nil || fi.Size() == 0 || !strings.Contains(out, fmt.Sprintf("%d bytes", fi.Size())) {
		t.Fatalf("saving %s said %q; file %v %v", file, out, fi, err)
	}
	checkSnapshotFile(t, file)
}

func (p pluginRun) pluginPauseResume(t *testing.T) {
	before := memberIDs(getCluster(t, p.ns, journeyCluster))
	mustPlugin(t, p.bin, p.ns, "pause", journeyCluster)
	c := getCluster(t, p.ns, journeyCluster)
	if *c.Spec.Replicas != 0 || c.Annotations[etcdv1.AnnotationPausedReplicas] != "3" {
		t.Fatalf("after pause: replicas %d, annotation %q", *c.Spec.Replicas, c.Annotations[etcdv1.AnnotationPausedReplicas])
	}
	eventually(t, 3*time.Minute, "no member Pod left", func() error {
		pods := &corev1.PodList{}
		if err := k8s.List(context.Background(), pods, client.InNamespace(p.ns)); err != nil {
			return err
		}
		for _, pod := range pods.Items {
			if strings.HasPrefix(pod.Name, journeyCluster+"-") {
				return fmt.Errorf("Pod %s still there", pod.Name)
			}
		}
		return nil
	})
	mustPlugin(t, p.bin, p.ns, "resume", journeyCluster)
	after := memberIDs(waitSettled(t, p.ns, journeyCluster, 3, 5*time.Minute))
	if fmt.Sprint(before) != fmt.Sprint(after) {
		t.Fatalf("members before pause %v, after resume %v", before, after)
	}
	if _, ok := getCluster(t, p.ns, journeyCluster).Annotations[etcdv1.AnnotationPausedReplicas]; ok {
		t.Fatal("resume left the paused-replicas annotation")
	}
}

func (p pluginRun) pluginAddRemove(t *testing.T) {
	mustPlugin(t, p.bin, p.ns, "add-member", journeyCluster)
	waitSettled(t, p.ns, journeyCluster, 4, 5*time.Minute)
	mustPlugin(t, p.bin, p.ns, "remove-member", journeyCluster)
	waitSettled(t, p.ns, journeyCluster, 3, 5*time.Minute)
}

// pluginReplace asks for a member's replacement and checks that the operator carries it out:
// the member's etcd ID leaves the cluster and a new member takes its place.
func (p pluginRun) pluginReplace(t *testing.T) {
	before := memberIDs(waitSettled(t, p.ns, journeyCluster, 3, 5*time.Minute))
	victim, _, _ := strings.Cut(sorted(before)[0], "=")
	mustPlugin(t, p.bin, p.ns, "replace-member", journeyCluster, victim)
	eventually(t, 5*time.Minute, "the operator replaces "+victim, func() error {
		if !eventAbout(t, p.ns, "MemberReplacing", victim) {
			return fmt.Errorf("no MemberReplacing event about %s", victim)
		}
		for name, id := range memberIDs(getCluster(t, p.ns, journeyCluster)) {
			if id == before[victim] {
				return fmt.Errorf("member %s still has the ID %s", name, id)
			}
		}
		return nil
	})
	after := memberIDs(waitSettled(t, p.ns, journeyCluster, 3, 5*time.Minute))
	for name, id := range after {
		if id == before[victim] {
			t.Errorf("member %s still has the replaced member's ID %s: %v", name, id, after)
		}
	}
}

// checkPluginStatus compares `kubectl etcd status -o json` with what each member says about
// itself through etcdctl just before and just after; it returns the leader's name.
func checkPluginStatus(t *testing.T, bin, ns, password string, members []string) string {
	t.Helper()
	before := map[string]etcdStatus{}
	for _, m := range members {
		before[m] = etcdSelfStatus(t, ns, m, password)
	}
	var st plugin.ClusterStatus
	if err := json.Unmarshal([]byte(mustPlugin(t, bin, ns, "status", journeyCluster, "-o", "json")), &st); err != nil {
		t.Fatal(err)
	}
	if st.Cluster != journeyCluster || len(st.Members) != 3 || len(st.Conditions) == 0 {
		t.Fatalf("status: %+v", st)
	}
	leader := ""
	for _, row := range st.Members {
		b, a := before[row.Name], etcdSelfStatus(t, ns, row.Name, password)
		want := b.Status
		pod := &corev1.Pod{}
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: row.Name}, pod); err != nil {
			t.Fatal(err)
		}
		checks := statusChecks(row, b.Status, a.Status, pod)
		checks["endpoint"] = row.Endpoint == fmt.Sprintf("https://%s.%s.%s.svc:2379", row.Name, journeyCluster, ns)
		checks["member ID"] = row.MemberID == hexID(t, want.Header.MemberID)
		for field, ok := range checks {
			if !ok {
				t.Errorf("status of %s: %s differs from etcd's answer: plugin %+v, etcd before %+v, after %+v", row.Name, field, row, want, a.Status)
			}
		}
		if row.Leader {
			leader = row.Name
		}
	}
	if leader == "" {
		t.Fatalf("status shows no leader: %+v", st.Members)
	}
	table := mustPlugin(t, bin, ns, "status", journeyCluster)
	if !strings.Contains(table, "MEMBER ID") || !strings.Contains(table, "CONDITION") || strings.Count(table, journeyCluster+"-") < 6 {
		t.Errorf("status table:\n%s", table)
	}
	return leader
}

// statusChecks compares one row of the plugin's status with the member's own answers from
// just before (b) and just after (a): what cannot change at rest must be equal, what only
// grows must lie between the two.
func statusChecks(row plugin.StatusRow, b, a etcdMemberStatus, pod *corev1.Pod) map[string]bool {
	return map[string]bool{
		"version":    row.Version == b.Version,
		"leader":     row.Leader == (b.Leader.String() == b.Header.MemberID.String()),
		"learner":    row.Learner == b.IsLearner,
		"raft term":  b.RaftTerm <= row.RaftTerm && row.RaftTerm <= a.RaftTerm,
		"raft index": b.RaftIndex <= row.RaftIndex && row.RaftIndex <= a.RaftIndex,
		"db size":    b.DBSize <= row.DBSize && row.DBSize <= a.DBSize,
		"db in use":  row.DBSizeInUse > 0 && row.DBSizeInUse <= row.DBSize,
		"pod":        row.Pod == pod.Name && row.Node == pod.Spec.NodeName && row.Node != "",
		"ready":      row.Ready,
		"alarms":     len(row.Alarms) == 0 && row.Error == "",
	}
}

// checkSnapshotFile asks etcdutl, when the test bed has built it, whether the file is a sound
// snapshot; SaveWithVersion has already verified the snapshot's checksum while writing it.
func checkSnapshotFile(t *testing.T, file string) {
	t.Helper()
	home, _ := os.UserHomeDir()
	matches, _ := filepath.Glob(filepath.Join(home, ".cache", "etcd-operator", "etcd-v*", "bin", "etcdutl"))
	if len(matches) == 0 {
		return
	}
	out, err := exec.CommandContext(t.Context(), matches[0], "snapshot", "status", file, "-w", "json").CombinedOutput()
	if err != nil || !strings.Contains(string(out), `"totalKey"`) {
		t.Fatalf("etcdutl snapshot status %s: %v\n%s", file, err, out)
	}
}

// pluginSnapshotToS3: `kubectl etcd snapshot` creates an EtcdSnapshot, waits for the operator
// to take and upload it, and prints where it landed; the object is in the bucket.
func (p pluginRun) pluginSnapshotToS3(t *testing.T) {
	bucket := bucketFor(t, p.ns)
	s3Secret(t, p.ns, s3SecretName, localS3(t).secretKey)
	out := mustPlugin(t, p.bin, p.ns, "snapshot", journeyCluster, "--name", "from-plugin", "--s3-endpoint", localS3(t).endpoint,
		"--s3-bucket", bucket, "--s3-key", "plugin/", "--s3-region", "us-east-1", "--s3-credentials-secret", s3SecretName,
		"--s3-force-path-style", "--timeout", "3m")
	s := getSnapshot(t, p.ns, "from-plugin")
	// A key ending in "/" is a prefix: the object is named after the namespace, the cluster
	// and the EtcdSnapshot.
	key := keyOf("plugin/", p.ns, journeyCluster, "from-plugin")
	uri := "s3://" + bucket + "/" + key
	checkComplete(t, s, getCluster(t, p.ns, journeyCluster), uri)
	if !strings.Contains(out, uri) || !strings.Contains(out, fmt.Sprintf("%d bytes", s.Status.Artifact.SizeBytes)) {
		t.Errorf("snapshot printed %q; want the artifact %s and its size %d", out, uri, s.Status.Artifact.SizeBytes)
	}
	if got := objects(t, bucket, "plugin/")[key]; got != s.Status.Artifact.SizeBytes {
		t.Errorf("object %s in the bucket: %d bytes, the snapshot says %d", key, got, s.Status.Artifact.SizeBytes)
	}
}
