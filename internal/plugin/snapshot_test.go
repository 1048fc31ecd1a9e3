package plugin

import (
	"strings"
	"testing"
)

func TestSnapshotFlagsMakeOneDestination(t *testing.T) {
	s3 := &snapshotFlags{name: "nightly", s3Endpoint: "https://s3.example.com", s3Bucket: "b", s3Key: "db", s3Credentials: "creds", s3PathStyle: true}
	snap, err := s3.object("ns", "db")
	if err != nil {
		t.Fatal(err)
	}
	d := snap.Spec.Destination
	if snap.Name != "nightly" || snap.Namespace != "ns" || snap.Spec.ClusterRef.Name != "db" || d.PVC != nil || d.S3 == nil ||
		d.S3.Bucket != "b" || d.S3.Endpoint != "https://s3.example.com" || d.S3.CredentialsSecretRef.Name != "creds" || !d.S3.ForcePathStyle {
		t.Fatalf("S3 snapshot %+v %+v", snap.ObjectMeta, d.S3)
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
