package cluster

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

var pitrT0 = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

func pitrSnapshot(name string, phase etcdv1.SnapshotPhase, rev int64, done time.Duration) etcdv1.EtcdSnapshot {
	s := etcdv1.EtcdSnapshot{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: "u-" + "name"},
		Spec: etcdv1.EtcdSnapshotSpec{ClusterRef: corev1.LocalObjectReference{Name: "src"},
			Destination: etcdv1.SnapshotLocation{S3: &etcdv1.S3SnapshotLocation{Endpoint: "http://minio:9000", Bucket: "b", Key: "etcd/"}}},
		Status: etcdv1.EtcdSnapshotStatus{Phase: phase, Revision: rev, CompletionTime: &metav1.Time{Time: pitrT0.Add(done)}}}
	s.Status.Artifact = &etcdv1.SnapshotArtifact{URI: "s3://b/etcd/ns/src/" + name + ".db", Checksum: "sha256:" + name}
	return s
}

func pitrCluster(target etcdv1.RestoreTarget) *etcdv1.EtcdCluster {
	return &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "dst", Namespace: "ns"}, Spec: etcdv1.EtcdClusterSpec{
		Bootstrap: &etcdv1.BootstrapSpec{Restore: &etcdv1.RestoreSpec{Source: etcdv1.RestoreSource{ScheduleRef: &corev1.LocalObjectReference{Name: "nightly"}}, Target: &target}}}}
}

func pitrSchedule() *etcdv1.EtcdSnapshotSchedule {
	const latest = 3 * time.Hour
	return &etcdv1.EtcdSnapshotSchedule{ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "ns"},
		Spec: etcdv1.EtcdSnapshotScheduleSpec{ClusterRef: corev1.LocalObjectReference{Name: "src"},
			Destination: etcdv1.SnapshotLocation{S3: &etcdv1.S3SnapshotLocation{Endpoint: "http://minio:9000", Bucket: "b", Key: "etcd/"}},
			Archive:     &etcdv1.SnapshotArchive{}},
		Status: etcdv1.EtcdSnapshotScheduleStatus{Archive: &etcdv1.ArchiveStatus{Window: &etcdv1.RestoreWindow{
			Earliest: etcdv1.RestorePoint{Revision: 100, Time: &metav1.Time{Time: pitrT0}},
			Latest:   etcdv1.RestorePoint{Revision: 400, Time: &metav1.Time{Time: pitrT0.Add(latest)}}}}}}
}

func rev(r int64) etcdv1.RestoreTarget { return etcdv1.RestoreTarget{Revision: &r} }

func at(d time.Duration) etcdv1.RestoreTarget {
	return etcdv1.RestoreTarget{Time: &metav1.Time{Time: pitrT0.Add(d)}}
}

// A restore to a target takes the newest Complete snapshot at or before it (by revision, or
// by completion for a time), with the schedule's archive and the target; it waits, saying why,
// while the schedule is missing or has no archive, while no snapshot is early enough, and
// while the archive does not reach the target.
func TestARestoreToATargetTakesTheNewestSnapshotBeforeIt(t *testing.T) {
	snaps := []etcdv1.EtcdSnapshot{
		pitrSnapshot("nightly-1", etcdv1.SnapshotComplete, 100, 0),
		pitrSnapshot("nightly-2", etcdv1.SnapshotComplete, 200, time.Hour),
		pitrSnapshot("nightly-3", etcdv1.SnapshotFailed, 250, 90*time.Minute),
		pitrSnapshot("nightly-4", etcdv1.SnapshotComplete, 300, 2*time.Hour),
	}
	noArchive := pitrSchedule()
	noArchive.Spec.Archive = nil
	for _, tc := range []struct {
		name   string
		target etcdv1.RestoreTarget
		sc     *etcdv1.EtcdSnapshotSchedule
		base   string // "": a failure saying fails
		fails  string
	}{
		{"a revision between two snapshots", rev(250), pitrSchedule(), "nightly-2", ""},
		{"a snapshot's own revision", rev(300), pitrSchedule(), "nightly-4", ""},
		{"a time between two snapshots", at(119 * time.Minute), pitrSchedule(), "nightly-2", ""},
		{"a time at a snapshot's completion", at(2 * time.Hour), pitrSchedule(), "nightly-4", ""},
		{"before every snapshot", rev(50), pitrSchedule(), "", "no Complete snapshot at or before it"},
		{"beyond the archive, revision", rev(401), pitrSchedule(), "", "reaches revision 400: the restore starts once it does"},
		{"beyond the archive, time", at(3*time.Hour + time.Second), pitrSchedule(), "", "reaches 2026-12-02T13:00:00Z"},
		{"no schedule", rev(250), nil, "", "EtcdSnapshotSchedule nightly does not exist"},
		{"no archive", rev(250), noArchive, "", "has no spec.archive"},
	} {
		got, failure := resolveArchiveRestore(pitrCluster(tc.target), tc.sc, snaps)
		if why := checkResolved(got, failure, tc.target, tc.base, tc.fails); why != "" {
			t.Errorf("%s: %s", tc.name, why)
		}
	}
}

// checkResolved says what is wrong with a resolved restore: base "" wants a failure saying
// fails; else the base's file and checksum with the archive and the target.
func checkResolved(got *etcdv1.MemberRestore, failure string, target etcdv1.RestoreTarget, base, fails string) string {
	if base == "" {
		if got != nil || !strings.Contains(failure, fails) {
			return fmt.Sprintf("%+v, %q; want a failure saying %q", got, failure, fails)
		}
		return ""
	}
	if failure != "" || got == nil || got.Snapshot != base || got.Checksum != "sha256:"+base || got.Archive == nil ||
		got.Archive.Prefix != "etcd/ns/src/nightly.archive" || got.Source.S3.Key != "etcd/ns/src/"+base+".db" {
		return fmt.Sprintf("%+v (%q), want %s with the archive", got, failure, base)
	}
	if target.Revision != nil && got.Archive.Revision != *target.Revision || target.Time != nil && !got.Archive.Time.Equal(target.Time) {
		return fmt.Sprintf("target %+v", got.Archive)
	}
	return ""
}
