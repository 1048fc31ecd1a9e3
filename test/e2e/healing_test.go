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
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

func TestTmpfsMemberIsReplacedWhenItsPodIsLost(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	size := resource.MustParse("64Mi")
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
	if err := k8s.Delete(context.Background(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: victim.Name}}); err != nil {
		t.Fatal(err)
	}
	waitReplaced(t, ns, "mem", before, victim)
	w.stopAndVerify(t, 20)
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
	waitSettled(t, ns, "oops", 3, 3*time.Minute)
	kept := &corev1.PersistentVolumeClaim{}
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(pvc), kept); err != nil || kept.UID != pvc.UID {
		t.Fatalf("the member's PVC was not kept: %v (uid %s, was %s)", err, kept.UID, pvc.UID)
	}
	w.stopAndVerify(t, 20)
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
	w.stopAndVerify(t, 50)
}

func TestDeletingAClusterRemovesEverything(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	createCluster(t, ns, "bye", 3)
	waitSettled(t, ns, "bye", 3, 4*time.Minute)
	deleteAndWaitGone(t, ns, "bye")
}

// deleteAndWaitGone deletes the cluster and waits until nothing labelled as its own is left:
// no stuck finalizer, whatever state its etcd is in.
func deleteAndWaitGone(t *testing.T, ns, name string) {
	t.Helper()
	if err := k8s.Delete(context.Background(), getCluster(t, ns, name)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Minute, "nothing left of the cluster", func() error {
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &etcdv1.EtcdCluster{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("the EtcdCluster is still there (%w)", err)
		}
		for _, list := range []client.ObjectList{&etcdv1.EtcdMemberList{}, &corev1.PodList{}, &corev1.PersistentVolumeClaimList{}, &corev1.ServiceList{}} {
			if err := k8s.List(context.Background(), list, client.InNamespace(ns), client.MatchingLabels{specs.LabelCluster: name}); err != nil {
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
		return nil
	})
}
