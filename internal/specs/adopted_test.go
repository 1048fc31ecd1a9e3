package specs

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

func TestAdoptedMemberKeepsItsDataWhereItWas(t *testing.T) {
	c := cluster()
	m := member(c, "example-x7k2p")
	m.Spec.Adopted = &etcdv1.MemberAdoption{From: etcdv1.AdoptedFromCozystack, PVCName: "data-example-x7k2p", DataDir: "/var/lib/etcd"}
	pod := Pod(c, m, PodOptions{})
	if claim := pod.Spec.Volumes[0].PersistentVolumeClaim.ClaimName; claim != "data-example-x7k2p" {
		t.Errorf("claim %s", claim)
	}
	if !slices.Contains(pod.Spec.Containers[0].Args, "--data-dir=/var/lib/etcd") {
		t.Errorf("args %v", pod.Spec.Containers[0].Args)
	}
	if pvc := PVC(c, m); pvc.Name != "data-example-x7k2p" || pvc.Labels[LabelMember] != "example-x7k2p" {
		t.Errorf("pvc %s %v", pvc.Name, pvc.Labels)
	}
	native := member(c, "example-1")
	if PVCName(native) != "example-1" || MemberDataDir(native) != "/var/lib/etcd/data" {
		t.Errorf("native member: %s %s", PVCName(native), MemberDataDir(native))
	}
}

func TestAdoptionOfReadsThePVCAnnotations(t *testing.T) {
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-a-x", Annotations: map[string]string{
		AnnotationAdoptedFrom: "cozystack-v1alpha2", AnnotationDataDir: "/var/lib/etcd"}}}
	got := AdoptionOf(pvc)
	if got == nil || *got != (etcdv1.MemberAdoption{From: etcdv1.AdoptedFromCozystack, PVCName: "data-a-x", DataDir: "/var/lib/etcd"}) {
		t.Errorf("got %+v", got)
	}
	if AdoptionOf(&corev1.PersistentVolumeClaim{}) != nil {
		t.Error("a PVC of this operator's member is no adoption")
	}
}
