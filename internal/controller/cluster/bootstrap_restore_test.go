package cluster

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/snapshotstore"
)

func TestARestoredClusterBootstrapsFromOneSeed(t *testing.T) {
	plain := &etcdv1.EtcdCluster{}
	restored := &etcdv1.EtcdCluster{Spec: etcdv1.EtcdClusterSpec{Bootstrap: &etcdv1.BootstrapSpec{Restore: &etcdv1.RestoreSpec{}}}}
	if foundingCount(plain, 3) != 3 || foundingCount(restored, 3) != 1 || foundingCount(restored, 0) != 0 {
		t.Error("a restore must bootstrap one seed; a plain cluster all its members")
	}
}

func TestRestoreContainerFailureReadsTheAgentsResult(t *testing.T) {
	status := func(state, last *corev1.ContainerStateTerminated) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{InitContainerStatuses: []corev1.ContainerStatus{{
			Name: "restore", State: corev1.ContainerState{Terminated: state},
			LastTerminationState: corev1.ContainerState{Terminated: last},
		}}}}
	}
	failed := &corev1.ContainerStateTerminated{ExitCode: 1, Message: `{"reason":"CredentialsRejected","message":"access key refused"}`}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want string
	}{
		{"failing now", status(failed, nil), "CredentialsRejected: access key refused"},
		{"waiting after a failure", status(nil, failed), "CredentialsRejected"},
		{"succeeded after a failure", status(&corev1.ContainerStateTerminated{ExitCode: 0}, failed), ""},
		{"no result", status(&corev1.ContainerStateTerminated{ExitCode: 2, Reason: "Error"}, nil), "exited with code 2"},
		{"not started", &corev1.Pod{}, ""},
	} {
		got := restoreContainerFailure(tc.pod)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// The Bootstrapping message says where the seed's restore is, from its restore init
// container: not started, running since when and which attempt, done; a formed cluster and
// a member that restores nothing say nothing.
func TestRestoreProgressSaysWhereTheSeedIs(t *testing.T) {
	since := metav1.NewTime(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	initStatus := func(restarts int32, state corev1.ContainerState) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending, InitContainerStatuses: []corev1.ContainerStatus{
			{Name: "install-restore-agent", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{}}},
			{Name: "restore", RestartCount: restarts, State: state},
		}}}
	}
	src := etcdv1.SnapshotLocation{S3: &etcdv1.S3SnapshotLocation{Bucket: "b", Key: "k.db"}}
	seed := &etcdv1.EtcdMember{ObjectMeta: metav1.ObjectMeta{Name: "r-1"}, Spec: etcdv1.EtcdMemberSpec{Bootstrap: etcdv1.MemberBootstrap{
		InitialClusterState: etcdv1.InitialClusterStateNew, Restore: &etcdv1.MemberRestore{Source: src}}}}
	joiner := &etcdv1.EtcdMember{ObjectMeta: metav1.ObjectMeta{Name: "r-2"}, Spec: etcdv1.EtcdMemberSpec{Bootstrap: etcdv1.MemberBootstrap{
		InitialClusterState: etcdv1.InitialClusterStateExisting}}}
	forming := &etcdv1.EtcdCluster{}
	for _, tc := range []struct {
		name    string
		cluster *etcdv1.EtcdCluster
		pod     *corev1.Pod
		want    string
	}{
		{"no Pod yet", forming, nil, "member r-1 is to restore s3://b/k.db once its Pod is created"},
		{"the agent is being installed", forming, &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending}}, "member r-1 is to restore s3://b/k.db once its Pod starts (Pod Pending)"},
		{"restoring", forming, initStatus(0, corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: since}}),
			"member r-1 is restoring s3://b/k.db since 2026-05-01T12:00:00Z: downloading, verifying, etcdutl snapshot restore"},
		{"restoring again", forming, initStatus(2, corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: since}}),
			"member r-1 is restoring s3://b/k.db since 2026-05-01T12:00:00Z (attempt 3): downloading, verifying, etcdutl snapshot restore"},
		{"restored", forming, initStatus(0, corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}), "member r-1 restored s3://b/k.db; etcd is starting"},
		{"formed", &etcdv1.EtcdCluster{Status: etcdv1.EtcdClusterStatus{ClusterID: "abc"}}, initStatus(0, corev1.ContainerState{}), ""},
	} {
		got := restoreProgress(tc.cluster, []*etcdv1.EtcdMember{seed, joiner}, map[string]*corev1.Pod{"r-1": tc.pod, "r-2": {}})
		if got != tc.want {
			t.Errorf("%s:\n %q\nwant\n %q", tc.name, got, tc.want)
		}
	}
}

// Bootstrapping's message carries the restore's progress; a failure wins with RestoreFailed.
func TestBootstrappingSaysHowTheRestoreGoes(t *testing.T) {
	c := &etcdv1.EtcdCluster{}
	const progress = "member r-1 is restoring s3://b/k.db since 2026-05-01T12:00:00Z"
	got := availableCondition(c, &clusterView{restoreProgress: progress}, 3)
	if got.Reason != etcdv1.ReasonBootstrapping || !strings.HasSuffix(got.Message, ": "+progress) {
		t.Errorf("restoring: %s %q", got.Reason, got.Message)
	}
	got = availableCondition(c, &clusterView{restoreProgress: progress, restoreFailure: "member r-1: CredentialsUnavailable: ..."}, 3)
	if got.Reason != etcdv1.ReasonRestoreFailed {
		t.Errorf("failed: %s %q", got.Reason, got.Message)
	}
}

func TestResolveRestore(t *testing.T) {
	s3Dest := etcdv1.SnapshotLocation{S3: &etcdv1.S3SnapshotLocation{Endpoint: "https://s3.example", Bucket: "b", Key: "nightly/",
		CredentialsSecretRef: corev1.LocalObjectReference{Name: "creds"}, Region: "r", ForcePathStyle: true}}
	pvcDest := etcdv1.SnapshotLocation{PVC: &etcdv1.PVCSnapshotLocation{ClaimName: "backups", SubPath: "etcd"}}
	const sum = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	cluster := func(src etcdv1.RestoreSource) *etcdv1.EtcdCluster {
		return &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "ns"},
			Spec: etcdv1.EtcdClusterSpec{Bootstrap: &etcdv1.BootstrapSpec{Restore: &etcdv1.RestoreSpec{Source: src}}}}
	}
	byRef := cluster(etcdv1.RestoreSource{SnapshotRef: &corev1.LocalObjectReference{Name: "snap"}})
	snapshot := func(dest etcdv1.SnapshotLocation, edit func(*etcdv1.EtcdSnapshot)) *etcdv1.EtcdSnapshot {
		s := &etcdv1.EtcdSnapshot{ObjectMeta: metav1.ObjectMeta{Name: "snap", Namespace: "ns"},
			Spec: etcdv1.EtcdSnapshotSpec{Destination: dest},
			Status: etcdv1.EtcdSnapshotStatus{Phase: etcdv1.SnapshotComplete,
				Artifact: &etcdv1.SnapshotArtifact{URI: snapshotstore.DestinationURI(dest, snapshotstore.FileOf{Namespace: "ns", Name: "snap"}), SizeBytes: 100, Checksum: sum}}}
		if edit != nil {
			edit(s)
		}
		return s
	}
	s3File := *s3Dest.S3
	s3File.Key = "nightly/ns/snap.db"
	for _, tc := range []struct {
		name    string
		c       *etcdv1.EtcdCluster
		snap    *etcdv1.EtcdSnapshot
		want    *etcdv1.MemberRestore
		failure []string // the failure names these; nil: no failure
	}{
		{name: "no restore", c: &etcdv1.EtcdCluster{}},
		{name: "s3 as it is, checksum from beside the file", c: cluster(etcdv1.RestoreSource{S3: s3Dest.S3}),
			want: &etcdv1.MemberRestore{Source: s3Dest}},
		{name: "pvc as it is", c: cluster(etcdv1.RestoreSource{PVC: &etcdv1.PVCSnapshotLocation{ClaimName: "c", SubPath: "a.db"}}),
			want: &etcdv1.MemberRestore{Source: etcdv1.SnapshotLocation{PVC: &etcdv1.PVCSnapshotLocation{ClaimName: "c", SubPath: "a.db"}}}},
		{name: "complete S3 snapshot: its file, credentials and checksum", c: byRef, snap: snapshot(s3Dest, nil),
			want: &etcdv1.MemberRestore{Source: etcdv1.SnapshotLocation{S3: &s3File}, Checksum: sum, Snapshot: "snap"}},
		{name: "complete PVC snapshot: its file", c: byRef, snap: snapshot(pvcDest, nil),
			want: &etcdv1.MemberRestore{Source: etcdv1.SnapshotLocation{PVC: &etcdv1.PVCSnapshotLocation{ClaimName: "backups", SubPath: "etcd/snap.db"}}, Checksum: sum, Snapshot: "snap"}},
		{name: "a destination key ending in .db is the file", c: byRef,
			snap: snapshot(etcdv1.SnapshotLocation{S3: &etcdv1.S3SnapshotLocation{Bucket: "b", Key: "exact.db"}}, nil),
			want: &etcdv1.MemberRestore{Source: etcdv1.SnapshotLocation{S3: &etcdv1.S3SnapshotLocation{Bucket: "b", Key: "exact.db"}}, Checksum: sum, Snapshot: "snap"}},
		{name: "missing", c: byRef, failure: []string{"EtcdSnapshot snap does not exist in namespace ns", "create it"}},
		{name: "pending", c: byRef, snap: snapshot(s3Dest, func(s *etcdv1.EtcdSnapshot) { s.Status = etcdv1.EtcdSnapshotStatus{} }),
			failure: []string{"EtcdSnapshot snap is Pending, not Complete yet", "starts once it completes"}},
		{name: "started", c: byRef, snap: snapshot(s3Dest, func(s *etcdv1.EtcdSnapshot) { s.Status = etcdv1.EtcdSnapshotStatus{Phase: etcdv1.SnapshotStarted} }),
			failure: []string{"EtcdSnapshot snap is Started, not Complete yet"}},
		{name: "failed", c: byRef, snap: snapshot(s3Dest, func(s *etcdv1.EtcdSnapshot) {
			s.Status = etcdv1.EtcdSnapshotStatus{Phase: etcdv1.SnapshotFailed, Conditions: []metav1.Condition{
				{Type: "Ready", Status: metav1.ConditionFalse, Reason: "BucketNotFound", Message: "create the bucket"}}}
		}), failure: []string{"EtcdSnapshot snap failed (BucketNotFound: create the bucket)", "create it again under the same name", "delete this EtcdCluster"}},
		{name: "being deleted", c: byRef, snap: snapshot(s3Dest, func(s *etcdv1.EtcdSnapshot) { s.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)} }),
			failure: []string{"EtcdSnapshot snap is being deleted"}},
		{name: "complete without a checksum", c: byRef, snap: snapshot(s3Dest, func(s *etcdv1.EtcdSnapshot) { s.Status.Artifact.Checksum = "" }),
			failure: []string{"EtcdSnapshot snap is Complete but its status.artifact", "cannot be verified"}},
		{name: "complete without an artifact", c: byRef, snap: snapshot(s3Dest, func(s *etcdv1.EtcdSnapshot) { s.Status.Artifact = nil }),
			failure: []string{"(none)"}},
		{name: "artifact naming another file", c: byRef, snap: snapshot(s3Dest, func(s *etcdv1.EtcdSnapshot) { s.Status.Artifact.URI = "s3://b/other.db" }),
			failure: []string{"s3://b/other.db", "s3://b/nightly/ns/snap.db"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.snap.DeepCopy()
			got, failure := resolveRestore(tc.c, tc.snap)
			if tc.failure != nil {
				if got != nil || failure == "" {
					t.Fatalf("got %+v, %q; want a failure", got, failure)
				}
				for _, want := range tc.failure {
					if !strings.Contains(failure, want) {
						t.Errorf("failure %q does not say %q", failure, want)
					}
				}
				return
			}
			if failure != "" || !equality.Semantic.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v (%q), want %+v", got, failure, tc.want)
			}
			if !equality.Semantic.DeepEqual(before, tc.snap) {
				t.Error("resolving changed the EtcdSnapshot")
			}
		})
	}
}

// A cluster restoring from a snapshotRef creates no member while the EtcdSnapshot is missing
// or unfinished (Available says RestoreFailed, naming it), then one seed that carries the
// snapshot's file and checksum, and keeps it when the EtcdSnapshot goes.
func TestARestoreFromASnapshotRefWaitsForItAndRecordsItInTheSeed(t *testing.T) {
	h := newHarness(t)
	h.editSpec(func(s *etcdv1.EtcdClusterSpec) {
		s.Bootstrap = &etcdv1.BootstrapSpec{Restore: &etcdv1.RestoreSpec{Source: etcdv1.RestoreSource{SnapshotRef: &corev1.LocalObjectReference{Name: "snap"}}}}
	})
	waiting := func(want string) {
		t.Helper()
		h.reconcile()
		if m := h.members(); len(m) != 0 {
			t.Fatalf("members %v created before the snapshot is usable", names(m))
		}
		cond := meta.FindStatusCondition(h.clusterObj().Status.Conditions, etcdv1.ConditionAvailable)
		if cond == nil || cond.Reason != etcdv1.ReasonRestoreFailed || !strings.Contains(cond.Message, want) {
			t.Fatalf("Available %+v, want RestoreFailed naming %q", cond, want)
		}
	}
	waiting("EtcdSnapshot snap does not exist in namespace ns")

	dest := etcdv1.SnapshotLocation{PVC: &etcdv1.PVCSnapshotLocation{ClaimName: "backups", SubPath: "etcd"}}
	snap := &etcdv1.EtcdSnapshot{ObjectMeta: metav1.ObjectMeta{Name: "snap", Namespace: "ns"},
		Spec:   etcdv1.EtcdSnapshotSpec{ClusterRef: corev1.LocalObjectReference{Name: "other"}, Destination: dest},
		Status: etcdv1.EtcdSnapshotStatus{Phase: etcdv1.SnapshotStarted}}
	if err := h.api.Create(context.Background(), snap); err != nil {
		t.Fatal(err)
	}
	if reqs := h.r.clustersRestoringFrom(context.Background(), snap); len(reqs) != 1 || reqs[0].Name != "db" {
		t.Fatalf("the snapshot wakes %v, want the cluster db", reqs)
	}
	waiting("EtcdSnapshot snap is Started, not Complete yet")

	const sum = "sha256:00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
	snap.Status = etcdv1.EtcdSnapshotStatus{Phase: etcdv1.SnapshotComplete, Artifact: &etcdv1.SnapshotArtifact{URI: "pvc://backups/etcd/snap.db", Checksum: sum}}
	if err := h.api.Update(context.Background(), snap); err != nil {
		t.Fatal(err)
	}
	h.reconcile()
	members := h.members()
	if len(members) != 1 {
		t.Fatalf("members %v, want one seed", names(members))
	}
	want := &etcdv1.MemberRestore{Source: etcdv1.SnapshotLocation{PVC: &etcdv1.PVCSnapshotLocation{ClaimName: "backups", SubPath: "etcd/snap.db"}}, Checksum: sum, Snapshot: "snap"}
	if got, held := members[0].Spec.Bootstrap.Restore, h.snapshotHeld(); !equality.Semantic.DeepEqual(got, want) || !held {
		t.Fatalf("the seed restores %+v, want %+v; the EtcdSnapshot holds its file for it: %v", got, want, held)
	}
	h.checkTheSeedOutlivesItsSnapshot(snap, want)
}

// checkTheSeedOutlivesItsSnapshot deletes the EtcdSnapshot the seed was created from: the
// seed keeps what it restores, and the restore is not failed.
func (h *harness) checkTheSeedOutlivesItsSnapshot(snap *etcdv1.EtcdSnapshot, want *etcdv1.MemberRestore) {
	h.t.Helper()
	if err := h.api.Delete(context.Background(), snap); err != nil {
		h.t.Fatal(err)
	}
	h.reconcile()
	if m := h.members(); len(m) != 1 || !equality.Semantic.DeepEqual(m[0].Spec.Bootstrap.Restore, want) {
		h.t.Fatalf("after the EtcdSnapshot went: members %v", names(m))
	}
	if cond := meta.FindStatusCondition(h.clusterObj().Status.Conditions, etcdv1.ConditionAvailable); cond.Reason == etcdv1.ReasonRestoreFailed {
		h.t.Fatalf("the EtcdSnapshot gone after the seed was created fails the restore: %+v", cond)
	}
}
