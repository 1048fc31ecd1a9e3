package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/agent"
	"github.com/quorumkeeper/etcd-operator/internal/controller/snapshot"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

const testURI = "s3://backups/db/snap.db"

// testAgentEnd is how the agent's container ended when it left no result (snapshot.JobResult).
const testAgentEnd = "Pod db-snap-verify-x-abcde: container agent exited with code 137 (OOMKilled)"

// verifyJobOf is a verify Job made for snapshot UID uid and checksum sum, finished (Complete
// or Failed) at finished, or running when finished is zero.
func verifyJobOf(uid, sum string, finished time.Time, failed bool) *batchv1.Job {
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "db-snap-verify-x", Namespace: "ns",
		Labels:      map[string]string{etcdv1.LabelVerifySnapshotUID: uid},
		Annotations: map[string]string{etcdv1.AnnotationVerifiedSum: sum}}}
	if !finished.IsZero() {
		cond := batchv1.JobComplete
		if failed {
			cond = batchv1.JobFailed
		}
		job.Status.Conditions = []batchv1.JobCondition{{Type: cond, Status: corev1.ConditionTrue, Reason: "Done", LastTransitionTime: metav1.NewTime(finished)}}
	}
	return job
}

// Nothing is discarded on less than a verify Job made for this EtcdSnapshot (UID) and its
// recorded checksum, finished lately, whose agent read the file and reported that checksum.
func TestJudgeVerification(t *testing.T) {
	now := time.Date(2026, 12, 2, 21, 0, 0, 0, time.UTC)
	want := verifyTarget{snapshotUID: "uid-1", checksum: testChecksum, uri: testURI}
	passed := agent.Result{URI: testURI, Checksum: testChecksum, SizeBytes: 1000, Message: "verified"}
	recent, old := now.Add(-30*time.Second), now.Add(-verdictTrusted-time.Second)
	deleting := verifyJobOf("uid-1", testChecksum, recent, false)
	deleting.DeletionTimestamp = &metav1.Time{Time: now}
	for _, tc := range []struct {
		name  string
		job   *batchv1.Job
		res   agent.Result
		found bool
		act   verifyAct
		why   string // part of why, for verifyFailed
	}{
		{"no Job yet", nil, agent.Result{}, false, verifyStart, ""},
		{"running", verifyJobOf("uid-1", testChecksum, time.Time{}, false), agent.Result{}, false, verifyWait, ""},
		{"passed just now", verifyJobOf("uid-1", testChecksum, recent, false), passed, true, verifyPassed, ""},
		{"passed long ago: read again", verifyJobOf("uid-1", testChecksum, old, false), passed, true, verifyReplace, ""},
		{"finished in the future (clocks apart)", verifyJobOf("uid-1", testChecksum, now.Add(time.Hour), false), passed, true, verifyReplace, ""},
		{"another EtcdSnapshot of that name", verifyJobOf("uid-0", testChecksum, recent, false), passed, true, verifyReplace, ""},
		{"another checksum", verifyJobOf("uid-1", "sha256:beef", recent, false), passed, true, verifyReplace, ""},
		{"going away", deleting, passed, true, verifyWait, ""},
		{"the file is gone", verifyJobOf("uid-1", testChecksum, recent, true),
			agent.Result{Reason: etcdv1.ReasonSnapshotNotFound, Message: "verifying " + testURI + ": the snapshot file does not exist"}, true, verifyFailed, "SnapshotNotFound: verifying " + testURI},
		{"the file was overwritten", verifyJobOf("uid-1", testChecksum, recent, true),
			agent.Result{Reason: etcdv1.ReasonSnapshotCorrupt, Message: "has checksum sha256:beef, " + testChecksum + " was recorded"}, true, verifyFailed, "SnapshotCorrupt"},
		{"the credentials were rotated", verifyJobOf("uid-1", testChecksum, recent, true),
			agent.Result{Reason: etcdv1.ReasonCredentialsRejected, Message: "Access Denied"}, true, verifyFailed, "CredentialsRejected"},
		{"failed without a result", verifyJobOf("uid-1", testChecksum, recent, true), agent.Result{}, false, verifyFailed, "ended without a result (Done; " + testAgentEnd + ")"},
		{"complete without a result", verifyJobOf("uid-1", testChecksum, recent, false), agent.Result{}, false, verifyFailed, "ended without a result"},
		{"success for another checksum", verifyJobOf("uid-1", testChecksum, recent, false),
			agent.Result{URI: testURI, Checksum: "sha256:beef"}, true, verifyFailed, "not trusting it"},
		{"success for another file", verifyJobOf("uid-1", testChecksum, recent, false),
			agent.Result{URI: "s3://backups/other.db", Checksum: testChecksum}, true, verifyFailed, "not trusting it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := judgeVerification(want, tc.job, tc.res, tc.found, testAgentEnd, now)
			if got.act != tc.act || !strings.Contains(got.why, tc.why) {
				t.Fatalf("%+v, want act %d saying %q", got, tc.act, tc.why)
			}
			if got.act == verifyFailed && (got.retryIn <= 0 || got.retryIn > verdictTrusted) {
				t.Fatalf("a failed verification is tried again in %s", got.retryIn)
			}
		})
	}
}

// finishVerifyJobs plays the Job controller and the verify agent (harness.verifier): each
// running verify Job finishes now, with a Pod whose termination message is the result.
func (h *harness) finishVerifyJobs() {
	h.t.Helper()
	if h.verifier == nil {
		return
	}
	ctx := context.Background()
	jobs := &batchv1.JobList{}
	if err := h.api.List(ctx, jobs, client.InNamespace("ns"), client.MatchingLabels{etcdv1.LabelAction: specs.ActionVerify}); err != nil {
		h.t.Fatal(err)
	}
	for i := range jobs.Items {
		job := &jobs.Items[i]
		if done, _, _, _ := snapshot.JobFinished(job); done {
			continue
		}
		res := h.verifier(job)
		job.UID = types.UID(fmt.Sprintf("job-%d", time.Now().UnixNano())) // the fake API sets none
		cond := batchv1.JobComplete
		if res.Reason != "" {
			cond = batchv1.JobFailed
		}
		job.Status.Conditions = append(job.Status.Conditions, batchv1.JobCondition{Type: cond, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(h.r.now())})
		status := job.Status
		if err := h.api.Update(ctx, job); err != nil {
			h.t.Fatal(err)
		}
		job.Status = status
		if err := h.api.Status().Update(ctx, job); err != nil {
			h.t.Fatal(err)
		}
		msg, _ := json.Marshal(res)
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: job.Name + "-" + string(job.UID), Namespace: "ns", Labels: map[string]string{batchv1.ControllerUidLabel: string(job.UID)}},
			Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "agent", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Message: string(msg)}}}}}}
		if err := h.api.Create(ctx, pod); err != nil {
			h.t.Fatal(err)
		}
	}
}

// verifiesAs is a verifier whose agent reads the Job's file and answers with res (its URI and
// checksum, when res is a success, those the Job asked for).
func verifiesAs(res agent.Result) func(*batchv1.Job) agent.Result {
	return func(job *batchv1.Job) agent.Result {
		if res.Reason == "" {
			res.URI, res.Checksum = argOf(job, "--uri="), argOf(job, "--checksum=")
		}
		return res
	}
}

func argOf(job *batchv1.Job, prefix string) string {
	for _, a := range job.Spec.Template.Spec.Containers[0].Args {
		if v, ok := strings.CutPrefix(a, prefix); ok {
			return v
		}
	}
	return ""
}

func (h *harness) verifyJobs() []batchv1.Job {
	h.t.Helper()
	jobs := &batchv1.JobList{}
	if err := h.api.List(context.Background(), jobs, client.InNamespace("ns"), client.MatchingLabels{etcdv1.LabelAction: specs.ActionVerify}); err != nil {
		h.t.Fatal(err)
	}
	return jobs.Items
}

// untouched fails unless the cluster is as before the request: its three members, none marked
// to discard its data or going, their PVCs, no record, the snapshot not held, no loss stated.
func (h *harness) untouched(when string) {
	h.t.Helper()
	c := h.clusterObj()
	if c.Status.SnapshotRecovery != nil || c.Status.ClusterID == "" {
		h.t.Fatalf("%s: record %+v, cluster ID %q", when, c.Status.SnapshotRecovery, c.Status.ClusterID)
	}
	ms := h.members()
	for _, m := range ms {
		if m.Annotations[etcdv1.AnnotationDiscard] != "" || !m.DeletionTimestamp.IsZero() {
			h.t.Fatalf("%s: member %s marked or going", when, m.Name)
		}
	}
	if len(ms) != 3 || h.count(&corev1.PersistentVolumeClaimList{}) != 3 {
		h.t.Fatalf("%s: %d members, %d PVCs", when, len(ms), h.count(&corev1.PersistentVolumeClaimList{}))
	}
	if h.snapshotHeld() || saidInStatus(c, "restoring EtcdSnapshot snap at revision") {
		h.t.Fatalf("%s: the snapshot held, or the loss stated, before the file was verified", when)
	}
}

// A recovery from a snapshot whose stored file is gone: the file is verified first, by a Job
// reading the very file the restore would, with the checksum the snapshot recorded; while it
// runs and once it failed nothing is changed, and the refusal names the store's reason and
// what to do. Once the verdict is too old to trust, the file is read again; found good, the
// recovery goes on to the statement of the loss and the record.
func TestRecoveryFromSnapshotVerifiesTheFileBeforeAnything(t *testing.T) {
	h := lostQuorumWithSnapshot(t)
	h.verifier = nil // the Job runs until the test says
	h.annotate(etcdv1.AnnotationRecoverFromSnapshot, "snap")
	h.reconcile()
	checkTheVerifyJobReadsTheRecordedFile(t, h)
	h.reconcile()
	h.untouched("while verifying")
	if n := len(h.verifyJobs()); n != 1 {
		t.Fatalf("%d verify Jobs after a second look", n)
	}

	h.verifier = verifiesAs(agent.Result{Reason: etcdv1.ReasonSnapshotNotFound, Message: "verifying " + testURI + ": the snapshot file does not exist"})
	h.reconcile()
	h.reconcile()
	pr := h.condition(etcdv1.ConditionProgressing)
	for _, part := range []string{"SnapshotNotFound", testURI, "nothing was changed", "Fix the store", "name another snapshot"} {
		if pr.Reason != etcdv1.ReasonRecoveryRefused || !strings.Contains(pr.Message, part) {
			t.Fatalf("Progressing after a failed verification: %+v, want %s saying %q", pr, etcdv1.ReasonRecoveryRefused, part)
		}
	}
	h.untouched("after a failed verification")

	// Later the verdict is too old to trust: the file is read again, and found good.
	later := time.Now().Add(verdictTrusted + time.Minute)
	h.r.Now = func() time.Time { return later }
	h.verifier = verifiesAs(agent.Result{SizeBytes: 1000, Message: "verified"})
	h.reconcile() // the old Job goes
	if n := len(h.verifyJobs()); n != 0 {
		t.Fatalf("%d verify Jobs: an old verdict was not replaced", n)
	}
	h.untouched("while the old verdict is replaced")
	h.reconcile() // a new Job
	h.reconcile() // it passed: the loss is stated
	if pr := h.condition(etcdv1.ConditionProgressing); pr.Reason != etcdv1.ReasonQuorumRecovery || !strings.Contains(pr.Message, "restoring EtcdSnapshot snap at revision 40") {
		t.Fatalf("Progressing after the file was verified: %+v", pr)
	}
	h.reconcile()
	if h.clusterObj().Status.SnapshotRecovery == nil {
		t.Fatal("not recorded after the file was verified")
	}
}

// checkTheVerifyJobReadsTheRecordedFile checks there is one verify Job, that it reads the
// snapshot's file with the checksum it recorded, is the cluster's, and that Progressing says
// it is verifying.
func checkTheVerifyJobReadsTheRecordedFile(t *testing.T, h *harness) {
	t.Helper()
	jobs := h.verifyJobs()
	if len(jobs) != 1 {
		t.Fatalf("%d verify Jobs, want 1", len(jobs))
	}
	job := &jobs[0]
	ct := job.Spec.Template.Spec.Containers[0]
	for _, arg := range []string{"verify-agent", "--name=db/snap.db", "--uri=" + testURI, "--checksum=" + testChecksum, "--s3-bucket=backups"} {
		if argOf(job, arg) == "" && !hasArg([]corev1.Container{ct}, ct.Name, arg) {
			t.Errorf("the verify Job's args %v lack %s", ct.Args, arg)
		}
	}
	if ref := metav1.GetControllerOf(job); ref == nil || ref.Kind != "EtcdCluster" || ref.Name != "db" {
		t.Errorf("the verify Job's controller: %+v", ref)
	}
	if pr := h.condition(etcdv1.ConditionProgressing); pr.Reason != etcdv1.ReasonQuorumRecovery || !strings.Contains(pr.Message, "verifying (Job "+job.Name+") "+testURI) {
		t.Fatalf("Progressing while verifying: %+v", pr)
	}
}

// An operator that died after the verification and before the record trusts the finished
// verify Job on its next look while it is recent, and reads the file again once it is not;
// an EtcdSnapshot deleted and created again under the same name (another UID) is never
// trusted on the old one's verdict.
func TestAVerificationIsTrustedOnlyRecentAndForThatSnapshot(t *testing.T) {
	h := lostQuorumWithSnapshot(t)
	h.annotate(etcdv1.AnnotationRecoverFromSnapshot, "snap")
	h.reconcile() // the Job is created
	h.reconcile() // it passed: the loss is stated
	if !saidInStatus(h.clusterObj(), "restoring EtcdSnapshot snap at revision 40") {
		t.Fatalf("not stated: %+v", h.condition(etcdv1.ConditionProgressing))
	}
	// The operator is down for longer than a verdict counts: nothing is recorded on it.
	h.r.Now = func() time.Time { return time.Now().Add(verdictTrusted + time.Minute) }
	h.verifier = nil
	h.reconcile()
	if h.clusterObj().Status.SnapshotRecovery != nil || len(h.verifyJobs()) != 0 {
		t.Fatal("recorded on a verification older than it may be trusted, or the old Job kept")
	}

	// The EtcdSnapshot is recreated under its name: the Job of the old one is replaced.
	h = lostQuorumWithSnapshot(t)
	h.annotate(etcdv1.AnnotationRecoverFromSnapshot, "snap")
	h.reconcile()
	s := &etcdv1.EtcdSnapshot{}
	if err := h.api.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "snap"}, s); err != nil {
		t.Fatal(err)
	}
	s.UID = "recreated"
	if err := h.api.Update(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	h.reconcile()
	if n := len(h.verifyJobs()); n != 0 {
		t.Fatalf("%d verify Jobs: the old snapshot's verdict was kept for the new one", n)
	}
	if h.clusterObj().Status.SnapshotRecovery != nil || saidInStatus(h.clusterObj(), "restoring EtcdSnapshot snap at revision") {
		t.Fatal("the recovery went on on another snapshot's verification")
	}
}

// The verify Job reads the file the restore will, as the restore reads it: the same flags,
// credentials (optional keys, so a missing one is reported, not a Pod stuck) and a read-only
// mount, for a PVC as for S3.
func TestVerifyJobReadsWhatTheRestoreReads(t *testing.T) {
	c := &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns"}}
	for name, snap := range map[string]*etcdv1.EtcdSnapshot{"s3": completeSnapshot("snap", "c1"), "pvc": pvcSnapshot()} {
		restore := snapshotFile(snap)
		if restore == nil {
			t.Fatalf("%s: no file", name)
		}
		job := specs.VerifyJob(c, snap, *restore, "operator:dev")
		ct := job.Spec.Template.Spec.Containers[0]
		m := &etcdv1.EtcdMember{ObjectMeta: metav1.ObjectMeta{Name: "db-1"}, Spec: etcdv1.EtcdMemberSpec{Bootstrap: etcdv1.MemberBootstrap{
			InitialClusterState: etcdv1.InitialClusterStateNew, Restore: restore}}}
		pod := specs.Pod(c, m, specs.PodOptions{})
		checkVerifyJobReadsWithTheRestoresArgs(t, name, restoreContainerOf(pod), ct)
		checkVerifyJobOnlyReadsOptionalSecrets(t, name, ct)
		if job.Labels[etcdv1.LabelVerifySnapshotUID] != string(snap.UID) || job.Annotations[etcdv1.AnnotationVerifiedSum] != testChecksum || ct.Image != "operator:dev" {
			t.Errorf("%s: labels %v, annotations %v, image %s", name, job.Labels, job.Annotations, ct.Image)
		}
	}
}

// restoreContainerOf is the restore init container of a member Pod.
func restoreContainerOf(pod *corev1.Pod) corev1.Container {
	var rc corev1.Container
	for _, ic := range pod.Spec.InitContainers {
		if ic.Name == specs.RestoreContainerName {
			rc = ic
		}
	}
	return rc
}

// checkVerifyJobReadsWithTheRestoresArgs checks that the verify Job's container ct reads with
// every flag the restore container rc reads with (those that say where and how to restore
// aside).
func checkVerifyJobReadsWithTheRestoresArgs(t *testing.T, name string, rc, ct corev1.Container) {
	t.Helper()
	for _, a := range rc.Args {
		if strings.HasPrefix(a, "--data-dir") || strings.HasPrefix(a, "--staging-dir") || strings.HasPrefix(a, "--etcdutl") ||
			strings.HasPrefix(a, "--member-name") || strings.HasPrefix(a, "--initial-") || a == "restore-agent" || strings.HasPrefix(a, "--dir=") {
			continue
		}
		if !hasArg([]corev1.Container{ct}, ct.Name, a) {
			t.Errorf("%s: the restore reads with %s, the verify Job does not (%v)", name, a, ct.Args)
		}
	}
}

// checkVerifyJobOnlyReadsOptionalSecrets checks that every env of the verify Job's container
// comes optionally from a Secret and that every mount is read-only.
func checkVerifyJobOnlyReadsOptionalSecrets(t *testing.T, name string, ct corev1.Container) {
	t.Helper()
	for _, e := range ct.Env {
		if ref := e.ValueFrom.SecretKeyRef; ref == nil || ref.Optional == nil || !*ref.Optional {
			t.Errorf("%s: env %s must come optionally from a Secret: %+v", name, e.Name, e.ValueFrom)
		}
	}
	for _, vm := range ct.VolumeMounts {
		if !vm.ReadOnly {
			t.Errorf("%s: mount %s is writable", name, vm.Name)
		}
	}
}

func pvcSnapshot() *etcdv1.EtcdSnapshot {
	s := completeSnapshot("snap", "c1")
	s.UID = "uid-pvc"
	s.Spec.Destination = etcdv1.SnapshotLocation{PVC: &etcdv1.PVCSnapshotLocation{ClaimName: "backups", SubPath: "db"}}
	s.Status.Artifact.URI = "pvc://backups/db/snap.db"
	return s
}
