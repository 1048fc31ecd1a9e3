package migratecmd

import (
	"context"
	"io"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/aenixfixture"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
	"github.com/quorumkeeper/etcd-operator/internal/plugin/cli"
	"github.com/quorumkeeper/etcd-operator/internal/plugin/migrate"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// adoptAenix against the objects of a settled legacy cluster: this operator's objects are
// created and own what they must, the legacy EtcdCluster, StatefulSet and PodDisruptionBudget
// are gone, its Services the new cluster's, the Pods (their specs untouched) are their EtcdMembers', and a second run after the
// first (the legacy EtcdCluster is gone: finishAenix) changes nothing it already did.
func TestAdoptAenixTakesOverAndRetiresTheLegacyObjects(t *testing.T) {
	ctx := context.Background()
	k, plan, legacy, sts := aenixAPI(t)
	o := &cli.Options{Out: io.Discard, Err: io.Discard}
	if err := adoptAenix(ctx, o, k, plan, legacy); err != nil {
		t.Fatal(err)
	}
	checkAenixAdoption(t, k, plan, legacy, sts)
	if done, err := finishAenix(ctx, o, k, "lg"); !done || err != nil {
		t.Fatalf("second run: done %t, %v", done, err)
	}
	checkAenixAdoption(t, k, plan, legacy, sts)
	// A run long after, when the operator has removed an adopted member (a scale-in).
	if err := k.Client.Delete(ctx, &etcdv1.EtcdMember{ObjectMeta: metav1.ObjectMeta{Name: "lg-2", Namespace: "ns"}}); err != nil {
		t.Fatal(err)
	}
	if done, err := finishAenix(ctx, o, k, "lg"); !done || err != nil {
		t.Fatalf("run after a scale-in: done %t, %v", done, err)
	}
}

// A run cut short right after it deleted the legacy EtcdCluster is finished by running
// the command again: the StatefulSet and the legacy PodDisruptionBudget go, the Services
// become the new cluster's, the Pods the members'.
func TestFinishAenixAfterTheLegacyClusterWasDeleted(t *testing.T) {
	ctx := context.Background()
	k, plan, legacy, sts := aenixAPI(t)
	o := &cli.Options{Out: io.Discard, Err: io.Discard}
	if _, err := createAenixOwn(ctx, o, k, plan); err != nil {
		t.Fatal(err)
	}
	if err := orphanDelete(ctx, k, legacy); err != nil {
		t.Fatal(err)
	}
	if done, err := finishAenix(ctx, o, k, "lg"); !done || err != nil {
		t.Fatalf("finish: done %t, %v", done, err)
	}
	checkAenixAdoption(t, k, plan, legacy, sts)
}

// An adoption begun by an earlier plugin (its annotation names the adopted members only: the
// members this operator adds live under its headless Service <cluster>) is finished as it
// was begun: the legacy client Service <cluster> goes, for this operator's headless Service
// to take its name, and the legacy headless Service is left as it was.
func TestFinishAnEarlierAenixAdoptionDeletesTheLegacyClientService(t *testing.T) {
	ctx := context.Background()
	k, plan, legacy, _ := aenixAPI(t)
	plan.Cluster.Annotations[etcdv1.AnnotationAdoptedSubdomain] = "lg-headless=lg-0,lg-1,lg-2"
	o := &cli.Options{Out: io.Discard, Err: io.Discard}
	if err := adoptAenix(ctx, o, k, plan, legacy); err != nil {
		t.Fatal(err)
	}
	if err := k.Client.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "lg"}, &corev1.Service{}); !apierrors.IsNotFound(err) {
		t.Errorf("the legacy client Service lg is still there: %v", err)
	}
	cluster, headless := &etcdv1.EtcdCluster{}, &corev1.Service{}
	mustGet(t, k, "lg", cluster)
	mustGet(t, k, "lg-headless", headless)
	if !ownedBy(headless, cluster.UID) || metav1.IsControlledBy(headless, cluster) {
		t.Errorf("lg-headless: owners %v, want the new cluster as an owner, not its controller", headless.OwnerReferences)
	}
}

// aenixAPI is a fake API with a settled legacy cluster, and the plan to adopt it.
func aenixAPI(t *testing.T) (*cli.Kube, migrate.AenixPlan, *unstructured.Unstructured, *appsv1.StatefulSet) {
	t.Helper()
	scheme, err := cli.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	gvk := schema.FromAPIVersionAndKind(aenixfixture.APIVersion, aenixfixture.Kind)
	scheme.AddKnownTypeWithName(gvk, &unstructured.Unstructured{})
	legacy := &unstructured.Unstructured{Object: aenixfixture.Legacy("lg", "ns", 3, "quay.io/coreos/etcd:v3.6.16")}
	legacy.SetUID("legacy-uid")
	owner := []metav1.OwnerReference{{APIVersion: aenixfixture.APIVersion, Kind: aenixfixture.Kind, Name: "lg", UID: "legacy-uid", Controller: ptrTo(true)}}
	sts := aenixfixture.StatefulSet("lg", "ns", 3, "quay.io/coreos/etcd:v3.6.16")
	sts.Status.ReadyReplicas = 3
	cm := aenixfixture.ConfigMap("lg", "ns", 3)
	objs := []client.Object{legacy, sts, cm}
	for _, svc := range aenixfixture.Services("lg", "ns") {
		svc.OwnerReferences = owner
		objs = append(objs, svc)
	}
	// The legacy operator's PodDisruptionBudget is named after the cluster, as this operator's.
	objs = append(objs, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "lg", Namespace: "ns", OwnerReferences: owner}})
	obs := migrate.AenixObserved{Legacy: legacy.Object, StatefulSet: sts, Pods: map[string]*corev1.Pod{}, PVCs: map[string]*corev1.PersistentVolumeClaim{},
		ConfigMaps: map[string]map[string]string{cm.Name: cm.Data}}
	for i := range 3 {
		pod := aenixfixture.Pod(sts, i)
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-" + pod.Name, Namespace: "ns"}}
		obs.Pods[pod.Name], obs.PVCs[pvc.Name] = pod, pvc
		obs.Etcd = append(obs.Etcd, etcd.Member{ID: uint64(0xa0 + i), Name: pod.Name, PeerURLs: []string{"https://x"}})
		objs = append(objs, pod, pvc)
	}
	plan := migrate.PlanAenix(obs)
	if len(plan.Refusals) != 0 {
		t.Fatalf("refusals: %v", plan.Refusals)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithStatusSubresource(&etcdv1.EtcdMember{}).
		WithInterceptorFuncs(interceptor.Funcs{Delete: orphaning}).Build()
	return &cli.Kube{Client: c, Namespace: "ns"}, plan, legacy, sts
}

// orphaning deletes as the API server does with propagationPolicy Orphan: the garbage
// collector first takes the deleted object's owner reference off its dependents (the
// Services here, the kinds whose ownership the adoption changes afterwards), which the fake
// client alone does not.
func orphaning(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
	var del client.DeleteOptions
	del.ApplyOptions(opts)
	if del.PropagationPolicy != nil && *del.PropagationPolicy == metav1.DeletePropagationOrphan {
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		if obj.GetUID() == "" {
			return c.Delete(ctx, obj, opts...) // the fake's own objects have none: no reference names it
		}
		services := &corev1.ServiceList{}
		if err := c.List(ctx, services, client.InNamespace(obj.GetNamespace())); err != nil {
			return err
		}
		for i := range services.Items {
			svc := &services.Items[i]
			refs := slices.DeleteFunc(slices.Clone(svc.OwnerReferences), func(r metav1.OwnerReference) bool { return r.UID == obj.GetUID() })
			if len(refs) != len(svc.OwnerReferences) {
				svc.OwnerReferences = refs
				if err := c.Update(ctx, svc); err != nil {
					return err
				}
			}
		}
	}
	return c.Delete(ctx, obj, opts...)
}

func checkAenixAdoption(t *testing.T, k *cli.Kube, plan migrate.AenixPlan, legacy *unstructured.Unstructured, sts *appsv1.StatefulSet) {
	t.Helper()
	ctx, c := context.Background(), k.Client
	obs := plan.Members

	cluster := &etcdv1.EtcdCluster{}
	mustGet(t, k, "lg", cluster)
	if cluster.Annotations[etcdv1.AnnotationAdoptedSubdomain] != "lg-headless=lg-0,lg-1,lg-2,*" || !specs.PeerAutoTLS(cluster) {
		t.Errorf("cluster: annotations %v, tls %+v", cluster.Annotations, cluster.Spec.TLS)
	}
	for i := range 3 {
		checkAdoptedAenixMember(t, k, cluster, aenixfixture.Pod(sts, i).Name, obs[i].MemberID)
	}
	cm := &corev1.ConfigMap{}
	mustGet(t, k, "lg-cluster-state", cm)
	if !ownedBy(cm, cluster.UID) {
		t.Errorf("lg-cluster-state is not owned by the new cluster: %v", cm.GetOwnerReferences())
	}
	// The legacy headless Service (every member's DNS name) and client Service (what the
	// applications use) stay, now controlled by the new cluster, which keeps them.
	for _, name := range []string{"lg-headless", "lg"} {
		svc := &corev1.Service{}
		mustGet(t, k, name, svc)
		if !metav1.IsControlledBy(svc, cluster) || len(svc.OwnerReferences) != 1 {
			t.Errorf("Service %s is not the new cluster's alone: %v", name, svc.OwnerReferences)
		}
	}
	for _, obj := range []client.Object{&appsv1.StatefulSet{}, &policyv1.PodDisruptionBudget{}} {
		if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "lg"}, obj); !apierrors.IsNotFound(err) {
			t.Errorf("%T lg still there: %v", obj, err)
		}
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(legacy), legacy.DeepCopy()); !apierrors.IsNotFound(err) {
		t.Errorf("the legacy EtcdCluster is still there: %v", err)
	}
}

// checkAdoptedAenixMember: the EtcdMember is the cluster's with the etcd ID, the Pod is the
// member's with its spec as the legacy operator built it, the PVC records the adoption.
func checkAdoptedAenixMember(t *testing.T, k *cli.Kube, cluster *etcdv1.EtcdCluster, name, id string) {
	t.Helper()
	m := &etcdv1.EtcdMember{}
	mustGet(t, k, name, m)
	if !metav1.IsControlledBy(m, cluster) || m.Status.MemberID != id || m.Spec.Adopted.From != etcdv1.AdoptedFromAenix {
		t.Errorf("EtcdMember %s: owners %v, ID %s, adopted %+v", name, m.OwnerReferences, m.Status.MemberID, m.Spec.Adopted)
	}
	pod := &corev1.Pod{}
	mustGet(t, k, name, pod)
	if !metav1.IsControlledBy(pod, m) || pod.Labels[etcdv1.LabelMember] != name || pod.Spec.Containers[0].Args[0] != "--name=$(POD_NAME)" {
		t.Errorf("Pod %s: owners %v, labels %v", name, pod.OwnerReferences, pod.Labels)
	}
	pvc := &corev1.PersistentVolumeClaim{}
	mustGet(t, k, "data-"+name, pvc)
	if got := specs.AdoptionOf(pvc); got == nil || *got != *m.Spec.Adopted {
		t.Errorf("PVC data-%s records %+v", name, got)
	}
}

func ownedBy(obj client.Object, uid types.UID) bool {
	for _, ref := range obj.GetOwnerReferences() {
		if ref.UID == uid {
			return true
		}
	}
	return false
}

func ptrTo[T any](v T) *T { return &v }
