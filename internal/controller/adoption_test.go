package controller

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

func TestWaitForAdoptionNamesPendingMembers(t *testing.T) {
	c := &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "cz", Namespace: "ns"}}
	ours := &etcdv1.EtcdMember{ObjectMeta: metav1.ObjectMeta{Name: "cz-1"}, Spec: etcdv1.EtcdMemberSpec{
		Bootstrap: etcdv1.MemberBootstrap{InitialClusterState: etcdv1.InitialClusterStateExisting}}}
	theirs := &etcdv1.EtcdMember{ObjectMeta: metav1.ObjectMeta{Name: "cz-x7k2p"}}
	if err := waitForAdoption(c, &clusterView{members: []*etcdv1.EtcdMember{ours}}); err != nil {
		t.Errorf("adopted members only: %v", err)
	}
	err := waitForAdoption(c, &clusterView{members: []*etcdv1.EtcdMember{ours, theirs}})
	var w errWaiting
	if !errors.As(err, &w) || w.reason != ReasonAdoptionPending || !strings.Contains(w.message, "members cz-x7k2p were created by another operator") ||
		!strings.Contains(w.message, "kubectl etcd migrate cozystack cz -n ns") {
		t.Errorf("got %v", err)
	}
}

func TestAdoptedPodIsCurrentUntilStamped(t *testing.T) {
	adopted := &etcdv1.EtcdMember{Spec: etcdv1.EtcdMemberSpec{Adopted: &etcdv1.MemberAdoption{From: etcdv1.AdoptedFromCozystack}}}
	native := &etcdv1.EtcdMember{}
	bare := &corev1.Pod{}
	stamped := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{specs.AnnotationPodTemplateHash: "x"}}}
	for _, tc := range []struct {
		m    *etcdv1.EtcdMember
		pod  *corev1.Pod
		want bool
	}{{adopted, bare, true}, {adopted, stamped, false}, {native, bare, false}, {native, stamped, false}} {
		if got := adoptedPodIsCurrent(tc.m, tc.pod); got != tc.want {
			t.Errorf("adopted=%t stamped=%t: got %t", tc.m.Spec.Adopted != nil, tc.pod.Annotations != nil, got)
		}
	}
}

func TestPVCMemberPrefersTheMemberLabel(t *testing.T) {
	adopted := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-cz-x", Labels: map[string]string{specs.LabelMember: "cz-x"}}}
	native := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "cz-1"}}
	if pvcMember(adopted) != "cz-x" || pvcMember(native) != "cz-1" {
		t.Errorf("got %q, %q", pvcMember(adopted), pvcMember(native))
	}
}
