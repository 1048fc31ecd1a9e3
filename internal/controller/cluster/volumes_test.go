package cluster

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

// bindPVCs gives every member's PVC a bound 1Gi volume of the class, as Kubernetes would.
func (h *harness) bindPVCs(class string) {
	h.t.Helper()
	for _, m := range h.members() {
		pvc := h.pvc(m.Name)
		pvc.Spec.StorageClassName = &class
		pvc.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}
		pvc.Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}
		if err := h.api.Update(context.Background(), pvc); err != nil {
			h.t.Fatal(err)
		}
	}
}

func (h *harness) memberSizes() string {
	var sizes []string
	for _, m := range h.members() {
		sizes = append(sizes, m.Name+"="+m.Spec.Storage.Size.String())
	}
	return strings.Join(sizes, ",")
}

// A larger spec.storage.size on a class without expansion touches no member and says why;
// once the class allows expansion, every member moves to the new size at once (growing a
// volume restarts nothing) and the condition says the PVCs are expanding.
func TestStorageGrowthWaitsForAnExpandableClass(t *testing.T) {
	h := runningHarness(t)
	h.bindPVCs("standard")
	no := false
	class := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "standard"}, Provisioner: "x", AllowVolumeExpansion: &no}
	if err := h.api.Create(context.Background(), class); err != nil {
		t.Fatal(err)
	}
	h.reconcile()
	if cond := h.condition(etcdv1.ConditionVolumesResized); cond.Status != metav1.ConditionTrue {
		t.Fatalf("at size: %+v", cond)
	}

	size := resource.MustParse("2Gi")
	h.editSpec(func(s *etcdv1.EtcdClusterSpec) { s.Storage.Size = &size })
	h.reconcile()
	if got := h.memberSizes(); got != "db-1=1Gi,db-2=1Gi,db-3=1Gi" {
		t.Fatalf("members moved on a class without expansion: %s", got)
	}
	if cond := h.condition(etcdv1.ConditionVolumesResized); cond.Reason != etcdv1.ReasonExpansionNotAllowed || !strings.Contains(cond.Message, "StorageClass standard does not allow volume expansion") {
		t.Fatalf("refusal: %+v", cond)
	}

	yes := true
	class.AllowVolumeExpansion = &yes
	if err := h.api.Update(context.Background(), class); err != nil {
		t.Fatal(err)
	}
	h.reconcile()
	if got := h.memberSizes(); got != "db-1=2Gi,db-2=2Gi,db-3=2Gi" {
		t.Fatalf("members after the class allows expansion: %s", got)
	}
	if cond := h.condition(etcdv1.ConditionVolumesResized); cond.Reason != etcdv1.ReasonVolumesExpanding {
		t.Fatalf("while expanding: %+v", cond)
	}
}
