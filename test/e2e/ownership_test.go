package e2e

import (
	"context"
	"fmt"
	"strings"
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

// Two namespaces, one bucket and key prefix, one snapshot name. With the prefix, each file's
// key has its namespace and cluster in it: both snapshots complete, each with its own file
// and owner. With an explicit key (a file name), they share it: the first gets it, the second
// fails with SnapshotFileExists without touching it. Deleting the second namespace's
// snapshots (deletionPolicy Delete, as a schedule's retention does) leaves the first's
// files as they were; deleting the first's deletes them.
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
	snapshot := func(ns, name, key string) {
		create(t, &etcdv1.EtcdSnapshot{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: etcdv1.EtcdSnapshotSpec{ClusterRef: corev1.LocalObjectReference{Name: "source"},
				Destination: s3Location(t, bucket, key), DeletionPolicy: etcdv1.SnapshotDelete}})
	}
	const exact = "shared/exact.db"
	owned := map[string]minio.ObjectInfo{} // key: the object as the first namespace's snapshot stored it
	for _, name := range []string{"nightly", "exact"} {
		key := map[string]string{"nightly": "shared/", "exact": exact}[name]
		snapshot(ns1, name, key)
		first := waitSnapshotDone(t, ns1, name, etcdv1.SnapshotComplete)
		stored := strings.TrimPrefix(first.Status.Artifact.URI, "s3://"+bucket+"/")
		info, err := localS3(t).admin.StatObject(context.Background(), bucket, stored, minio.StatObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if owner := info.UserMetadata["Owner"]; owner != ns1+"/"+name+"/"+string(first.UID) {
			t.Fatalf("%s records owner %q (metadata %v), want %s/%s/%s", stored, owner, info.UserMetadata, ns1, name, first.UID)
		}
		owned[stored] = info
	}
	if _, ok := owned[keyOf("shared/", ns1, "source", "nightly")]; !ok {
		t.Fatalf("the prefixed snapshot's key is not under its namespace and cluster: %v", owned)
	}

	snapshot(ns2, "nightly", "shared/")
	waitSnapshotDone(t, ns2, "nightly", etcdv1.SnapshotComplete)
	snapshot(ns2, "exact", exact)
	second := waitSnapshotDone(t, ns2, "exact", etcdv1.SnapshotFailed)
	if ready := meta.FindStatusCondition(second.Status.Conditions, "Ready"); ready == nil || ready.Reason != "SnapshotFileExists" {
		t.Fatalf("the second snapshot of one explicit key: Ready %+v, want SnapshotFileExists; its agents' logs:\n%s", ready, agentLogs(t, ns2, second))
	}
	unchanged := func(when string) {
		t.Helper()
		checkObjectsUnchanged(t, bucket, owned, when)
	}
	unchanged("after the second namespace's snapshots")
	deleteSnapshotAndWait(t, ns2, "exact")
	deleteSnapshotAndWait(t, ns2, "nightly")
	unchanged("after the second namespace's snapshots were deleted")
	if err := objectDeleted(bucket, keyOf("shared/", ns2, "source", "nightly")); err != nil {
		t.Fatalf("the second namespace's own file: %v", err)
	}

	for _, name := range []string{"nightly", "exact"} {
		deleteSnapshotAndWait(t, ns1, name)
	}
	for key := range owned {
		if err := objectDeleted(bucket, key); err != nil {
			t.Fatalf("deleting the owner's snapshot: %v", err)
		}
	}
}

// checkObjectsUnchanged fails unless every object in owned (by key) is still in bucket with the
// same ETag and the same recorded owner.
func checkObjectsUnchanged(t *testing.T, bucket string, owned map[string]minio.ObjectInfo, when string) {
	t.Helper()
	for key, before := range owned {
		after, err := localS3(t).admin.StatObject(context.Background(), bucket, key, minio.StatObjectOptions{})
		if err != nil || after.ETag != before.ETag || after.UserMetadata["Owner"] != before.UserMetadata["Owner"] {
			t.Fatalf("%s: the first namespace's %s changed or went: %v (ETag %s, was %s; owner %q)", when, key, err, after.ETag, before.ETag, after.UserMetadata["Owner"])
		}
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
		return fmt.Errorf("still there (%w)", err)
	})
	have := &corev1.PersistentVolumeClaim{}
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(foreign), have); err != nil {
		t.Fatalf("the foreign PVC db-3 after the scale-in: %v", err)
	}
	if have.UID != foreign.UID || !have.DeletionTimestamp.IsZero() || !equality.Semantic.DeepEqual(have.OwnerReferences, foreign.OwnerReferences) {
		t.Fatalf("the foreign PVC was deleted or taken over: UID %s (was %s), deleting %v, owners %+v", have.UID, foreign.UID, have.DeletionTimestamp, have.OwnerReferences)
	}
}
