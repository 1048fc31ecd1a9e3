package e2e

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/aenixfixture"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

var aenixMembers = []string{"lg-0", "lg-1", "lg-2"}

// TestMigrateFromAenixOperator builds a running cluster as the legacy etcd.aenix.io operator
// leaves it (its EtcdCluster under a CRD of the same group, version and kind, its
// StatefulSet, Services and ConfigMap as its factory builds them, the StatefulSet controller
// making the Pods and PVCs, real etcd members with the legacy flags: peers over
// --peer-auto-tls, data in /var/run/etcd/default.etcd), then runs `kubectl etcd migrate
// aenix` with a writer running through the legacy client Service: refused while the legacy
// operator's Deployment has replicas, a dry run that changes nothing, then --apply. No Pod
// restarts, no member changes its ID, the legacy objects are gone or taken over, the cluster
// scales 3 -> 5 -> 3 under this operator, and no acknowledged write is lost.
func TestMigrateFromAenixOperator(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	bin := buildPlugin(t)
	legacy := buildAenixCluster(t, ns)
	// Clients of a legacy cluster use the Service <cluster>; it stays a client Service of the
	// ready members, which never resolves to a learner while the cluster scales out.
	w := startWriterVia(t, ns, "lg", "lg", access{})
	before := observeAenixBefore(t, ns, serviceMemberIDs(t, ns, "lg"))

	refusedWhileItsOperatorRuns(t, bin, ns, "aenix", "lg", "ghcr.io/aenix-io/etcd-operator:v0.0.2", "the legacy operator")

	out := mustPlugin(t, bin, ns, "migrate", "aenix", "lg")
	for _, want := range []string{"member lg-0 (etcd ID ", "Pod lg-0 keeps running unchanged", "data in /var/lib/etcd/default.etcd on PVC data-lg-0",
		"spec.tls.peer.autoTLS", "StatefulSet lg: deleted with propagationPolicy Orphan", "dry run: nothing was changed"} {
		if !strings.Contains(out, want) {
			t.Errorf("dry run output lacks %q:\n%s", want, out)
		}
	}
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "lg"}, &etcdv1.EtcdCluster{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the dry run created an EtcdCluster (or reading it failed): %v", err)
	}

	c := applyMigration(t, bin, ns, "aenix", "lg")
	checkAenixAdopted(t, ns, c, legacy, before)

	c = scaleOutAndInUnder(t, ns, "lg", w)
	// The adopted members that are left (scale-in takes the newest followers, lg-4 and lg-3,
	// unless one leads) still run their original Pods.
	for name := range memberIDs(c) {
		if uid, ok := before.pods[name]; ok && podUIDs(t, ns, []string{name})[name] != uid {
			t.Errorf("the Pod of adopted member %s was replaced while scaling", name)
		}
	}
}

// buildAenixCluster creates the legacy EtcdCluster and what the legacy operator makes for it,
// each object controlled by the legacy EtcdCluster as that operator sets it, and waits until
// the StatefulSet's three Pods are Ready.
func buildAenixCluster(t *testing.T, ns string) *unstructured.Unstructured {
	t.Helper()
	return buildAenixClusterWith(t, ns, nil)
}

// buildAenixClusterWith is buildAenixCluster with the legacy EtcdCluster and the StatefulSet
// changed by edit first (nil: the defaults), as the legacy operator builds them for a spec
// with more settings (aenixfixture.WithTLS).
func buildAenixClusterWith(t *testing.T, ns string, edit func(legacy map[string]any, sts *appsv1.StatefulSet)) *unstructured.Unstructured {
	t.Helper()
	installAenixCRD(t)
	image := specs.Image(specs.DefaultImageRepository, etcdVersion)
	legacy := &unstructured.Unstructured{Object: aenixfixture.Legacy("lg", ns, 3, image)}
	sts := aenixfixture.StatefulSet("lg", ns, 3, image)
	if edit != nil {
		edit(legacy.Object, sts)
	}
	eventually(t, time.Minute, "the legacy EtcdCluster is created", func() error {
		return client.IgnoreAlreadyExists(k8s.Create(context.Background(), legacy))
	})
	owner := []metav1.OwnerReference{{APIVersion: aenixfixture.APIVersion, Kind: aenixfixture.Kind, Name: "lg", UID: legacy.GetUID(),
		Controller: ptr(true), BlockOwnerDeletion: ptr(true)}}
	cm := aenixfixture.ConfigMap("lg", ns, 3)
	cm.OwnerReferences = owner
	create(t, cm)
	for _, svc := range aenixfixture.Services("lg", ns) {
		svc.OwnerReferences = owner
		create(t, svc)
	}
	sts.OwnerReferences = owner
	create(t, sts)
	eventually(t, 4*time.Minute, "the legacy StatefulSet is ready", func() error {
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(sts), sts); err != nil {
			return err
		}
		if sts.Status.ReadyReplicas != 3 || sts.Status.CurrentRevision != sts.Status.UpdateRevision {
			return fmt.Errorf("ready %d, revision %s -> %s", sts.Status.ReadyReplicas, sts.Status.CurrentRevision, sts.Status.UpdateRevision)
		}
		return nil
	})
	return legacy
}

// installAenixCRD installs the legacy CRD fixture once for all tests of the run.
func installAenixCRD(t *testing.T) {
	t.Helper()
	createCRDFile(t, "testdata/aenix-etcdcluster-crd.yaml")
}

// createCRDFile creates the CRD the file holds, unless it exists already.
func createCRDFile(t *testing.T, file string) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	crd := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &crd.Object); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Create(context.Background(), crd); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
}

// refusedWhileItsOperatorRuns: with a Deployment of the operator the migration takes over
// from (its image, a replica), `kubectl etcd migrate KIND CLUSTER` is refused, changing
// nothing; the Deployment is then deleted. No node can run it: the image is never pulled and
// that operator never runs.
func refusedWhileItsOperatorRuns(t *testing.T, bin, ns, kind, cluster, image, who string) {
	t.Helper()
	labels := map[string]string{"control-plane": "controller-manager"}
	operator := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "etcd-operator-controller-manager", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr(int32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{NodeSelector: map[string]string{"e2e.invalid/no-such-node": "true"},
					Containers: []corev1.Container{{Name: "manager", Image: image}}},
			},
		},
	}
	create(t, operator)
	out, err := runPlugin(bin, ns, "migrate", kind, cluster)
	if err == nil || !strings.Contains(out, who+" is running (Deployment "+ns+"/etcd-operator-controller-manager)") {
		t.Fatalf("migrate %s with %s running: err %v, output:\n%s", kind, who, err, out)
	}
	if err := k8s.Delete(context.Background(), operator); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the Deployment of "+who+" is gone", func() error {
		err := k8s.Get(context.Background(), client.ObjectKeyFromObject(operator), &appsv1.Deployment{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there: %w", err)
	})
}

// serviceMemberIDs is etcd's own member list, by name, through the named Service.
func serviceMemberIDs(t *testing.T, ns, service string) map[string]string {
	t.Helper()
	return serviceMemberIDsWith(t, ns, service, access{})
}

// checkAenixAdopted: the same Pods, never restarted, now controlled by their EtcdMembers;
// the same etcd IDs; the legacy EtcdCluster and StatefulSet gone; the headless Service and
// ConfigMap the Pods depend on kept and owned by the new cluster; the Service lg still a
// client Service, now this operator's.
func checkAenixAdopted(t *testing.T, ns string, c *etcdv1.EtcdCluster, legacy *unstructured.Unstructured, before aenixBefore) {
	t.Helper()
	checkSameMembers(t, ns, c, aenixMembers, before.pods, before.ids)
	for _, name := range aenixMembers {
		checkAenixMember(t, ns, name, before.restarts[name])
	}
	checkLegacyObjectsRetired(t, ns, c, legacy, before.clientIP)
}

// aenixBefore is what the migration must keep of the legacy cluster.
type aenixBefore struct {
	pods     map[string]string // the Pods' UIDs, by name
	restarts map[string]int32  // their containers' restarts, by name
	ids      map[string]string // the members' etcd IDs, by name
	clientIP string            // the legacy client Service lg's cluster IP
}

// observeAenixBefore reads the legacy cluster before the migration; ids are etcd's.
func observeAenixBefore(t *testing.T, ns string, ids map[string]string) aenixBefore {
	t.Helper()
	svc := &corev1.Service{}
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "lg"}, svc); err != nil {
		t.Fatal(err)
	}
	return aenixBefore{pods: podUIDs(t, ns, aenixMembers), restarts: containerRestarts(t, ns, aenixMembers), ids: ids, clientIP: svc.Spec.ClusterIP}
}

// checkAenixMember: the Pod never restarted and is its EtcdMember's, which says where the
// data is.
func checkAenixMember(t *testing.T, ns, name string, restartsBefore int32) {
	t.Helper()
	pod := neverRestarted(t, ns, name, restartsBefore)
	if ref := metav1.GetControllerOf(pod); ref == nil || ref.Kind != "EtcdMember" || ref.Name != name {
		t.Errorf("Pod %s is controlled by %+v, want its EtcdMember", name, ref)
	}
	m := &etcdv1.EtcdMember{}
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, m); err != nil {
		t.Fatal(err)
	}
	if m.Spec.Adopted == nil || m.Spec.Adopted.From != etcdv1.AdoptedFromAenix || m.Spec.Adopted.PVCName != "data-"+name ||
		m.Spec.Adopted.DataDir != "/var/lib/etcd/default.etcd" {
		t.Errorf("EtcdMember %s: spec.adopted %+v", name, m.Spec.Adopted)
	}
}

// checkLegacyObjectsRetired: the legacy EtcdCluster and StatefulSet are gone, the headless
// Service (every member's DNS name) and the ConfigMap the Pods depend on are the new
// cluster's, and the Service lg is this operator's client Service of that name, its cluster
// IP kept.
func checkLegacyObjectsRetired(t *testing.T, ns string, c *etcdv1.EtcdCluster, legacy *unstructured.Unstructured, legacyClientIP string) {
	t.Helper()
	gone := map[client.Object]string{legacy: "legacy EtcdCluster", &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "lg", Namespace: ns}}: "StatefulSet"}
	for obj, what := range gone {
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); !apierrors.IsNotFound(err) {
			t.Errorf("the %s is still there (%v)", what, err)
		}
	}
	for name, obj := range map[string]client.Object{aenixfixture.HeadlessService("lg"): &corev1.Service{}, aenixfixture.ConfigMapName("lg"): &corev1.ConfigMap{}} {
		if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, obj); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if refs := obj.GetOwnerReferences(); len(refs) != 1 || refs[0].UID != c.UID {
			t.Errorf("%s is owned by %+v, want the new EtcdCluster only", name, refs)
		}
	}
	want := specs.AdoptedClientService(c)
	eventually(t, time.Minute, "the Service lg is this operator's client Service", func() error {
		svc := &corev1.Service{}
		if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "lg"}, svc); err != nil {
			return err
		}
		if !metav1.IsControlledBy(svc, c) || svc.Spec.ClusterIP != legacyClientIP || svc.Spec.PublishNotReadyAddresses ||
			!reflect.DeepEqual(svc.Spec.Selector, want.Spec.Selector) {
			return fmt.Errorf("service lg: clusterIP %s (was %s), publishNotReady %t, selector %v, owners %v",
				svc.Spec.ClusterIP, legacyClientIP, svc.Spec.PublishNotReadyAddresses, svc.Spec.Selector, svc.OwnerReferences)
		}
		return nil
	})
}
