package member

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// memberBed is a member reconciler over a fake API holding cluster db and its member db-1.
func memberBed(t *testing.T, funcs interceptor.Funcs, objs ...client.Object) (*Reconciler, client.Client) {
	t.Helper()
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = etcdv1.AddToScheme(scheme)
	size := resource.MustParse("1Gi")
	c := &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns", UID: "cluster-uid"},
		Spec: etcdv1.EtcdClusterSpec{Version: "3.6.16", Storage: etcdv1.StorageSpec{Size: &size}}}
	m := &etcdv1.EtcdMember{ObjectMeta: metav1.ObjectMeta{Name: "db-1", Namespace: "ns", UID: "member-uid", Labels: specs.MemberLabels("db", "db-1")},
		Spec: etcdv1.EtcdMemberSpec{ClusterName: "db", Version: "3.6.16", Storage: c.Spec.Storage,
			Bootstrap: etcdv1.MemberBootstrap{InitialCluster: "db-1=http://x:2380", InitialClusterState: etcdv1.InitialClusterStateNew}}}
	api := fake.NewClientBuilder().WithScheme(scheme).WithObjects(append([]client.Object{c, m}, objs...)...).
		WithInterceptorFuncs(funcs).WithStatusSubresource(&etcdv1.EtcdCluster{}, &etcdv1.EtcdMember{}).Build()
	return &Reconciler{Client: api}, api
}

func reconcileMember(t *testing.T, r *Reconciler, api client.Client) (*etcdv1.EtcdMember, bool) {
	t.Helper()
	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "db-1"}}); err != nil {
		t.Fatal(err)
	}
	m := &etcdv1.EtcdMember{}
	if err := api.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "db-1"}, m); err != nil {
		t.Fatal(err)
	}
	err := api.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "db-1"}, &corev1.Pod{})
	return m, err == nil
}

func expectReady(t *testing.T, m *etcdv1.EtcdMember, reason string, words ...string) {
	t.Helper()
	cond := meta.FindStatusCondition(m.Status.Conditions, etcdv1.MemberConditionReady)
	if cond == nil || cond.Reason != reason {
		t.Fatalf("Ready = %+v, want reason %s", cond, reason)
	}
	for _, w := range words {
		if !strings.Contains(cond.Message, w) {
			t.Fatalf("Ready message %q lacks %q", cond.Message, w)
		}
	}
}

func TestMemberDoesNotTakeSomeoneElsesPVC(t *testing.T) {
	isController := true
	foreign := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "db-1", Namespace: "ns",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "postgres", UID: "pg", Controller: &isController}}}}
	r, api := memberBed(t, interceptor.Funcs{}, foreign)
	m, podCreated := reconcileMember(t, r, api)
	expectReady(t, m, etcdv1.ReasonNameConflict, "PersistentVolumeClaim db-1", "StatefulSet postgres")
	if podCreated {
		t.Fatal("a Pod was created on someone else's PVC")
	}
	pvc := &corev1.PersistentVolumeClaim{}
	if err := api.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "db-1"}, pvc); err != nil {
		t.Fatal(err)
	}
	if ref := metav1.GetControllerOf(pvc); ref == nil || ref.Name != "postgres" {
		t.Fatalf("the foreign PVC's controller became %+v", ref)
	}
}

// A PVC kept when an EtcdCluster of this name was deleted (no owner, the cluster's and the
// member's labels) is taken back with its data.
func TestMemberAdoptsARetainedPVC(t *testing.T) {
	retained := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "db-1", Namespace: "ns", Labels: specs.MemberLabels("db", "db-1"),
		Annotations: map[string]string{etcdv1.AnnotationMemberID: "1234", etcdv1.AnnotationClusterID: "abcd"}}}
	r, api := memberBed(t, interceptor.Funcs{}, retained)
	_, podCreated := reconcileMember(t, r, api)
	pvc := &corev1.PersistentVolumeClaim{}
	if err := api.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "db-1"}, pvc); err != nil {
		t.Fatal(err)
	}
	if len(pvc.OwnerReferences) != 0 || pvc.Labels[etcdv1.LabelMember] != "db-1" {
		t.Fatalf("retained PVC owners %+v labels %v, want it kept as it was (whenDeleted Retain)", pvc.OwnerReferences, pvc.Labels)
	}
	if !podCreated {
		t.Fatal("no Pod on the adopted PVC")
	}
}

func TestMemberPodTheAPIServerRefusesIsReported(t *testing.T) {
	r, api := memberBed(t, interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
		if pod, ok := obj.(*corev1.Pod); ok {
			return apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, pod.Name, nil)
		}
		return c.Create(ctx, obj, opts...)
	}})
	m, _ := reconcileMember(t, r, api)
	expectReady(t, m, etcdv1.ReasonObjectRefused, "the API server refused Pod db-1")
}
