package controller

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

func vol(name, spec, requested, capacity string) volumeFacts {
	f := volumeFacts{member: name, specSize: resource.MustParse(spec)}
	if requested != "" {
		f.hasPVC, f.requested = true, resource.MustParse(requested)
	}
	if capacity != "" {
		f.capacity = resource.MustParse(capacity)
	}
	return f
}

func TestPlanVolumes(t *testing.T) {
	expandable := classFacts{name: "local", found: true, expandable: true}
	fixed := classFacts{name: "fixed", found: true}
	pending := vol("b", "2Gi", "2Gi", "1Gi")
	pending.resizePending = true
	for _, tc := range []struct {
		name       string
		want       string
		class      classFacts
		vols       []volumeFacts
		grow       string // members, comma-separated
		reason     string // "" when no condition
		status     metav1.ConditionStatus
		inMessages []string
	}{
		{"at size", "1Gi", expandable, []volumeFacts{vol("a", "1Gi", "1Gi", "1Gi"), vol("b", "1Gi", "1Gi", "1Gi")}, "", etcdv1.ReasonVolumesAsRequested, metav1.ConditionTrue, []string{"every member's PVC holds 1Gi"}},
		{"the same size written differently", "1024Mi", fixed, []volumeFacts{vol("a", "1Gi", "1Gi", "1Gi")}, "", etcdv1.ReasonVolumesAsRequested, metav1.ConditionTrue, nil},
		{"grown on an expandable class: every member moves", "2Gi", expandable, []volumeFacts{vol("a", "1Gi", "1Gi", "1Gi"), vol("b", "1Gi", "1Gi", "1Gi")}, "a,b", etcdv1.ReasonVolumesExpanding, metav1.ConditionFalse, []string{"to 2Gi", "a (1Gi), b (1Gi)"}},
		{"asked, the volume not grown yet", "2Gi", expandable, []volumeFacts{vol("a", "2Gi", "2Gi", "1Gi"), vol("b", "2Gi", "2Gi", "2Gi")}, "", etcdv1.ReasonVolumesExpanding, metav1.ConditionFalse, []string{"a (1Gi)"}},
		{"grown, waiting for the Pod to grow the filesystem", "2Gi", expandable, []volumeFacts{vol("a", "2Gi", "2Gi", "2Gi"), pending}, "", etcdv1.ReasonFileSystemResizePending, metav1.ConditionFalse, []string{"volumes of b", "delete each member's Pod"}},
		{"a class without expansion: nobody moves", "2Gi", fixed, []volumeFacts{vol("a", "1Gi", "1Gi", "1Gi"), vol("b", "1Gi", "1Gi", "1Gi")}, "", etcdv1.ReasonExpansionNotAllowed, metav1.ConditionFalse, []string{"StorageClass fixed does not allow volume expansion", "keep their 1Gi volumes", "allowVolumeExpansion: true"}},
		{"a class without expansion: a member without a PVC yet still moves", "2Gi", fixed, []volumeFacts{vol("a", "1Gi", "1Gi", "1Gi"), vol("c", "1Gi", "", "")}, "c", etcdv1.ReasonExpansionNotAllowed, metav1.ConditionFalse, nil},
		{"no class on the PVCs", "2Gi", classFacts{}, []volumeFacts{vol("a", "1Gi", "1Gi", "1Gi")}, "", etcdv1.ReasonExpansionNotAllowed, metav1.ConditionFalse, []string{"no StorageClass"}},
		{"the class is gone", "2Gi", classFacts{name: "gone"}, []volumeFacts{vol("a", "1Gi", "1Gi", "1Gi")}, "", etcdv1.ReasonStorageClassNotFound, metav1.ConditionFalse, []string{"StorageClass gone does not exist"}},
		{"a new member's PVC is pending at the new size", "2Gi", fixed, []volumeFacts{vol("a", "2Gi", "2Gi", "2Gi"), vol("d", "2Gi", "2Gi", "")}, "", etcdv1.ReasonVolumesAsRequested, metav1.ConditionTrue, nil},
		{"no PVC yet: no condition", "2Gi", fixed, []volumeFacts{vol("a", "1Gi", "", "")}, "a", "", "", nil},
		{"a smaller spec never shrinks a member", "1Gi", expandable, []volumeFacts{vol("a", "2Gi", "2Gi", "2Gi")}, "", etcdv1.ReasonVolumesAsRequested, metav1.ConditionTrue, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan := planVolumes(resource.MustParse(tc.want), tc.class, tc.vols)
			if got := strings.Join(plan.grow, ","); got != tc.grow {
				t.Errorf("grow = %q, want %q", got, tc.grow)
			}
			if tc.reason == "" {
				if plan.cond != nil {
					t.Fatalf("condition %+v, want none", plan.cond)
				}
				return
			}
			if plan.cond == nil || plan.cond.Reason != tc.reason || plan.cond.Status != tc.status || plan.cond.Type != etcdv1.ConditionVolumesResized {
				t.Fatalf("condition %+v, want %s %s", plan.cond, tc.status, tc.reason)
			}
			for _, part := range tc.inMessages {
				if !strings.Contains(plan.cond.Message, part) {
					t.Errorf("message %q does not say %q", plan.cond.Message, part)
				}
			}
		})
	}
}

// The member controller raises a bound PVC's request to the member's size, never lowers it,
// and leaves an unbound claim alone (the apiserver refuses changes to it).
func TestGrowPVC(t *testing.T) {
	for _, tc := range []struct {
		name, member, request string
		phase                 corev1.PersistentVolumeClaimPhase
		want                  string
	}{
		{"grows a bound claim", "2Gi", "1Gi", corev1.ClaimBound, "2Gi"},
		{"never shrinks", "1Gi", "2Gi", corev1.ClaimBound, "2Gi"},
		{"leaves an unbound claim", "2Gi", "1Gi", corev1.ClaimPending, "1Gi"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			size := resource.MustParse(tc.member)
			m := &etcdv1.EtcdMember{ObjectMeta: metav1.ObjectMeta{Name: "db-1", Namespace: "ns"}, Spec: etcdv1.EtcdMemberSpec{Storage: etcdv1.StorageSpec{Size: &size}}}
			pvc := &corev1.PersistentVolumeClaim{
				ObjectMeta: metav1.ObjectMeta{Name: "db-1", Namespace: "ns"},
				Spec: corev1.PersistentVolumeClaimSpec{Resources: corev1.VolumeResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(tc.request)}}},
				Status: corev1.PersistentVolumeClaimStatus{Phase: tc.phase},
			}
			scheme := runtime.NewScheme()
			_ = clientgoscheme.AddToScheme(scheme)
			_ = etcdv1.AddToScheme(scheme)
			r := &MemberReconciler{Client: fake.NewClientBuilder().WithScheme(scheme).WithObjects(m, pvc).Build()}
			if err := r.growPVC(context.Background(), m, pvc.DeepCopy()); err != nil {
				t.Fatal(err)
			}
			got := &corev1.PersistentVolumeClaim{}
			if err := r.Get(context.Background(), client.ObjectKeyFromObject(pvc), got); err != nil {
				t.Fatal(err)
			}
			if q := got.Spec.Resources.Requests[corev1.ResourceStorage]; q.Cmp(resource.MustParse(tc.want)) != 0 {
				t.Errorf("request %s, want %s", q.String(), tc.want)
			}
		})
	}
}

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
