package snapshot

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

func harness(t *testing.T, objs ...client.Object) (*Reconciler, client.Client) {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := etcdv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	api := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).
		WithStatusSubresource(&etcdv1.EtcdSnapshot{}, &etcdv1.EtcdCluster{}).Build()
	return &Reconciler{Client: api, AgentImage: "op:1", Now: time.Now}, api
}

func pvcSnapshot() *etcdv1.EtcdSnapshot {
	return &etcdv1.EtcdSnapshot{ObjectMeta: metav1.ObjectMeta{Name: "s1", Namespace: "ns", CreationTimestamp: metav1.Now()},
		Spec: etcdv1.EtcdSnapshotSpec{ClusterRef: corev1.LocalObjectReference{Name: "main"},
			Destination: etcdv1.SnapshotLocation{PVC: &etcdv1.PVCSnapshotLocation{ClaimName: "backups", SubPath: "d"}}}}
}

func availableCluster() *etcdv1.EtcdCluster {
	return &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "main", Namespace: "ns"},
		Status: etcdv1.EtcdClusterStatus{Conditions: []metav1.Condition{{Type: etcdv1.ConditionAvailable, Status: metav1.ConditionTrue, Reason: "QuorumHealthy", LastTransitionTime: metav1.Now()}}}}
}

func reconcileTimes(t *testing.T, r *Reconciler, n int) {
	t.Helper()
	for range n {
		if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "s1"}}); err != nil {
			t.Fatal(err)
		}
	}
}

func get(t *testing.T, api client.Client) *etcdv1.EtcdSnapshot {
	s := &etcdv1.EtcdSnapshot{}
	if err := api.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "s1"}, s); err != nil {
		t.Fatal(err)
	}
	return s
}

func readyReason(s *etcdv1.EtcdSnapshot) string {
	if c := meta.FindStatusCondition(s.Status.Conditions, etcdv1.SnapshotConditionReady); c != nil {
		return c.Reason
	}
	return ""
}

func readyMessage(s *etcdv1.EtcdSnapshot) string {
	if c := meta.FindStatusCondition(s.Status.Conditions, etcdv1.SnapshotConditionReady); c != nil {
		return c.Message
	}
	return ""
}

// finishJob marks the agent Job done and gives its Pod the agent's termination message.
func finishJob(t *testing.T, api client.Client, failed bool, jobReason, message string) {
	ctx := context.Background()
	job := &batchv1.Job{}
	if err := api.Get(ctx, types.NamespacedName{Namespace: "ns", Name: specs.SnapshotJobName("s1", specs.ActionSnapshot)}, job); err != nil {
		t.Fatal(err)
	}
	cond := batchv1.JobComplete
	if failed {
		cond = batchv1.JobFailed
	}
	job.Status.Conditions = []batchv1.JobCondition{{Type: cond, Status: corev1.ConditionTrue, Reason: jobReason}}
	if err := api.Status().Update(ctx, job); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: job.Name + "-x", Namespace: "ns", Labels: map[string]string{batchv1.JobNameLabel: job.Name, batchv1.ControllerUidLabel: string(job.UID)}},
		Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "agent", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Message: message}}}}}}
	if err := api.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
}

const goodSum = "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

func TestASnapshotCompletesWithTheAgentsResult(t *testing.T) {
	r, api := harness(t, pvcSnapshot(), availableCluster(), &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "backups", Namespace: "ns"}})
	reconcileTimes(t, r, 2)
	if s := get(t, api); s.Status.Phase != etcdv1.SnapshotStarted || s.Status.StartTime == nil {
		t.Fatalf("after the Job was created: %+v", s.Status)
	}
	finishJob(t, api, false, "", `{"uri":"pvc://backups/d/s1.db","sizeBytes":42,"checksum":"`+goodSum+`","revision":7,"clusterID":"c1","member":"main-2","etcdVersion":"3.6.16"}`)
	reconcileTimes(t, r, 1)
	s := get(t, api)
	if s.Status.Phase != etcdv1.SnapshotComplete || s.Status.Artifact == nil || s.Status.Artifact.Checksum != goodSum ||
		s.Status.Revision != 7 || s.Status.Member != "main-2" || s.Status.CompletionTime == nil || readyReason(s) != etcdv1.ReasonSucceeded {
		t.Errorf("status %+v", s.Status)
	}
}

func TestASnapshotFailsWithTheReasonThatNamesTheFix(t *testing.T) {
	for _, tc := range []struct {
		name              string
		failed            bool
		jobReason, result string
		want              string
	}{
		{"agent reason", true, "BackoffLimitExceeded", `{"reason":"BucketNotFound","message":"no bucket"}`, "BucketNotFound"},
		{"deadline", true, batchv1.JobReasonDeadlineExceeded, "", etcdv1.ReasonDeadlineExceeded},
		{"no result", true, "BackoffLimitExceeded", "", etcdv1.ReasonAgentFailed},
		// A success without the proof of verification is not trusted.
		{"success elsewhere", false, "", `{"uri":"pvc://backups/other.db","sizeBytes":42,"checksum":"` + goodSum + `","revision":7}`, etcdv1.ReasonAgentFailed},
		{"success without checksum", false, "", `{"uri":"pvc://backups/d/s1.db","sizeBytes":42,"revision":7}`, etcdv1.ReasonAgentFailed},
		{"success with a short checksum", false, "", `{"uri":"pvc://backups/d/s1.db","sizeBytes":42,"checksum":"sha256:ab","revision":7}`, etcdv1.ReasonAgentFailed},
		{"success without size", false, "", `{"uri":"pvc://backups/d/s1.db","checksum":"` + goodSum + `","revision":7}`, etcdv1.ReasonAgentFailed},
		{"success without revision", false, "", `{"uri":"pvc://backups/d/s1.db","sizeBytes":42,"checksum":"` + goodSum + `"}`, etcdv1.ReasonAgentFailed},
	} {
		r, api := harness(t, pvcSnapshot(), availableCluster(), &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "backups", Namespace: "ns"}})
		reconcileTimes(t, r, 2)
		finishJob(t, api, tc.failed, tc.jobReason, tc.result)
		reconcileTimes(t, r, 1)
		s := get(t, api)
		if s.Status.Phase != etcdv1.SnapshotFailed || s.Status.Artifact != nil || readyReason(s) != tc.want {
			t.Errorf("%s: phase %s reason %s artifact %v", tc.name, s.Status.Phase, readyReason(s), s.Status.Artifact)
		}
		if tc.result == "" && tc.want == etcdv1.ReasonAgentFailed && !strings.Contains(readyMessage(s), "container agent exited with code") {
			t.Errorf("%s: the message %q does not say how the agent's container ended", tc.name, readyMessage(s))
		}
	}
}

func TestMissingInputsFailBeforeAnyJob(t *testing.T) {
	r, api := harness(t, pvcSnapshot(), availableCluster())
	reconcileTimes(t, r, 2)
	if s := get(t, api); s.Status.Phase != etcdv1.SnapshotFailed || readyReason(s) != etcdv1.ReasonPVCNotFound {
		t.Errorf("missing PVC: %s %s", s.Status.Phase, readyReason(s))
	}
	r, api = harness(t, pvcSnapshot())
	reconcileTimes(t, r, 2)
	if s := get(t, api); readyReason(s) != etcdv1.ReasonClusterNotFound {
		t.Errorf("missing cluster: %s", readyReason(s))
	}
	jobs := &batchv1.JobList{}
	if err := api.List(context.Background(), jobs); err != nil || len(jobs.Items) != 0 {
		t.Errorf("a Job was created for a snapshot that cannot run: %d", len(jobs.Items))
	}
}

// staleJobs is a cache that has not seen any Job yet.
type staleJobs struct{ client.Client }

func (c staleJobs) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*batchv1.Job); ok {
		return apierrors.NewNotFound(batchv1.Resource("jobs"), key.Name)
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

func TestAStartedSnapshotIsNotFailedWhileTheCacheLacksItsJob(t *testing.T) {
	r, api := harness(t, pvcSnapshot(), availableCluster(), &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "backups", Namespace: "ns"}})
	reconcileTimes(t, r, 2)
	if s := get(t, api); s.Status.Phase != etcdv1.SnapshotStarted {
		t.Fatalf("after the Job was created: %s", s.Status.Phase)
	}
	r.Client, r.APIReader = staleJobs{api}, api
	reconcileTimes(t, r, 1)
	if s := get(t, api); s.Status.Phase != etcdv1.SnapshotStarted {
		t.Fatalf("the Job exists but the cache missed it: phase %s (%s), want Started", s.Status.Phase, readyReason(s))
	}
	// Gone from the API server too: that attempt failed.
	if err := api.Delete(context.Background(), &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: specs.SnapshotJobName("s1", specs.ActionSnapshot)}}); err != nil {
		t.Fatal(err)
	}
	reconcileTimes(t, r, 1)
	if s := get(t, api); s.Status.Phase != etcdv1.SnapshotFailed {
		t.Errorf("the Job is gone: phase %s, want Failed", s.Status.Phase)
	}
}

// stalePods is a cache that has seen no Pod yet.
type stalePods struct{ client.Client }

func (c stalePods) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if _, ok := list.(*corev1.PodList); ok {
		return nil
	}
	return c.Client.List(ctx, list, opts...)
}

// A finished Job whose Pod's last status the cache has not seen yet: the result is read live,
// and the snapshot completes instead of failing "without a result".
func TestAFinishedJobsResultIsReadLiveWhenTheCacheLacksItsPod(t *testing.T) {
	r, api := harness(t, pvcSnapshot(), availableCluster(), &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "backups", Namespace: "ns"}})
	reconcileTimes(t, r, 2)
	finishJob(t, api, false, "", `{"uri":"pvc://backups/d/s1.db","sizeBytes":42,"checksum":"`+goodSum+`","revision":7,"clusterID":"c1","member":"main-2","etcdVersion":"3.6.16"}`)
	r.Client, r.APIReader = stalePods{api}, api
	reconcileTimes(t, r, 1)
	if s := get(t, api); s.Status.Phase != etcdv1.SnapshotComplete {
		t.Fatalf("phase %s (%s), want Complete", s.Status.Phase, readyReason(s))
	}
}

func TestAJobOfAnEarlierSnapshotOfTheSameNameIsNotRead(t *testing.T) {
	s := pvcSnapshot()
	s.UID = "new"
	r, api := harness(t, s, availableCluster(), &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "backups", Namespace: "ns"}})
	old := pvcSnapshot()
	old.UID = "old"
	job := specs.SnapshotJob(old, availableCluster(), "op:1", specs.ActionSnapshot)
	if err := controllerutil.SetControllerReference(old, job, api.Scheme()); err != nil {
		t.Fatal(err)
	}
	job.UID = "old-job" // the fake API server gives none
	if err := api.Create(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	finishJob(t, api, false, "", `{"uri":"pvc://backups/d/s1.db","sizeBytes":42,"checksum":"`+goodSum+`","revision":7}`)
	reconcileTimes(t, r, 2) // the finalizer, then the earlier Job
	if got := get(t, api); got.Status.Phase == etcdv1.SnapshotComplete {
		t.Fatal("the snapshot completed with the result of an earlier snapshot's Job")
	}
	err := api.Get(context.Background(), client.ObjectKeyFromObject(job), &batchv1.Job{})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("the earlier snapshot's Job was not deleted: %v", err)
	}
	// The earlier Job's Pod, with its successful result, outlives it for a while; this
	// snapshot's own Job ends without a result and must not borrow that one.
	reconcileTimes(t, r, 1)
	mine := &batchv1.Job{}
	if err := api.Get(context.Background(), client.ObjectKeyFromObject(job), mine); err != nil {
		t.Fatal(err)
	}
	if mine.UID == job.UID {
		t.Fatal("the fake API server gave both Jobs one UID")
	}
	mine.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
	if err := api.Status().Update(context.Background(), mine); err != nil {
		t.Fatal(err)
	}
	reconcileTimes(t, r, 1)
	if got := get(t, api); got.Status.Phase != etcdv1.SnapshotFailed || readyReason(got) != etcdv1.ReasonAgentFailed {
		t.Errorf("this snapshot's Job ended without a result: phase %s (%s), want Failed (%s)", got.Status.Phase, readyReason(got), etcdv1.ReasonAgentFailed)
	}
}

// The delete Job is not owned by its EtcdSnapshot (it outlives it); its events must still
// reach the snapshot, or the finalizer waits forever for the stored file's deletion.
func TestAgentJobsMapToTheirSnapshotByLabel(t *testing.T) {
	s := &etcdv1.EtcdSnapshot{ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "ns", UID: "u1"},
		Spec: etcdv1.EtcdSnapshotSpec{Destination: etcdv1.SnapshotLocation{PVC: &etcdv1.PVCSnapshotLocation{ClaimName: "backups"}}}}
	for _, action := range []string{specs.ActionSnapshot, specs.ActionDelete} {
		job := specs.SnapshotJob(s, nil, "agent:dev", action)
		reqs := snapshotOfJob(context.Background(), job)
		if len(reqs) != 1 || reqs[0].Namespace != "ns" || reqs[0].Name != "nightly" {
			t.Errorf("%s Job maps to %v, want ns/nightly", action, reqs)
		}
	}
	if reqs := snapshotOfJob(context.Background(), &batchv1.Job{}); len(reqs) != 0 {
		t.Errorf("an unlabelled Job maps to %v", reqs)
	}
}

// A snapshot a cluster is being rebuilt from keeps its stored file through a deletion until
// the rebuilt cluster no longer needs it; then the hold goes and the file is deleted.
func TestADeletionWaitsForTheRestoreThatHoldsTheFile(t *testing.T) {
	s := pvcSnapshot()
	s.Spec.DeletionPolicy = etcdv1.SnapshotDelete
	s.Finalizers = []string{etcdv1.FinalizerSnapshotFile, etcdv1.FinalizerRestoreSource}
	s.Annotations = map[string]string{etcdv1.AnnotationRestoreHeldBy: "EtcdCluster main at 2026-12-02T00:00:00Z"}
	s.Status = etcdv1.EtcdSnapshotStatus{Phase: etcdv1.SnapshotComplete, Artifact: &etcdv1.SnapshotArtifact{URI: "pvc://backups/d/s1.db", Checksum: goodSum}}
	rebuilt := availableCluster()
	rebuilt.Status.SnapshotRecovery = &etcdv1.SnapshotRecoveryStatus{Snapshot: "s1"}
	r, api := harness(t, s, rebuilt, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "backups", Namespace: "ns"}})
	ctx := context.Background()
	if err := api.Delete(ctx, get(t, api)); err != nil {
		t.Fatal(err)
	}
	deleteJob := types.NamespacedName{Namespace: "ns", Name: specs.SnapshotJobName("s1", specs.ActionDelete)}
	reconcileTimes(t, r, 3)
	got := get(t, api)
	if !controllerutil.ContainsFinalizer(got, etcdv1.FinalizerRestoreSource) || readyReason(got) != etcdv1.ReasonRestoreInProgress {
		t.Fatalf("while EtcdCluster main is rebuilt from it: finalizers %v, Ready %s", got.Finalizers, readyReason(got))
	}
	if c := meta.FindStatusCondition(got.Status.Conditions, etcdv1.SnapshotConditionReady); !strings.Contains(c.Message, "EtcdCluster main is being rebuilt from it") {
		t.Errorf("Ready does not say for whom the deletion waits: %s", c.Message)
	}
	if err := api.Get(ctx, deleteJob, &batchv1.Job{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the stored file is being deleted while a cluster restores it: %v", err)
	}

	c := &etcdv1.EtcdCluster{}
	if err := api.Get(ctx, client.ObjectKeyFromObject(rebuilt), c); err != nil {
		t.Fatal(err)
	}
	if reqs := restoredSnapshots(ctx, c); len(reqs) != 1 || reqs[0].Name != "s1" {
		t.Fatalf("the rebuilt cluster wakes %v, want s1", reqs)
	}
	c.Status.SnapshotRecovery = nil
	if err := api.Status().Update(ctx, c); err != nil {
		t.Fatal(err)
	}
	reconcileTimes(t, r, 1)
	if got := get(t, api); controllerutil.ContainsFinalizer(got, etcdv1.FinalizerRestoreSource) || got.Annotations[etcdv1.AnnotationRestoreHeldBy] != "" {
		t.Fatalf("the hold stays after the cluster answered: %v %v", got.Finalizers, got.Annotations)
	}
	reconcileTimes(t, r, 1)
	if err := api.Get(ctx, deleteJob, &batchv1.Job{}); err != nil {
		t.Fatalf("the file's deletion did not go on once nothing held it: %v", err)
	}
}

// A hold no cluster needs (a request withdrawn before the recovery began) goes at once, on a
// snapshot that is not being deleted too.
func TestAHoldNoClusterNeedsGoes(t *testing.T) {
	s := pvcSnapshot()
	s.Finalizers = []string{etcdv1.FinalizerSnapshotFile, etcdv1.FinalizerRestoreSource}
	s.Status = etcdv1.EtcdSnapshotStatus{Phase: etcdv1.SnapshotComplete}
	r, api := harness(t, s, availableCluster())
	reconcileTimes(t, r, 1)
	if got := get(t, api); controllerutil.ContainsFinalizer(got, etcdv1.FinalizerRestoreSource) || !controllerutil.ContainsFinalizer(got, etcdv1.FinalizerSnapshotFile) {
		t.Fatalf("finalizers %v, want only %s", got.Finalizers, etcdv1.FinalizerSnapshotFile)
	}
}

// Which snapshots being deleted run the delete Job: with deletionPolicy Delete, once they may
// have written a file, and never one whose agent found the file there already (another
// snapshot's).
func TestDeletesStoredFile(t *testing.T) {
	failedWith := func(reason string) etcdv1.EtcdSnapshotStatus {
		return etcdv1.EtcdSnapshotStatus{Phase: etcdv1.SnapshotFailed, Conditions: []metav1.Condition{{Type: etcdv1.SnapshotConditionReady, Status: metav1.ConditionFalse, Reason: reason}}}
	}
	for _, tc := range []struct {
		name   string
		policy etcdv1.SnapshotDeletionPolicy
		status etcdv1.EtcdSnapshotStatus
		want   bool
	}{
		{"complete", etcdv1.SnapshotDelete, etcdv1.EtcdSnapshotStatus{Phase: etcdv1.SnapshotComplete}, true},
		{"complete, Retain", etcdv1.SnapshotRetain, etcdv1.EtcdSnapshotStatus{Phase: etcdv1.SnapshotComplete}, false},
		{"started (a partial file, or a file its agent may commit)", etcdv1.SnapshotDelete, etcdv1.EtcdSnapshotStatus{Phase: etcdv1.SnapshotStarted}, true},
		{"pending", etcdv1.SnapshotDelete, etcdv1.EtcdSnapshotStatus{Phase: etcdv1.SnapshotPending}, false},
		{"new", etcdv1.SnapshotDelete, etcdv1.EtcdSnapshotStatus{}, false},
		{"failed otherwise (its own partial file)", etcdv1.SnapshotDelete, failedWith("StorageError"), true},
		{"failed: the file was there already", etcdv1.SnapshotDelete, failedWith(etcdv1.ReasonSnapshotFileExists), false},
	} {
		s := pvcSnapshot()
		s.Spec.DeletionPolicy, s.Status = tc.policy, tc.status
		if got := deletesStoredFile(s); got != tc.want {
			t.Errorf("%s: deletesStoredFile = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A snapshot that failed because its file's name was taken goes without a delete Job; a
// Complete one's delete Job names its owner and the checksum it recorded, which is all the
// agent deletes by.
func TestTheDeleteJobNamesTheOwnerAndOnlyOwnFilesAreDeleted(t *testing.T) {
	ctx := context.Background()
	deleteJob := types.NamespacedName{Namespace: "ns", Name: specs.SnapshotJobName("s1", specs.ActionDelete)}
	refused := pvcSnapshot()
	refused.UID = "uid-2"
	refused.Spec.DeletionPolicy = etcdv1.SnapshotDelete
	refused.Finalizers = []string{etcdv1.FinalizerSnapshotFile}
	refused.Status = etcdv1.EtcdSnapshotStatus{Phase: etcdv1.SnapshotFailed, Conditions: []metav1.Condition{{
		Type: etcdv1.SnapshotConditionReady, Status: metav1.ConditionFalse, Reason: etcdv1.ReasonSnapshotFileExists, LastTransitionTime: metav1.Now()}}}
	r, api := harness(t, refused)
	if err := api.Delete(ctx, get(t, api)); err != nil {
		t.Fatal(err)
	}
	reconcileTimes(t, r, 1)
	if err := api.Get(ctx, deleteJob, &batchv1.Job{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a snapshot refused for an existing file runs a delete Job: %v", err)
	}
	if err := api.Get(ctx, types.NamespacedName{Namespace: "ns", Name: "s1"}, &etcdv1.EtcdSnapshot{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the refused snapshot was not let go: %v", err)
	}

	done := pvcSnapshot()
	done.UID = "uid-1"
	done.Spec.DeletionPolicy = etcdv1.SnapshotDelete
	done.Finalizers = []string{etcdv1.FinalizerSnapshotFile}
	done.Status = etcdv1.EtcdSnapshotStatus{Phase: etcdv1.SnapshotComplete, Artifact: &etcdv1.SnapshotArtifact{URI: "pvc://backups/d/s1.db", Checksum: goodSum}}
	r, api = harness(t, done)
	if err := api.Delete(ctx, get(t, api)); err != nil {
		t.Fatal(err)
	}
	reconcileTimes(t, r, 1)
	job := &batchv1.Job{}
	if err := api.Get(ctx, deleteJob, job); err != nil {
		t.Fatal(err)
	}
	args := job.Spec.Template.Spec.Containers[0].Args
	for _, want := range []string{"--delete", "--owner=ns/s1/uid-1", "--checksum=" + goodSum} {
		if !slices.Contains(args, want) {
			t.Errorf("delete Job args %v lack %s", args, want)
		}
	}
}

// A snapshot deleted while still Pending, whose Job the operator made before it stopped and
// could record it, may have a file: its Job is stopped and the delete Job runs, rather than
// the file being forgotten. Without its Job it goes at once.
func TestAPendingSnapshotWithItsJobHasItsFileDeleted(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name      string
		jobMade   bool
		wantSteps []string
	}{
		{"its Job made", true, []string{"recordStarted", "stopSnapshotJob", "startDeleteJob"}},
		{"no Job", false, []string{"removeFinalizer"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := pvcSnapshot()
			s.UID, s.Spec.DeletionPolicy = "uid-1", etcdv1.SnapshotDelete
			s.Finalizers = []string{etcdv1.FinalizerSnapshotFile}
			s.Status.Phase = etcdv1.SnapshotPending
			objs := []client.Object{s, availableCluster()}
			if tc.jobMade {
				objs = append(objs, specs.SnapshotJob(s, availableCluster(), "op:1", specs.ActionSnapshot))
			}
			r, api := harness(t, objs...)
			if err := api.Delete(ctx, get(t, api)); err != nil {
				t.Fatal(err)
			}
			var steps []string
			for range tc.wantSteps {
				got := &etcdv1.EtcdSnapshot{}
				if err := api.Get(ctx, types.NamespacedName{Namespace: "ns", Name: "s1"}, got); err != nil {
					t.Fatal(err)
				}
				step, _, err := r.advance(ctx, got)
				if err != nil {
					t.Fatal(err)
				}
				steps = append(steps, step.Name)
			}
			if !slices.Equal(steps, tc.wantSteps) {
				t.Fatalf("steps %v, want %v", steps, tc.wantSteps)
			}
		})
	}
}

// A result that is missing is replaced by how the agent's container ended, so that the
// status says what a person would otherwise look for in the Pod.
func TestAgentEndSaysHowTheContainerEnded(t *testing.T) {
	terminated := func(code int32, reason, msg string) corev1.ContainerStatus {
		return corev1.ContainerStatus{Name: "agent", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason, Message: msg}}}
	}
	pod := func(name string, phase corev1.PodPhase, reason string, cs ...corev1.ContainerStatus) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.PodStatus{Phase: phase, Reason: reason, ContainerStatuses: cs}}
	}
	evicted := func(p corev1.Pod, msg string) corev1.Pod { p.Status.Message = msg; return p }
	long := strings.Repeat("x", endExcerpt+50)
	cases := []struct {
		name string
		pods []corev1.Pod
		want string
	}{
		{"no Pod", nil, "no Pod of the Job is left"},
		{"killed for memory", []corev1.Pod{pod("j-a", corev1.PodFailed, "", terminated(137, "OOMKilled", ""))},
			"Pod j-a: container agent exited with code 137 (OOMKilled)"},
		{"not started", []corev1.Pod{pod("j-a", corev1.PodFailed, "", terminated(128, "StartError", "exec: permission denied"))},
			"Pod j-a: container agent exited with code 128 (StartError): exec: permission denied"},
		{"a long message is cut", []corev1.Pod{pod("j-a", corev1.PodFailed, "", terminated(1, "Error", long))},
			"Pod j-a: container agent exited with code 1 (Error): " + long[:endExcerpt] + "..."},
		{"evicted before it ran", []corev1.Pod{pod("j-a", corev1.PodFailed, "Evicted")}, "Pod j-a Failed (Evicted)"},
		{"evicted for its scratch volume", []corev1.Pod{evicted(pod("j-a", corev1.PodFailed, "Evicted", terminated(137, "Error", "")),
			`Usage of EmptyDir volume "scratch" exceeds the limit "627Mi".`)},
			`Pod j-a (Evicted: Usage of EmptyDir volume "scratch" exceeds the limit "627Mi".): container agent exited with code 137 (Error)`},
		{"two Pods", []corev1.Pod{pod("j-a", corev1.PodFailed, "Evicted"), pod("j-b", corev1.PodFailed, "", terminated(2, "Error", ""))},
			"Pod j-a Failed (Evicted); Pod j-b: container agent exited with code 2 (Error)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := agentEnd(tc.pods); got != tc.want {
				t.Errorf("agentEnd = %q, want %q", got, tc.want)
			}
		})
	}
}
