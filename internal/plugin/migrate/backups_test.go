package migrate

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/aenixfixture"
	"github.com/quorumkeeper/etcd-operator/internal/snapshotstore"
)

const legacySum = "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

func legacyS3Dest() map[string]any {
	return aenixfixture.S3Destination("http://minio.storage.svc:9000", "etcd-backups", "lg/backups", "s3-creds")
}

func backupsObserved(backups ...map[string]any) BackupsObserved {
	return BackupsObserved{Backups: backups, Snapshots: map[string]*etcdv1.EtcdSnapshot{},
		SnapshotSchedules: map[string]*etcdv1.EtcdSnapshotSchedule{}, Clusters: map[string]bool{"lg": true}}
}

// A Complete legacy EtcdBackup on S3 becomes an EtcdSnapshot that records its file: the exact
// key (with the revision suffix the agent added), the same store and credentials Secret, the
// checksum a restore checks the file against; Complete from the start, so that
// spec.bootstrap.restore.source.snapshotRef finds that very file.
func TestPlanBackupsImportsAnS3Backup(t *testing.T) {
	p := PlanBackups(backupsObserved(aenixfixture.CompleteBackup("nightly", "ns", "lg", legacyS3Dest(), 4711, 20480, legacySum)))
	if len(p.Refusals) != 0 || len(p.Snapshots) != 1 {
		t.Fatalf("plan %+v", p)
	}
	s := p.Snapshots[0]
	if s.Name != "nightly" || s.Namespace != "ns" || s.Spec.ClusterRef.Name != "lg" || s.Spec.DeletionPolicy != etcdv1.SnapshotRetain ||
		s.Annotations[etcdv1.AnnotationImportedFrom] != "EtcdBackup.etcd.aenix.io/nightly" {
		t.Errorf("snapshot %+v", s.ObjectMeta)
	}
	want := etcdv1.S3SnapshotLocation{Endpoint: "http://minio.storage.svc:9000", Bucket: "etcd-backups", Key: "lg/backups/nightly-rev4711.db",
		Region: "us-east-1", ForcePathStyle: true}
	want.CredentialsSecretRef.Name = "s3-creds"
	if got := s.Spec.Destination.S3; got == nil || *got != want || s.Spec.Destination.PVC != nil {
		t.Errorf("destination %+v, want %+v", got, want)
	}
	checkImportedS3Status(t, s)
	if out := p.Describe(); !strings.Contains(out, "EtcdBackup nightly -> EtcdSnapshot nightly: created Complete, recording the file s3://etcd-backups/lg/backups/nightly-rev4711.db") ||
		!strings.Contains(out, "left as they are: delete them yourself") {
		t.Errorf("describe:\n%s", out)
	}
}

// checkImportedS3Status: the imported snapshot is Complete with the legacy file, and the
// restore, which reads the artifact's file from the destination, reads that very file.
func checkImportedS3Status(t *testing.T, s *etcdv1.EtcdSnapshot) {
	t.Helper()
	st := s.Status
	if st.Phase != etcdv1.SnapshotComplete || st.Artifact.URI != "s3://etcd-backups/lg/backups/nightly-rev4711.db" || st.Artifact.SizeBytes != 20480 ||
		st.Artifact.Checksum != legacySum || st.Revision != 4711 || st.CompletionTime == nil || st.Conditions[0].Reason != etcdv1.ReasonImported {
		t.Errorf("status %+v", st)
	}
	file, ok := snapshotstore.LocationOf(s.Spec.Destination, snapshotstore.Of(s), st.Artifact.URI)
	if !ok || file.S3.Key != "lg/backups/nightly-rev4711.db" {
		t.Errorf("the restore would read %+v (%v)", file.S3, ok)
	}
}

// On a PVC the file the agent wrote under its mount /backup/data is the same path in the
// volume.
func TestPlanBackupsImportsAPVCBackup(t *testing.T) {
	p := PlanBackups(backupsObserved(aenixfixture.CompleteBackup("weekly", "ns", "lg", aenixfixture.PVCDestination("backups", "etcd/lg"), 12, 4096, legacySum)))
	if len(p.Refusals) != 0 || len(p.Snapshots) != 1 {
		t.Fatalf("plan %+v", p)
	}
	s := p.Snapshots[0]
	if got := s.Spec.Destination.PVC; got == nil || *got != (etcdv1.PVCSnapshotLocation{ClaimName: "backups", SubPath: "etcd/lg/weekly-rev12.db"}) {
		t.Errorf("destination %+v", got)
	}
	if s.Status.Artifact.URI != "pvc://backups/etcd/lg/weekly-rev12.db" {
		t.Errorf("artifact %+v", s.Status.Artifact)
	}
	if file, ok := snapshotstore.LocationOf(s.Spec.Destination, snapshotstore.Of(s), s.Status.Artifact.URI); !ok || file.PVC.SubPath != "etcd/lg/weekly-rev12.db" {
		t.Errorf("the restore would read %+v (%v)", file.PVC, ok)
	}
}

func TestPlanBackupsSkipsAndRefuses(t *testing.T) {
	backup := func(change func(b map[string]any)) map[string]any {
		b := aenixfixture.CompleteBackup("nightly", "ns", "lg", legacyS3Dest(), 4711, 20480, legacySum)
		change(b)
		return b
	}
	status := func(b map[string]any) map[string]any { return b["status"].(map[string]any) }
	for name, tc := range map[string]struct {
		obs           BackupsObserved
		line, refusal string
	}{
		"failed": {obs: backupsObserved(backup(func(b map[string]any) { status(b)["phase"] = "Failed" })),
			line: "EtcdBackup nightly: not imported: it is Failed, not Complete: it stored no file"},
		"no recorded file": {obs: backupsObserved(backup(func(b map[string]any) { delete(status(b), "snapshot") })),
			line: "its status.snapshot does not record the file it wrote"},
		"no sha256": {obs: backupsObserved(backup(func(b map[string]any) {
			status(b)["snapshot"].(map[string]any)["checksum"] = "blake3-256:" + strings.Repeat("a", 64)
		})), line: "records no sha256 checksum"},
		"uri of another bucket": {obs: backupsObserved(backup(func(b map[string]any) {
			status(b)["snapshot"].(map[string]any)["uri"] = "s3://elsewhere/x.db"
		})), refusal: `EtcdBackup nightly: its status.snapshot.uri "s3://elsewhere/x.db" is not an object of its bucket etcd-backups`},
		"endpoint without scheme": {obs: backupsObserved(backup(func(b map[string]any) {
			b["spec"].(map[string]any)["destination"].(map[string]any)["s3"].(map[string]any)["endpoint"] = "minio:9000"
		})), refusal: `its spec.destination.s3.endpoint "minio:9000" is no http:// or https:// URL`},
		"name taken": {obs: func() BackupsObserved {
			o := backupsObserved(backup(func(map[string]any) {}))
			o.Snapshots["nightly"] = &etcdv1.EtcdSnapshot{}
			return o
		}(), refusal: "this operator's EtcdSnapshot nightly exists and is not its import"},
		"imported before": {obs: func() BackupsObserved {
			o := backupsObserved(backup(func(map[string]any) {}))
			o.Snapshots["nightly"] = &etcdv1.EtcdSnapshot{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{etcdv1.AnnotationImportedFrom: "EtcdBackup.etcd.aenix.io/nightly"}},
				Status: etcdv1.EtcdSnapshotStatus{Phase: etcdv1.SnapshotComplete}}
			return o
		}(), line: "EtcdBackup nightly: already imported as EtcdSnapshot nightly, unchanged"},
	} {
		t.Run(name, func(t *testing.T) {
			p := PlanBackups(tc.obs)
			out := p.Describe()
			if tc.line != "" && (!strings.Contains(out, tc.line) || len(p.Refusals) != 0 || len(p.Snapshots) != 0) {
				t.Errorf("plan %+v, want the line %q:\n%s", p, tc.line, out)
			}
			if tc.refusal != "" && (!strings.Contains(strings.Join(p.Refusals, "\n"), tc.refusal) || len(p.Snapshots) != 0) {
				t.Errorf("refusals %q, want %q", p.Refusals, tc.refusal)
			}
		})
	}
}

// An import cut short after the EtcdSnapshot was created, before its status was written, is
// finished by running again.
func TestPlanBackupsFinishesAnImportCutShort(t *testing.T) {
	o := backupsObserved(aenixfixture.CompleteBackup("nightly", "ns", "lg", legacyS3Dest(), 4711, 20480, legacySum))
	o.Snapshots["nightly"] = &etcdv1.EtcdSnapshot{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{etcdv1.AnnotationImportedFrom: "EtcdBackup.etcd.aenix.io/nightly"}}}
	if p := PlanBackups(o); len(p.Snapshots) != 1 || len(p.Refusals) != 0 {
		t.Errorf("plan %+v", p)
	}
}

func TestPlanBackupSchedules(t *testing.T) {
	for name, tc := range map[string]struct {
		schedule   map[string]any
		clusters   map[string]bool
		existing   *etcdv1.EtcdSnapshotSchedule
		want       *etcdv1.EtcdSnapshotScheduleSpec
		line, fail string
	}{
		"s3": {schedule: aenixfixture.BackupSchedule("daily", "ns", "lg", "0 3 * * *", legacyS3Dest()),
			want: &etcdv1.EtcdSnapshotScheduleSpec{Schedule: "0 3 * * *", DeletionPolicy: etcdv1.SnapshotRetain, Destination: etcdv1.SnapshotLocation{S3: &etcdv1.S3SnapshotLocation{
				Endpoint: "http://minio.storage.svc:9000", Bucket: "etcd-backups", Key: "lg/backups", Region: "us-east-1", ForcePathStyle: true}}},
			line: `EtcdBackupSchedule daily -> EtcdSnapshotSchedule daily: created, schedule "0 3 * * *" in UTC, snapshots of lg to s3://etcd-backups/lg/backups/ns/lg/<snapshot>.db`},
		"macro on a pvc": {schedule: aenixfixture.BackupSchedule("hourly", "ns", "lg", "@hourly", aenixfixture.PVCDestination("backups", "etcd")),
			want: &etcdv1.EtcdSnapshotScheduleSpec{Schedule: "0 * * * *", DeletionPolicy: etcdv1.SnapshotRetain,
				Destination: etcdv1.SnapshotLocation{PVC: &etcdv1.PVCSnapshotLocation{ClaimName: "backups", SubPath: "etcd"}}},
			line: "to pvc://backups/etcd/<snapshot>.db"},
		"cluster not migrated": {schedule: aenixfixture.BackupSchedule("daily", "ns", "other", "0 3 * * *", legacyS3Dest()),
			fail: "EtcdBackupSchedule daily: its cluster other is no EtcdCluster of this operator yet: migrate it first (kubectl etcd migrate aenix other)"},
		"six fields": {schedule: aenixfixture.BackupSchedule("daily", "ns", "lg", "0 0 3 * * *", legacyS3Dest()), fail: `its schedule "0 0 3 * * *" is no 5-field cron expression`},
		"name taken": {schedule: aenixfixture.BackupSchedule("daily", "ns", "lg", "0 3 * * *", legacyS3Dest()), existing: &etcdv1.EtcdSnapshotSchedule{},
			fail: "this operator's EtcdSnapshotSchedule daily exists and is not its import"},
		"imported before": {schedule: aenixfixture.BackupSchedule("daily", "ns", "lg", "0 3 * * *", legacyS3Dest()),
			existing: &etcdv1.EtcdSnapshotSchedule{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{etcdv1.AnnotationImportedFrom: "EtcdBackupSchedule.etcd.aenix.io/daily"}}},
			line:     "already imported as EtcdSnapshotSchedule daily, unchanged"},
	} {
		t.Run(name, func(t *testing.T) {
			o := backupsObserved()
			o.Schedules = []map[string]any{tc.schedule}
			if tc.existing != nil {
				o.SnapshotSchedules["daily"] = tc.existing
			}
			p := PlanBackups(o)
			got := strings.Join(p.Refusals, "\n")
			if tc.fail != "" {
				if !strings.Contains(got, tc.fail) || len(p.Schedules) != 0 {
					t.Errorf("refusals %q, want %q", p.Refusals, tc.fail)
				}
				return
			}
			if got != "" || !strings.Contains(p.Describe(), tc.line) {
				t.Errorf("refusals %q, describe:\n%s\nwant the line %q", got, p.Describe(), tc.line)
			}
			if tc.want != nil {
				checkScheduleSpec(t, p.Schedules, *tc.want)
			}
		})
	}
}

// checkScheduleSpec: one schedule, of cluster lg, with want's spec (its S3 credentials Secret
// s3-creds), keeping every snapshot, in UTC.
func checkScheduleSpec(t *testing.T, schedules []*etcdv1.EtcdSnapshotSchedule, want etcdv1.EtcdSnapshotScheduleSpec) {
	t.Helper()
	if len(schedules) != 1 {
		t.Fatalf("schedules %+v", schedules)
	}
	s := schedules[0]
	want.ClusterRef.Name = "lg"
	if want.Destination.S3 != nil {
		want.Destination.S3.CredentialsSecretRef.Name = "s3-creds"
	}
	if s.Spec.Schedule != want.Schedule || s.Spec.DeletionPolicy != want.DeletionPolicy || s.Spec.ClusterRef != want.ClusterRef ||
		s.Spec.Retention.KeepLast != nil || s.Spec.Retention.MaxAge != nil || s.Spec.TimeZone != "" {
		t.Errorf("spec %+v, want %+v", s.Spec, want)
	}
	got, wanted := s.Spec.Destination, want.Destination
	if (got.S3 == nil) != (wanted.S3 == nil) || (got.S3 != nil && *got.S3 != *wanted.S3) || (got.PVC == nil) != (wanted.PVC == nil) ||
		(got.PVC != nil && *got.PVC != *wanted.PVC) {
		t.Errorf("destination %+v %+v", got.S3, got.PVC)
	}
}
