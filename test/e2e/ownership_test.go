package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

// Two namespaces, one bucket and key prefix, one snapshot name: the files share a key. The
// first snapshot gets it (with its owner recorded), the second fails with SnapshotFileExists
// without touching it, and deleting the second (deletionPolicy Delete, as a schedule's
// retention does) leaves the first's file as it was; deleting the first deletes it.
func TestSnapshotsOfOneNameInTwoNamespacesNeverDeleteEachOthersFile(t *testing.T) {
	t.Parallel()
	ns1, bucket := s3Namespace(t)
	ns2 := namespace(t)
	s3Secret(t, ns2, s3SecretName, localS3(t).secretKey)
	for _, ns := range []string{ns1, ns2} {
		createCluster(t, ns, "source", 1)
	}
	for _, ns := range []string{ns1, ns2} {
		waitSettled(t, ns, "source", 1, 4*time.Minute)
	}
	const key = "shared/nightly.db"
	nightly := func(ns string) *etcdv1.EtcdSnapshot {
		return &etcdv1.EtcdSnapshot{ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: ns},
			Spec: etcdv1.EtcdSnapshotSpec{ClusterRef: corev1.LocalObjectReference{Name: "source"},
				Destination: s3Location(t, bucket, "shared/"), DeletionPolicy: etcdv1.SnapshotDelete}}
	}
	create(t, nightly(ns1))
	first := waitSnapshotDone(t, ns1, "nightly", etcdv1.SnapshotComplete)
	before, err := localS3(t).admin.StatObject(context.Background(), bucket, key, minio.StatObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if owner := before.UserMetadata["Owner"]; owner != ns1+"/nightly/"+string(first.UID) {
		t.Fatalf("the file records owner %q (metadata %v), want %s/nightly/%s", owner, before.UserMetadata, ns1, first.UID)
	}

	create(t, nightly(ns2))
	second := waitSnapshotDone(t, ns2, "nightly", etcdv1.SnapshotFailed)
	if ready := meta.FindStatusCondition(second.Status.Conditions, "Ready"); ready == nil || ready.Reason != "SnapshotFileExists" {
		t.Fatalf("the second snapshot of the key: Ready %+v, want SnapshotFileExists", ready)
	}
	unchanged := func(when string) {
		t.Helper()
		after, err := localS3(t).admin.StatObject(context.Background(), bucket, key, minio.StatObjectOptions{})
		if err != nil || after.ETag != before.ETag || after.UserMetadata["Owner"] != before.UserMetadata["Owner"] {
			t.Fatalf("%s: the first snapshot's file changed or went: %v (ETag %s, was %s; owner %q)", when, err, after.ETag, before.ETag, after.UserMetadata["Owner"])
		}
	}
	unchanged("after the second snapshot failed")
	deleteSnapshotAndWait(t, ns2, "nightly")
	unchanged("after the second snapshot was deleted")
	if stored := objects(t, bucket, ""); len(stored) != 1 {
		t.Fatalf("objects in the bucket %v, want only %s", stored, key)
	}

	deleteSnapshotAndWait(t, ns1, "nightly")
	if err := objectDeleted(bucket, key); err != nil {
		t.Fatalf("deleting the owner's snapshot: %v", err)
	}
}

// Another application's PVC that has a member's name is never the member's: the member
// cannot start on it (NameConflict), and when a scale-in removes that member, the PVC stays
// as it was, neither deleted nor given an owner.
func TestAForeignPVCWithAMembersNameSurvivesAScaleIn(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	foreign := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "db-3", Namespace: ns, Labels: map[string]string{"app": "someone-else"}},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Mi")}}}}
	create(t, foreign)
	createCluster(t, ns, "db", 3)
	eventually(t, 4*time.Minute, "member db-3 refused the foreign PVC", func() error {
		m := &etcdv1.EtcdMember{}
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "db-3"}, m); err != nil {
			return err
		}
		if ready := meta.FindStatusCondition(m.Status.Conditions, etcdv1.MemberConditionReady); ready == nil || ready.Reason != "NameConflict" {
			return fmt.Errorf("db-3 Ready %+v", ready)
		}
		return nil
	})
	setReplicas(t, ns, "db", 2)
	waitSettled(t, ns, "db", 2, 5*time.Minute)
	eventually(t, time.Minute, "EtcdMember db-3 gone", func() error {
		err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "db-3"}, &etcdv1.EtcdMember{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (%v)", err)
	})
	have := &corev1.PersistentVolumeClaim{}
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(foreign), have); err != nil {
		t.Fatalf("the foreign PVC db-3 after the scale-in: %v", err)
	}
	if have.UID != foreign.UID || !have.DeletionTimestamp.IsZero() || !equality.Semantic.DeepEqual(have.OwnerReferences, foreign.OwnerReferences) {
		t.Fatalf("the foreign PVC was deleted or taken over: UID %s (was %s), deleting %v, owners %+v", have.UID, foreign.UID, have.DeletionTimestamp, have.OwnerReferences)
	}
}
