package e2e

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

// derivedKinds are made by Kubernetes or cert-manager from the operator's objects (a
// Service's EndpointSlices, a Certificate's CertificateRequests): theirs, not the operator's.
// The Pods of its Jobs and the Secrets of its Certificates are made from its templates and
// count.
var derivedKinds = map[string]bool{"Endpoints": true, "EndpointSlice": true, "Event": true, "CertificateRequest": true, "Order": true, "Challenge": true, "ControllerRevision": true}

// madeByTheOperator: its managed-by label, or the label of a spec.defrag pass or a scheduled
// snapshot.
func madeByTheOperator(l map[string]string) bool {
	return l[etcdv1.LabelManagedBy] == "etcd-operator" || l[etcdv1.LabelDefragSchedule] != "" || l[etcdv1.LabelSnapshotSchedule] != ""
}

// operatorsObjects are every object in ns the operator made, of every namespaced kind the API
// server serves, by kind.
func operatorsObjects(t *testing.T, ns string) map[string][]unstructured.Unstructured {
	t.Helper()
	disc, err := discovery.NewDiscoveryClientForConfig(restConfig)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(restConfig)
	if err != nil {
		t.Fatal(err)
	}
	lists, err := disc.ServerPreferredNamespacedResources()
	if err != nil && len(lists) == 0 {
		t.Fatal(err)
	}
	out := map[string][]unstructured.Unstructured{}
	for _, list := range lists {
		gv, err := schema.ParseGroupVersion(list.GroupVersion)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range list.APIResources {
			if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") || derivedKinds[r.Kind] {
				continue
			}
			items, err := dyn.Resource(gv.WithResource(r.Name)).Namespace(ns).List(context.Background(), metav1.ListOptions{})
			if err != nil {
				t.Fatalf("listing %s: %v", r.Name, err)
			}
			for _, item := range items.Items {
				if madeByTheOperator(item.GetLabels()) {
					out[r.Kind] = append(out[r.Kind], item)
				}
			}
		}
	}
	return out
}

// spec.additionalMetadata reaches every object the operator makes for a cluster: with TLS from
// cert-manager, authentication, a NetworkPolicy, scheduled defragmentation, a snapshot to S3
// (its agent's Job, Pod, ServiceAccount, Role and RoleBinding), the delete Job of a snapshot
// with deletionPolicy Delete, and a snapshot schedule, each kind is found and each object of
// it carries the labels and annotations. The listing covers every kind the API server serves,
// so a kind the operator begins to make without them fails here too. An operator annotation
// in spec.additionalMetadata (replace) reaches no member.
func TestAdditionalMetadataReachesEveryObject(t *testing.T) {
	t.Parallel()
	ns, bucket := s3Namespace(t)
	journeyCA(t, ns)
	const cluster = "tagged"
	createTaggedCluster(t, ns, cluster)
	waitSettled(t, ns, cluster, 3, 5*time.Minute)
	access := watchAgentAccess(t, ns)
	takeSnapshots(t, ns, bucket, cluster)
	found := waitEveryKind(t, ns)
	for kind, objs := range access.finish(t) {
		found[kind] = append(found[kind], objs...)
	}
	checkTagged(t, found)
	if got := statusVoters(getCluster(t, ns, cluster)); !slices.Equal(got, []string{cluster + "-1", cluster + "-2", cluster + "-3"}) {
		t.Errorf("voters %v after the test: a member was replaced", got)
	}
}

func createTaggedCluster(t *testing.T, ns, cluster string) {
	t.Helper()
	create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: cluster + "-root", Namespace: ns}, StringData: map[string]string{"password": "a-long-random-root-password"}})
	issuer := etcdv1.IssuerReference{Name: "etcd-ca"}
	create(t, &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: cluster, Namespace: ns}, Spec: etcdv1.EtcdClusterSpec{
		Replicas: ptr(int32(3)), Version: etcdVersion,
		TLS: &etcdv1.EtcdClusterTLS{
			// As the TLS journey's step 5 (TestSnapshotOfATLSAndAuthCluster takes snapshots of it).
			Client: &etcdv1.ClientTLS{CertManager: &etcdv1.ClientCertManager{ServerIssuerRef: issuer, OperatorClientIssuerRef: &issuer}},
			Peer:   &etcdv1.PeerTLS{CertManager: &etcdv1.PeerCertManager{IssuerRef: issuer}},
		},
		Auth:          &etcdv1.AuthSpec{Enabled: true, RootCredentialsSecretRef: &corev1.LocalObjectReference{Name: cluster + "-root"}},
		NetworkPolicy: &etcdv1.NetworkPolicySpec{Enabled: true},
		Defrag:        &etcdv1.DefragSchedule{Schedule: "* * * * *", Rule: &etcdv1.DefragRule{All: true}},
		AdditionalMetadata: &etcdv1.AdditionalMetadata{
			Labels:      map[string]string{"team": "storage"},
			Annotations: map[string]string{"owner": "team-a", etcdv1.AnnotationReplace: "true"},
		},
	}})
}

// takeSnapshots takes one snapshot, one with deletionPolicy Delete and deletes it (its delete
// Job), and starts a schedule.
func takeSnapshots(t *testing.T, ns, bucket, cluster string) {
	t.Helper()
	createSnapshot(t, ns, "once", cluster, s3Location(t, bucket, "once/"))
	create(t, &etcdv1.EtcdSnapshot{ObjectMeta: metav1.ObjectMeta{Name: "gone", Namespace: ns}, Spec: etcdv1.EtcdSnapshotSpec{
		ClusterRef: corev1.LocalObjectReference{Name: cluster}, Destination: s3Location(t, bucket, "gone/"), DeletionPolicy: etcdv1.SnapshotDelete}})
	create(t, &etcdv1.EtcdSnapshotSchedule{ObjectMeta: metav1.ObjectMeta{Name: "minutely", Namespace: ns}, Spec: etcdv1.EtcdSnapshotScheduleSpec{
		ClusterRef: corev1.LocalObjectReference{Name: cluster}, Schedule: "* * * * *", Destination: s3Location(t, bucket, "scheduled/")}})
	waitSnapshotDone(t, ns, "once", etcdv1.SnapshotComplete)
	waitSnapshotDone(t, ns, "gone", etcdv1.SnapshotComplete)
	if err := k8s.Delete(context.Background(), &etcdv1.EtcdSnapshot{ObjectMeta: metav1.ObjectMeta{Name: "gone", Namespace: ns}}); err != nil {
		t.Fatal(err)
	}
}

// waitEveryKind waits until the operator's objects in ns include every kind it makes for the
// cluster (its agent's access aside: watchAgentAccess) and the delete Job, and returns them.
func waitEveryKind(t *testing.T, ns string) map[string][]unstructured.Unstructured {
	t.Helper()
	want := []string{"Pod", "PersistentVolumeClaim", "Service", "PodDisruptionBudget", "NetworkPolicy", "Certificate", "Secret",
		"EtcdMember", "EtcdDefrag", "EtcdSnapshot", "Job"}
	var found map[string][]unstructured.Unstructured
	eventually(t, 4*time.Minute, "every kind made", func() error {
		found = operatorsObjects(t, ns)
		var missing []string
		for _, kind := range want {
			if len(found[kind]) == 0 {
				missing = append(missing, kind)
			}
		}
		if !slices.ContainsFunc(found["Job"], func(j unstructured.Unstructured) bool { return j.GetLabels()[etcdv1.LabelAction] == "delete" }) {
			missing = append(missing, "the delete Job")
		}
		if len(missing) > 0 {
			return fmt.Errorf("none yet of %v", missing)
		}
		return nil
	})
	return found
}

// checkTagged: every object carries the labels and annotations, and not the operator's
// annotation spec.additionalMetadata names.
func checkTagged(t *testing.T, found map[string][]unstructured.Unstructured) {
	t.Helper()
	var errs []error
	for kind, items := range found {
		for _, obj := range items {
			what := kind + " " + obj.GetName()
			if obj.GetLabels()["team"] != "storage" || obj.GetAnnotations()["owner"] != "team-a" {
				errs = append(errs, fmt.Errorf("%s: labels %v, annotations %v", what, obj.GetLabels(), obj.GetAnnotations()))
			}
			if _, ok := obj.GetAnnotations()[etcdv1.AnnotationReplace]; ok {
				errs = append(errs, fmt.Errorf("%s took %s from spec.additionalMetadata", what, etcdv1.AnnotationReplace))
			}
		}
		t.Logf("%d %s objects", len(items), kind)
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

// agentAccessWatch sees the snapshot agent's ServiceAccount, Role and RoleBinding, which live
// only while their snapshot runs.
type agentAccessWatch struct {
	mu      sync.Mutex
	seen    map[string][]unstructured.Unstructured
	watches []*changeWatch
}

func watchAgentAccess(t *testing.T, ns string) *agentAccessWatch {
	t.Helper()
	aw := &agentAccessWatch{seen: map[string][]unstructured.Unstructured{}}
	for kind, list := range map[string]client.ObjectList{"ServiceAccount": &corev1.ServiceAccountList{}, "Role": &rbacv1.RoleList{}, "RoleBinding": &rbacv1.RoleBindingList{}} {
		aw.watches = append(aw.watches, watchChanges(t, list, []client.ListOption{client.InNamespace(ns), client.MatchingLabels{etcdv1.LabelManagedBy: "etcd-operator"}},
			func(client.ObjectList) error { return nil },
			func(obj client.Object, deleted bool, _ time.Time) {
				u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
				if deleted || err != nil {
					return
				}
				aw.mu.Lock()
				aw.seen[kind] = append(aw.seen[kind], unstructured.Unstructured{Object: u})
				aw.mu.Unlock()
			}))
	}
	return aw
}

// finish stops the watches and returns what they saw; each kind must have been seen.
func (aw *agentAccessWatch) finish(t *testing.T) map[string][]unstructured.Unstructured {
	t.Helper()
	for _, w := range aw.watches {
		w.finish(t)
	}
	aw.mu.Lock()
	defer aw.mu.Unlock()
	for _, kind := range []string{"ServiceAccount", "Role", "RoleBinding"} {
		if len(aw.seen[kind]) == 0 {
			t.Errorf("no %s of the snapshot agent was seen", kind)
		}
	}
	return aw.seen
}
