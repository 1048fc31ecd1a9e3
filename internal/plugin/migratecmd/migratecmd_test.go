package migratecmd

import (
	"context"
	"reflect"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/plugin/cli"
	"github.com/quorumkeeper/etcd-operator/internal/plugin/migrate"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// adoptionFixture is one member of Cozystack's operator, not adopted yet, and its change.
func adoptionFixture(t *testing.T) (*cli.Kube, migrate.MemberChange) {
	t.Helper()
	scheme, err := cli.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	member := &etcdv1.EtcdMember{
		ObjectMeta: metav1.ObjectMeta{Name: "cz-x7k2p", Namespace: "ns", Finalizers: []string{migrate.CozystackFinalizer}},
		Spec:       etcdv1.EtcdMemberSpec{ClusterName: "cz", Version: "3.6.16"},
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "cz-x7k2p", Namespace: "ns"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "etcd", Image: "etcd", Command: []string{"etcd", "--name=cz-x7k2p"}}}}}
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-cz-x7k2p", Namespace: "ns"}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(member, pod, pvc).WithStatusSubresource(&etcdv1.EtcdMember{}).Build()
	change := migrate.MemberChange{
		Member: "cz-x7k2p", MemberID: "b1", Pod: "cz-x7k2p", PVC: "data-cz-x7k2p",
		Spec: etcdv1.EtcdMemberSpec{ClusterName: "cz", Version: "3.6.16",
			Bootstrap: etcdv1.MemberBootstrap{InitialCluster: "cz-x7k2p=http://cz-x7k2p.cz.ns.svc:2380",
				InitialClusterState: etcdv1.InitialClusterStateExisting, ClusterToken: "cz-token"},
			Adopted: &etcdv1.MemberAdoption{From: etcdv1.AdoptedFromCozystack, PVCName: "data-cz-x7k2p", DataDir: "/var/lib/etcd"}},
	}
	return &cli.Kube{Client: c, Namespace: "ns"}, change
}

// A run cut short after the PVC was labelled is finished by running again, and a run after
// the adoption changes nothing; the Pod's spec is never touched.
func TestAdoptMemberFinishesAnInterruptedRunAndIsIdempotent(t *testing.T) {
	ctx := context.Background()
	k, change := adoptionFixture(t)
	podBefore := &corev1.Pod{}
	mustGet(t, k, change.Pod, podBefore)
	// The first run stopped right after labelling the PVC.
	if err := patchMeta(ctx, k, change.PVC, &corev1.PersistentVolumeClaim{}, specs.MemberLabels("cz", change.Member), nil); err != nil {
		t.Fatal(err)
	}
	if err := adoptMember(ctx, k, change); err != nil {
		t.Fatal(err)
	}
	m := &etcdv1.EtcdMember{}
	mustGet(t, k, change.Member, m)
	if m.AdoptionPending() || !reflect.DeepEqual(m.Spec, change.Spec) || m.Status.MemberID != "b1" ||
		slices.Contains(m.Finalizers, migrate.CozystackFinalizer) || m.Labels[etcdv1.LabelMember] != change.Member {
		t.Fatalf("member after adoption: %+v", m)
	}
	pvc := &corev1.PersistentVolumeClaim{}
	mustGet(t, k, change.PVC, pvc)
	if got := specs.AdoptionOf(pvc); got == nil || *got != *change.Spec.Adopted || pvc.Labels[etcdv1.LabelMember] != change.Member {
		t.Fatalf("PVC after adoption: %v %v", pvc.Labels, pvc.Annotations)
	}
	pod := &corev1.Pod{}
	mustGet(t, k, change.Pod, pod)
	if !reflect.DeepEqual(pod.Spec, podBefore.Spec) || pod.Labels[etcdv1.LabelMember] != change.Member {
		t.Fatalf("Pod after adoption: labels %v, spec changed %t", pod.Labels, !reflect.DeepEqual(pod.Spec, podBefore.Spec))
	}

	// Run again: the member is adopted, nothing about it changes.
	if err := adoptMember(ctx, k, change); err != nil {
		t.Fatal(err)
	}
	again := &etcdv1.EtcdMember{}
	mustGet(t, k, change.Member, again)
	if again.ResourceVersion != m.ResourceVersion {
		t.Fatalf("a second run rewrote the adopted member: resourceVersion %s -> %s", m.ResourceVersion, again.ResourceVersion)
	}
}

// mustGet reads the object named name in the fixture's namespace, or fails the test.
func mustGet(t *testing.T, k *cli.Kube, name string, obj client.Object) {
	t.Helper()
	if err := k.Client.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: name}, obj); err != nil {
		t.Fatal(err)
	}
}

// The operators a migration takes over from are found by their image in every namespace; a
// Deployment scaled to 0 with no Pod left does not count, one still scaling down does.
func TestRunningOperatorsAreFoundByImage(t *testing.T) {
	scheme, err := cli.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	deployment := func(ns, name, image string, replicas, running int32) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: appsv1.DeploymentSpec{Replicas: &replicas, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "proxy", Image: "ghcr.io/kube-rbac-proxy/kube-rbac-proxy:v0.22.0"}, {Name: "manager", Image: image}}}}},
			Status: appsv1.DeploymentStatus{Replicas: running}}
	}
	k := &cli.Kube{Client: fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		deployment("cozy-etcd-operator", "etcd-operator", "ghcr.io/cozystack/cozystack/etcd-operator:v0.30.0", 1, 1),
		deployment("stopped", "etcd-operator", "ghcr.io/cozystack/etcd-operator:v0.4.0", 0, 0),
		deployment("stopping", "etcd-operator", "ghcr.io/cozystack/etcd-operator:v0.4.0", 0, 1),
		deployment("etcd-operator-system", "controller-manager", "ghcr.io/aenix-io/etcd-operator:v0.4.2", 1, 1),
		deployment("ours", "etcd-operator", "ghcr.io/quorumkeeper/etcd-operator:v1.0.0", 1, 1),
	).Build(), Namespace: "ns"}
	for image, want := range map[string][]string{
		cozystackOperatorImage: {"cozy-etcd-operator/etcd-operator", "stopping/etcd-operator"},
		legacyOperatorImage:    {"etcd-operator-system/controller-manager"},
	} {
		got := runningOperators(context.Background(), k, image)
		slices.Sort(got.Running)
		if !slices.Equal(got.Running, want) || got.Unknown != "" {
			t.Errorf("operators running %s: %+v, want %v", image, got, want)
		}
	}
}
