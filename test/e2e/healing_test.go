package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

func TestTmpfsMemberIsReplacedWhenItsPodIsLost(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	// etcd preallocates a 61 MiB WAL segment: 64Mi of tmpfs left the database a few MiB and
	// now and then none ("no space left on device" at its first commit).
	size := resource.MustParse("256Mi")
	replicas := int32(3)
	c := &etcdv1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "mem", Namespace: ns},
		Spec: etcdv1.EtcdClusterSpec{Replicas: &replicas, Version: etcdVersion,
			Storage: etcdv1.StorageSpec{Medium: etcdv1.StorageMediumMemory, Size: &size}},
	}
	if err := k8s.Create(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	before := waitSettled(t, ns, "mem", 3, 4*time.Minute)
	w := startWriter(t, ns, "mem", "mem")
	victim := before.Status.Members[0]
	lost := time.Now()
	if err := k8s.Delete(context.Background(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: victim.Name}}); err != nil {
		t.Fatal(err)
	}
	waitReplaced(t, ns, "mem", before, victim)
	waitSettledAfter(t, ns, "mem", 3, lost, 2*time.Minute)
	w.stopAndVerifyAtMost(t, 20, failuresPerDisruption)
}

func TestMemberDeletedByHandKeepsItsDataAndID(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	createCluster(t, ns, "oops", 3)
	before := waitSettled(t, ns, "oops", 3, 4*time.Minute)
	w := startWriter(t, ns, "oops", "oops")
	victim := before.Status.Members[2]
	pvc := &corev1.PersistentVolumeClaim{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: victim.Name}, pvc); err != nil {
		t.Fatal(err)
	}
	m := &etcdv1.EtcdMember{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: victim.Name}, m); err != nil {
		t.Fatal(err)
	}
	oldUID := m.UID
	deleted := time.Now()
	if err := k8s.Delete(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Minute, "the EtcdMember recreated with its member ID", func() error {
		again := &etcdv1.EtcdMember{}
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: victim.Name}, again); err != nil {
			return err
		}
		if again.UID == oldUID {
			return fmt.Errorf("still the deleted EtcdMember")
		}
		if again.Status.MemberID != victim.ID {
			return fmt.Errorf("recreated as member %q, was %q", again.Status.MemberID, victim.ID)
		}
		return nil
	})
	waitSettledAfter(t, ns, "oops", 3, deleted, 3*time.Minute)
	kept := &corev1.PersistentVolumeClaim{}
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(pvc), kept); err != nil || kept.UID != pvc.UID {
		t.Fatalf("the member's PVC was not kept: %v (uid %s, was %s)", err, kept.UID, pvc.UID)
	}
	w.stopAndVerifyAtMost(t, 20, failuresPerDisruption) // its Pod stopped with it
}

func TestSpecChangeMidScaleConverges(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	createCluster(t, ns, "turn", 3)
	waitSettled(t, ns, "turn", 3, 4*time.Minute)
	w := startWriter(t, ns, "turn", "turn")
	setReplicas(t, ns, "turn", 7)
	eventually(t, 3*time.Minute, "halfway to 7", func() error {
		if n := len(getCluster(t, ns, "turn").Status.Members); n < 5 {
			return fmt.Errorf("%d members", n)
		}
		return nil
	})
	setReplicas(t, ns, "turn", 1)
	waitSettled(t, ns, "turn", 1, 8*time.Minute)
	// Growing fails no write; each removal on the way down (at most six) may.
	w.stopAndVerifyAtMost(t, 50, 6*failuresPerDisruption)
}

// deleteAndWaitGone deletes the cluster and waits until nothing labelled as its own is left:
// no stuck finalizer, whatever state its etcd is in. PVCs are gone too, or, when the cluster
// retains them (whenDeleted Retain, the default), left without any owner.
func deleteAndWaitGone(t *testing.T, ns, name string, opts ...client.DeleteOption) {
	t.Helper()
	c := getCluster(t, ns, name)
	p := c.Spec.PersistentVolumeClaimRetentionPolicy
	retain := c.Spec.Storage.Medium != etcdv1.StorageMediumMemory && (p == nil || p.WhenDeleted != etcdv1.PVCDelete)
	if err := k8s.Delete(context.Background(), c, opts...); err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Minute, "nothing left of the cluster", func() error {
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &etcdv1.EtcdCluster{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("the EtcdCluster is still there (%w)", err)
		}
		gone := []client.ObjectList{&etcdv1.EtcdMemberList{}, &corev1.PodList{}, &corev1.ServiceList{}}
		if !retain {
			gone = append(gone, &corev1.PersistentVolumeClaimList{})
		}
		for _, list := range gone {
			if err := k8s.List(context.Background(), list, client.InNamespace(ns), client.MatchingLabels{etcdv1.LabelCluster: name}); err != nil {
				return err
			}
			items, err := meta.ExtractList(list)
			if err != nil {
				return err
			}
			if len(items) > 0 {
				return fmt.Errorf("%d %T left", len(items), list)
			}
		}
		if retain {
			_, err := keptPVCs(ns, name)
			return err
		}
		return nil
	})
}

// keptPVCs are the cluster's PVCs, each without an owner that garbage collection would
// delete it with.
func keptPVCs(ns, name string) ([]corev1.PersistentVolumeClaim, error) {
	pvcs := &corev1.PersistentVolumeClaimList{}
	if err := k8s.List(context.Background(), pvcs, client.InNamespace(ns), client.MatchingLabels{etcdv1.LabelCluster: name}); err != nil {
		return nil, err
	}
	for _, pvc := range pvcs.Items {
		if !pvc.DeletionTimestamp.IsZero() {
			return nil, fmt.Errorf("PVC %s is being deleted", pvc.Name)
		}
		if len(pvc.OwnerReferences) > 0 {
			return nil, fmt.Errorf("PVC %s still has owners %v", pvc.Name, pvc.OwnerReferences)
		}
	}
	return pvcs.Items, nil
}
