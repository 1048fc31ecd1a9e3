package snapshot

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

func TestSnapshotFlagsMakeOneDestination(t *testing.T) {
	s3 := &snapshotFlags{name: "nightly", s3Endpoint: "https://s3.example.com", s3Bucket: "b", s3Key: "db", s3Credentials: "creds", s3ServiceAccount: "etcd-backup", s3PathStyle: true}
	snap, err := s3.object("ns", "db")
	if err != nil {
		t.Fatal(err)
	}
	want := &etcdv1.S3SnapshotLocation{Endpoint: "https://s3.example.com", Bucket: "b", Key: "db", ForcePathStyle: true,
		CredentialsSecretRef: corev1.LocalObjectReference{Name: "creds"}, ServiceAccountName: "etcd-backup"}
	if snap.Name != "nightly" || snap.Namespace != "ns" || snap.Spec.ClusterRef.Name != "db" || snap.Spec.Destination.PVC != nil ||
		!reflect.DeepEqual(snap.Spec.Destination.S3, want) {
		t.Fatalf("S3 snapshot %+v %+v", snap.ObjectMeta, snap.Spec.Destination.S3)
	}
	pvc := &snapshotFlags{pvc: "backups", pvcSubPath: "db/a.db"}
	snap, err = pvc.object("ns", "db")
	if err != nil || snap.Spec.Destination.S3 != nil || snap.Spec.Destination.PVC.ClaimName != "backups" || !strings.HasPrefix(snap.Name, "db-") {
		t.Fatalf("PVC snapshot %+v %v", snap, err)
	}
	for _, f := range []*snapshotFlags{{}, {s3Bucket: "b", pvc: "p"}} {
		if _, err := f.object("ns", "db"); err == nil || !strings.Contains(err.Error(), "exactly one destination") {
			t.Errorf("flags %+v: %v", f, err)
		}
	}
}

// `snapshot CLUSTER PATH` streams to a local file, as `snapshot save CLUSTER PATH`; with a
// destination of the operator's it is refused.
func TestSnapshotPathIsALocalFile(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		flags  snapshotFlags
		local  bool
		refuse bool
	}{
		{[]string{"db"}, snapshotFlags{s3Bucket: "b"}, false, false},
		{[]string{"db", "/tmp/db.snap"}, snapshotFlags{}, true, false},
		{[]string{"db", "/tmp/db.snap"}, snapshotFlags{s3Bucket: "b"}, false, true},
		{[]string{"db", "/tmp/db.snap"}, snapshotFlags{pvc: "p"}, false, true},
	} {
		local, err := tc.flags.localFile(tc.args)
		if local != tc.local || (err != nil) != tc.refuse {
			t.Errorf("args %v, flags %+v: local %t, %v; want local %t, refused %t", tc.args, tc.flags, local, err, tc.local, tc.refuse)
		}
	}
}
