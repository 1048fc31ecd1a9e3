package migratecmd

import (
	"context"
	"io"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/aenixfixture"
	"github.com/quorumkeeper/etcd-operator/internal/plugin/cli"
	"github.com/quorumkeeper/etcd-operator/internal/plugin/migrate"
)

const legacySum = "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

// backupsAPI is a fake API with this operator's cluster lg and, in its namespace, a Complete
// legacy EtcdBackup on S3 and a legacy EtcdBackupSchedule.
func backupsAPI(t *testing.T) *cli.Kube {
	t.Helper()
	scheme, err := cli.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	var objs []client.Object
	dest := aenixfixture.S3Destination("http://minio.storage.svc:9000", "etcd-backups", "lg", "s3-creds")
	for kind, obj := range map[string]map[string]any{
		aenixfixture.BackupKind:         aenixfixture.CompleteBackup("nightly", "ns", "lg", dest, 4711, 20480, legacySum),
		aenixfixture.BackupScheduleKind: aenixfixture.BackupSchedule("daily", "ns", "lg", "@daily", dest),
	} {
		gv := schema.GroupVersion{Group: aenixfixture.Group, Version: "v1alpha1"}
		scheme.AddKnownTypeWithName(gv.WithKind(kind), &unstructured.Unstructured{})
		scheme.AddKnownTypeWithName(gv.WithKind(kind+"List"), &unstructured.UnstructuredList{})
		objs = append(objs, &unstructured.Unstructured{Object: obj})
	}
	objs = append(objs, &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "lg", Namespace: "ns"}})
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithStatusSubresource(&etcdv1.EtcdSnapshot{}).Build()
	return &cli.Kube{Client: c, Namespace: "ns"}
}

// The command reads the legacy objects, and --apply creates an EtcdSnapshot that is Complete
// with the legacy file and an EtcdSnapshotSchedule; a second run finds both imported and
// changes nothing.
func TestApplyBackupsImportsAndIsIdempotent(t *testing.T) {
	ctx := context.Background()
	k := backupsAPI(t)
	o := &cli.Options{Out: io.Discard, Err: io.Discard}
	obs, err := observeBackups(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	plan := migrate.PlanBackups(obs)
	if len(plan.Refusals) != 0 || len(plan.Snapshots) != 1 || len(plan.Schedules) != 1 {
		t.Fatalf("plan %+v", plan)
	}
	if err := applyBackups(ctx, o, k, plan); err != nil {
		t.Fatal(err)
	}
	checkImportedSnapshot(t, k)
	sched := &etcdv1.EtcdSnapshotSchedule{}
	if err := k.Client.Get(ctx, types.NamespacedName{Namespace: "ns", Name: "daily"}, sched); err != nil || sched.Spec.Schedule != "0 0 * * *" {
		t.Errorf("EtcdSnapshotSchedule %+v: %v", sched.Spec, err)
	}
	obs, err = observeBackups(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	again := migrate.PlanBackups(obs)
	if len(again.Snapshots)+len(again.Schedules)+len(again.Refusals) != 0 || !strings.Contains(again.Describe(), "already imported as EtcdSnapshot nightly") {
		t.Errorf("second plan %+v", again)
	}
}

// checkImportedSnapshot: EtcdSnapshot nightly records the legacy file, Complete.
func checkImportedSnapshot(t *testing.T, k *cli.Kube) {
	t.Helper()
	s := &etcdv1.EtcdSnapshot{}
	if err := k.Client.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "nightly"}, s); err != nil {
		t.Fatal(err)
	}
	if s.Status.Phase != etcdv1.SnapshotComplete || s.Status.Artifact == nil || s.Status.Artifact.URI != "s3://etcd-backups/lg/nightly-rev4711.db" ||
		s.Status.Artifact.Checksum != legacySum || !etcdv1.SnapshotImported(s) || s.Spec.Destination.S3.Key != "lg/nightly-rev4711.db" {
		t.Errorf("EtcdSnapshot %+v %+v", s.Spec, s.Status)
	}
	// The CRD refuses a condition without its transition time (the fake client does not).
	for _, c := range s.Status.Conditions {
		if c.LastTransitionTime.IsZero() {
			t.Errorf("condition %s without lastTransitionTime: the apiserver refuses the status", c.Type)
		}
	}
}

// An import cut short after the EtcdSnapshot was created is finished: its status is written.
func TestApplyBackupsFinishesAnImportCutShort(t *testing.T) {
	ctx := context.Background()
	k := backupsAPI(t)
	obs, err := observeBackups(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	plan := migrate.PlanBackups(obs)
	created := plan.Snapshots[0].DeepCopy()
	created.Status = etcdv1.EtcdSnapshotStatus{}
	if err := k.Client.Create(ctx, created); err != nil {
		t.Fatal(err)
	}
	obs, err = observeBackups(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	if err := applyBackups(ctx, &cli.Options{Out: io.Discard, Err: io.Discard}, k, migrate.PlanBackups(obs)); err != nil {
		t.Fatal(err)
	}
	s := &etcdv1.EtcdSnapshot{}
	if err := k.Client.Get(ctx, types.NamespacedName{Namespace: "ns", Name: "nightly"}, s); err != nil || s.Status.Phase != etcdv1.SnapshotComplete {
		t.Errorf("status %+v: %v", s.Status, err)
	}
}
