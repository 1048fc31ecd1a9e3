package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	clientv3 "go.etcd.io/etcd/client/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/aenixfixture"
	"github.com/quorumkeeper/etcd-operator/internal/testrestore"
)

// TestMigrateAenixBackupsAndRestore stores a backup in the local S3 exactly as the legacy
// etcd.aenix.io backup agent does (etcd's snapshot stream of a loaded cluster, uploaded under
// <key prefix>/<backup>-rev<revision>.db) with the legacy EtcdBackup that records it
// (Complete, status.snapshot with its URI, size and sha256), a Failed legacy EtcdBackup and a
// legacy EtcdBackupSchedule. `kubectl etcd migrate aenix-backups` says what becomes what and
// changes nothing; with --apply the backup is an EtcdSnapshot, Complete without a snapshot
// taken (the bucket holds the legacy file alone), and the schedule an EtcdSnapshotSchedule. A
// NEW cluster restored from that EtcdSnapshot (spec.bootstrap.restore.source.snapshotRef)
// holds every key of the backup. The legacy objects stay.
func TestMigrateAenixBackupsAndRestore(t *testing.T) {
	t.Parallel()
	ns, bucket := s3Namespace(t)
	bin := buildPlugin(t)
	installAenixBackupCRDs(t)

	createCluster(t, ns, "source", 1)
	waitSettled(t, ns, "source", 1, 4*time.Minute)
	src := dialClusterWith(t, ns, "source", access{})
	loadKeys(t, src, "/legacy", 2000)
	b := storeLegacyBackup(t, ns, bucket, src)

	out := mustPlugin(t, bin, ns, "migrate", "aenix-backups")
	for _, want := range []string{"EtcdBackup nightly -> EtcdSnapshot nightly: created Complete, recording the file " + b.uri,
		"EtcdBackup broken: not imported: it is Failed", `EtcdBackupSchedule daily -> EtcdSnapshotSchedule daily: created, schedule "0 0 * * *"`,
		"left as they are: delete them yourself", "dry run: nothing was changed"} {
		if !strings.Contains(out, want) {
			t.Errorf("dry run output lacks %q:\n%s", want, out)
		}
	}
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "nightly"}, &etcdv1.EtcdSnapshot{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the dry run created an EtcdSnapshot (or reading it failed): %v", err)
	}

	t.Logf("kubectl etcd migrate aenix-backups --apply:\n%s", mustPlugin(t, bin, ns, "migrate", "aenix-backups", "--apply"))
	checkBackupImported(t, ns, bucket, b)

	createRestoredCluster(t, ns, "restored", 3, restoreFromSnapshot("nightly"))
	waitSettled(t, ns, "restored", 3, 6*time.Minute)
	testrestore.Compare(t, src, dialClusterWith(t, ns, "restored", access{}), b.revision, 2000)
	checkLegacyBackupsKept(t, ns)
}

// legacyBackup is a backup stored as the legacy agent stores it.
type legacyBackup struct {
	key, uri, checksum string
	revision, size     int64
}

// storeLegacyBackup takes the legacy agent's snapshot of src, uploads it where the agent puts
// an EtcdBackup named nightly (key prefix lg/backups), and creates the legacy objects: that
// EtcdBackup, Complete with its status.snapshot; a Failed one; an EtcdBackupSchedule.
func storeLegacyBackup(t *testing.T, ns, bucket string, src *clientv3.Client) legacyBackup {
	t.Helper()
	revision, data := legacyAgentSnapshot(t, src)
	sum := sha256.Sum256(data)
	b := legacyBackup{checksum: "sha256:" + hex.EncodeToString(sum[:]), revision: revision, size: int64(len(data)),
		key: aenixfixture.BackupKey("lg/backups", "nightly", revision)}
	b.uri = "s3://" + bucket + "/" + b.key
	dest := aenixfixture.S3Destination(localS3(t).endpoint, bucket, "lg/backups", s3SecretName)
	if _, err := localS3(t).admin.PutObject(context.Background(), bucket, b.key, bytes.NewReader(data), b.size, minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	failed := aenixfixture.CompleteBackup("broken", ns, "source", dest, 1, 0, b.checksum)
	failed["status"] = map[string]any{"phase": "Failed"}
	for _, obj := range []map[string]any{
		aenixfixture.CompleteBackup("nightly", ns, "source", dest, revision, b.size, b.checksum),
		failed,
		aenixfixture.BackupSchedule("daily", ns, "source", "@daily", dest),
	} {
		create(t, &unstructured.Unstructured{Object: obj})
	}
	return b
}

// checkBackupImported: EtcdSnapshot nightly is Complete with the legacy file, no snapshot was
// taken for it (the legacy file is as it was, and the bucket holds nothing else but what the
// imported schedule may have taken, under its own prefix), and the schedule is imported.
func checkBackupImported(t *testing.T, ns, bucket string, b legacyBackup) {
	t.Helper()
	s := waitSnapshotDone(t, ns, "nightly", etcdv1.SnapshotComplete)
	if s.Status.Artifact == nil || s.Status.Artifact.URI != b.uri || s.Status.Artifact.Checksum != b.checksum || s.Status.Revision != b.revision || !etcdv1.SnapshotImported(s) {
		t.Errorf("imported EtcdSnapshot: %+v", s.Status)
	}
	for k, size := range objects(t, bucket, "") {
		if (k == b.key && size != b.size) || (k != b.key && !strings.HasPrefix(k, "lg/backups/"+ns+"/source/")) {
			t.Errorf("the bucket holds %s (%d bytes); want the legacy file %s (%d bytes) untouched and no snapshot of the import", k, size, b.key, b.size)
		}
	}
	if sched := getSchedule(t, ns, "daily"); sched.Spec.Schedule != "0 0 * * *" || sched.Spec.Destination.S3 == nil || sched.Spec.Destination.S3.Key != "lg/backups" {
		t.Errorf("EtcdSnapshotSchedule daily: %+v", sched.Spec)
	}
}

// checkLegacyBackupsKept: the legacy objects are left for the user to delete.
func checkLegacyBackupsKept(t *testing.T, ns string) {
	t.Helper()
	for kind, name := range map[string]string{aenixfixture.BackupKind: "nightly", aenixfixture.BackupScheduleKind: "daily"} {
		legacy := &unstructured.Unstructured{}
		legacy.SetAPIVersion(aenixfixture.APIVersion)
		legacy.SetKind(kind)
		if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, legacy); err != nil {
			t.Errorf("the legacy %s %s is gone: %v", kind, name, err)
		}
	}
}

// legacyAgentSnapshot is what the legacy backup agent stores: it reads the revision (etcd's
// status, BACKUP_INCLUDE_REVISION), then etcd's snapshot stream, whole, as the file.
func legacyAgentSnapshot(t *testing.T, cli *clientv3.Client) (int64, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	status, err := cli.Status(ctx, cli.Endpoints()[0])
	if err != nil {
		t.Fatal(err)
	}
	rc, err := cli.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rc.Close() }()
	data, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return status.Header.Revision, data
}

// installAenixBackupCRDs installs the legacy EtcdBackup and EtcdBackupSchedule CRD fixtures
// once for all tests of the run, and waits until the API serves them.
func installAenixBackupCRDs(t *testing.T) {
	t.Helper()
	for _, file := range []string{"testdata/aenix-etcdbackup-crd.yaml", "testdata/aenix-etcdbackupschedule-crd.yaml"} {
		createCRDFile(t, file)
	}
	for _, kind := range []string{aenixfixture.BackupKind, aenixfixture.BackupScheduleKind} {
		eventually(t, time.Minute, "the API serves the legacy "+kind, func() error {
			list := &unstructured.UnstructuredList{}
			list.SetAPIVersion(aenixfixture.APIVersion)
			list.SetKind(kind + "List")
			return k8s.List(context.Background(), list)
		})
	}
}
