package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

func setStorageSize(t *testing.T, ns, name, size string) {
	t.Helper()
	c := getCluster(t, ns, name)
	patch := client.MergeFrom(c.DeepCopy())
	q := resource.MustParse(size)
	c.Spec.Storage.Size = &q
	if err := k8s.Patch(context.Background(), c, patch); err != nil {
		t.Fatal(err)
	}
}

// volumesResized waits for the VolumesResized condition with that reason and message part.
func volumesResized(t *testing.T, ns, name, reason, part string, timeout time.Duration) {
	t.Helper()
	eventually(t, timeout, fmt.Sprintf("VolumesResized %s saying %q", reason, part), func() error {
		cond := meta.FindStatusCondition(getCluster(t, ns, name).Status.Conditions, etcdv1.ConditionVolumesResized)
		if cond == nil || cond.Reason != reason || !strings.Contains(cond.Message, part) {
			return fmt.Errorf("condition %+v", cond)
		}
		return nil
	})
}

// pvcSizes is "request/capacity" of each member's PVC.
func pvcSizes(t *testing.T, ns string, c *etcdv1.EtcdCluster) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, m := range c.Status.Members {
		pvc := getPVC(t, ns, m.Name)
		req, capacity := pvc.Spec.Resources.Requests[corev1.ResourceStorage], pvc.Status.Capacity[corev1.ResourceStorage]
		out[m.Name] = req.String() + "/" + capacity.String()
	}
	return out
}

// podUIDs maps the named members to their Pods' UIDs: a Pod that was restarted has another.
func podUIDs(t *testing.T, ns string, names []string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, name := range names {
		pod := &corev1.Pod{}
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, pod); err != nil {
			t.Fatal(err)
		}
		out[name] = string(pod.UID)
	}
	return out
}

// statusNames are the members' names in the cluster's status.
func statusNames(c *etcdv1.EtcdCluster) []string {
	var out []string
	for _, m := range c.Status.Members {
		out = append(out, m.Name)
	}
	return out
}

// A larger spec.storage.size on a running cluster of 3 grows every PVC (request, and the
// capacity the local cluster's provisioner records as a resizing driver would) with no
// member restarted, the same member IDs, and no acknowledged write lost.
func TestStorageGrowsOnARunningCluster(t *testing.T) {
	t.Parallel()
	ns, before, w := loadedCluster(t, "grow", 3)
	pods := podUIDs(t, ns, statusNames(before))
	setStorageSize(t, ns, "grow", "2Gi")
	volumesResized(t, ns, "grow", "AsRequested", "every member's PVC holds 2Gi", 3*time.Minute)
	for name, sizes := range pvcSizes(t, ns, before) {
		if sizes != "2Gi/2Gi" {
			t.Errorf("PVC %s request/capacity %s, want 2Gi/2Gi", name, sizes)
		}
	}
	after := waitSettled(t, ns, "grow", 3, 2*time.Minute)
	if b, a := fmt.Sprint(sorted(memberIDs(before))), fmt.Sprint(sorted(memberIDs(after))); a != b {
		t.Fatalf("member IDs changed:\n before %s\n after  %s", b, a)
	}
	if b, a := fmt.Sprint(sorted(pods)), fmt.Sprint(sorted(podUIDs(t, ns, statusNames(after)))); a != b {
		t.Errorf("members were restarted to grow their volumes:\n before %s\n after  %s", b, a)
	}
	w.stopAndVerify(t, 5)
}

// On a StorageClass without volume expansion, a larger size touches no PVC and the condition
// says why and what to do; once the class allows expansion, the PVC grows.
func TestStorageGrowthWaitsForTheStorageClass(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	className := "fixed-" + ns
	class := fixedStorageClass(t, className)
	c := &etcdv1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "fixed", Namespace: ns},
		Spec: etcdv1.EtcdClusterSpec{Replicas: ptr(int32(1)), Version: etcdVersion,
			Storage: etcdv1.StorageSpec{Size: ptr(resource.MustParse("1Gi")), StorageClassName: &className}},
	}
	create(t, c)
	before := waitSettled(t, ns, "fixed", 1, 4*time.Minute)
	setStorageSize(t, ns, "fixed", "2Gi")
	volumesResized(t, ns, "fixed", "ExpansionNotAllowed", "StorageClass "+className+" does not allow volume expansion", 3*time.Minute)
	if sizes := pvcSizes(t, ns, before); sizes["fixed-1"] != "1Gi/1Gi" {
		t.Fatalf("the PVC changed on a class without expansion: %v", sizes)
	}

	class.AllowVolumeExpansion = ptr(true)
	if err := k8s.Update(context.Background(), class); err != nil {
		t.Fatal(err)
	}
	volumesResized(t, ns, "fixed", "AsRequested", "holds 2Gi", 3*time.Minute)
	if sizes := pvcSizes(t, ns, before); sizes["fixed-1"] != "2Gi/2Gi" {
		t.Fatalf("PVC after the class allows expansion: %v", sizes)
	}
}

// fixedStorageClass is a copy of the default class that does not allow volume expansion.
func fixedStorageClass(t *testing.T, name string) *storagev1.StorageClass {
	t.Helper()
	classes := &storagev1.StorageClassList{}
	if err := k8s.List(context.Background(), classes); err != nil {
		t.Fatal(err)
	}
	for _, def := range classes.Items {
		if def.Annotations["storageclass.kubernetes.io/is-default-class"] != "true" {
			continue
		}
		class := &storagev1.StorageClass{
			ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: def.Provisioner, Parameters: def.Parameters,
			ReclaimPolicy: def.ReclaimPolicy, VolumeBindingMode: def.VolumeBindingMode, AllowVolumeExpansion: ptr(false),
		}
		create(t, class)
		t.Cleanup(func() { _ = k8s.Delete(context.Background(), class) })
		return class
	}
	t.Fatal("the cluster has no default StorageClass to copy")
	return nil
}
