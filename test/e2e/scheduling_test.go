package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
	"github.com/quorumkeeper/etcd-operator/test/robustness"
)

// placement is what a cluster's scheduling fields must make of every member Pod.
type placement struct {
	node, labelKey string
	tolerations    []corev1.Toleration
	class          string
	priority       int32
}

// A cluster's nodeSelector, tolerations and priorityClassName reach every member Pod and
// the scheduler acts on them: the nodeSelector names a label only one node has, so every
// member runs there; the PriorityClass resolves to its value in each Pod. A change of the
// tolerations rolls the members (on the same node, with the same IDs) while a client writes,
// and no acknowledged write is lost.
//
// The nodes are shared with the tests running alongside, so no node is tainted: a NoSchedule
// taint would keep their members off it, and a PreferNoSchedule one would prove nothing about
// the toleration (it never stops a Pod). The toleration is checked as the scheduler gets it,
// in the Pod spec.
func TestSchedulingFieldsReachTheMembers(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	want := placement{labelKey: "scheduling.e2e.quorumkeeper.io/" + ns, class: "e2e-" + ns, priority: 424242}
	want.node = labelOneNode(t, want.labelKey)
	createPriorityClass(t, want.class, want.priority)
	want.tolerations = []corev1.Toleration{
		{Key: want.labelKey, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	replicas := int32(3)
	create(t, &etcdv1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "sched", Namespace: ns},
		Spec: etcdv1.EtcdClusterSpec{Replicas: &replicas, Version: etcdVersion,
			NodeSelector: map[string]string{want.labelKey: "true"}, Tolerations: want.tolerations,
			PriorityClassName: want.class},
	})
	before := waitSettled(t, ns, "sched", 3, 5*time.Minute)
	checkPlacement(t, ns, "sched", want)
	w := startWriter(t, ns, "sched", "sched")
	waitAcknowledged(t, w, 20)

	changed := time.Now()
	want.tolerations = append(want.tolerations,
		corev1.Toleration{Key: want.labelKey + "-2", Operator: corev1.TolerationOpEqual, Value: "etcd", Effect: corev1.TaintEffectNoExecute})
	c := getCluster(t, ns, "sched")
	patch := client.MergeFrom(c.DeepCopy())
	c.Spec.Tolerations = want.tolerations
	if err := k8s.Patch(context.Background(), c, patch); err != nil {
		t.Fatal(err)
	}
	eventually(t, 6*time.Minute, "every member's Pod rolled with the new toleration", func() error {
		return placedAsWanted(ns, "sched", want)
	})
	after := waitSettledAfter(t, ns, "sched", 3, changed, 4*time.Minute)
	if b, a := fmt.Sprint(sorted(memberIDs(before))), fmt.Sprint(sorted(memberIDs(after))); a != b {
		t.Fatalf("member IDs changed across the roll:\n before %s\n after  %s", b, a)
	}
	checkPlacement(t, ns, "sched", want)
	// Three restarts, each of a member a write may be in flight on.
	w.stopAndVerifyAtMost(t, 20, 3*failuresPerDisruption)
}

// A cluster whose members no node takes, for a taint it does not tolerate, starts as soon as
// the toleration is added: each Pending Pod, in which nothing ran, is replaced by one of the
// new spec, although the cluster has not formed (no roll runs during a bootstrap, and a roll
// waits for every member to be up). The nodeSelector names the one tainted node, so the
// toleration is what lets the members on. The taint would keep the members of the tests
// running alongside off that node: not parallel (the parallel tests start after).
func TestATolerationAddedLetsPendingMembersOntoATaintedNode(t *testing.T) {
	ns := namespace(t)
	want := placement{labelKey: "taint.e2e.quorumkeeper.io/" + ns}
	want.node = labelOneNode(t, want.labelKey)
	taintNode(t, want.node, corev1.Taint{Key: want.labelKey, Value: "etcd", Effect: corev1.TaintEffectNoSchedule})
	replicas := int32(3)
	create(t, &etcdv1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "tainted", Namespace: ns},
		Spec: etcdv1.EtcdClusterSpec{Replicas: &replicas, Version: etcdVersion,
			NodeSelector: map[string]string{want.labelKey: "true"}},
	})
	var pending []corev1.Pod
	eventually(t, 2*time.Minute, "3 member Pods unschedulable for the untolerated taint", func() error {
		pods := &corev1.PodList{}
		if err := k8s.List(context.Background(), pods, client.InNamespace(ns), client.MatchingLabels{etcdv1.LabelCluster: "tainted"}); err != nil {
			return err
		}
		for _, p := range pods.Items {
			if cond := podCondition(&p, corev1.PodScheduled); cond == nil || cond.Status != corev1.ConditionFalse || !strings.Contains(cond.Message, "untolerated taint") {
				return fmt.Errorf("Pod %s: PodScheduled %+v", p.Name, cond)
			}
		}
		if len(pods.Items) != 3 {
			return fmt.Errorf("%d member Pods", len(pods.Items))
		}
		pending = pods.Items
		return nil
	})

	want.tolerations = []corev1.Toleration{{Key: want.labelKey, Operator: corev1.TolerationOpEqual, Value: "etcd", Effect: corev1.TaintEffectNoSchedule}}
	c := getCluster(t, ns, "tainted")
	patch := client.MergeFrom(c.DeepCopy())
	c.Spec.Tolerations = want.tolerations
	if err := k8s.Patch(context.Background(), c, patch); err != nil {
		t.Fatal(err)
	}
	waitSettled(t, ns, "tainted", 3, 5*time.Minute)
	checkPlacement(t, ns, "tainted", want)
	for _, p := range pending {
		if !eventAbout(t, ns, "PodReplaced", p.Name) {
			t.Errorf("no PodReplaced event for the Pending Pod %s: %v", p.Name, eventReasons(t, ns))
		}
	}
}

func podCondition(p *corev1.Pod, kind corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == kind {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// taintNode adds the taint to the node and takes it off when the test ends. Read and
// written whole (taints are a list), again on a conflict with another writer of the node.
func taintNode(t *testing.T, node string, taint corev1.Taint) {
	t.Helper()
	edit := func(change func([]corev1.Taint) []corev1.Taint) error {
		n := &corev1.Node{}
		if err := k8s.Get(context.Background(), client.ObjectKey{Name: node}, n); err != nil {
			return err
		}
		n.Spec.Taints = change(n.Spec.Taints)
		return k8s.Update(context.Background(), n)
	}
	without := func(taints []corev1.Taint) []corev1.Taint {
		return slices.DeleteFunc(taints, func(have corev1.Taint) bool { return have.MatchTaint(&taint) })
	}
	eventually(t, time.Minute, "taint on node "+node, func() error {
		return edit(func(taints []corev1.Taint) []corev1.Taint { return append(without(taints), taint) })
	})
	t.Cleanup(func() {
		eventually(t, time.Minute, "taint off node "+node, func() error { return edit(without) })
	})
}

// labelOneNode puts the label key=true on one schedulable node (the first by name) and
// takes it off when the test ends. The key is the test's own, so no other test selects it.
func labelOneNode(t *testing.T, key string) string {
	t.Helper()
	nodes := &corev1.NodeList{}
	if err := k8s.List(context.Background(), nodes); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range nodes.Items {
		if !n.Spec.Unschedulable {
			names = append(names, n.Name)
		}
	}
	if len(names) < 2 {
		t.Fatalf("%d schedulable nodes; the test needs two, so that the nodeSelector has one to leave out", len(names))
	}
	sort.Strings(names)
	node := names[0]
	setNodeLabel(t, node, key, ptr("true"))
	t.Cleanup(func() { setNodeLabel(t, node, key, nil) })
	return node
}

// setNodeLabel sets or (value nil) removes one label of the node by a merge patch, which
// leaves every other label and the node agent's status updates alone.
func setNodeLabel(t *testing.T, node, key string, value *string) {
	t.Helper()
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]*string{key: value}}})
	if err != nil {
		t.Fatal(err)
	}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}
	if err := k8s.Patch(context.Background(), n, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatalf("label %s on node %s: %v", key, node, err)
	}
}

// createPriorityClass makes a cluster-scoped PriorityClass for the test and deletes it at
// the end. It never preempts: the test's Pods must not push out those of other tests.
func createPriorityClass(t *testing.T, name string, value int32) {
	t.Helper()
	never := corev1.PreemptNever
	create(t, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value,
		PreemptionPolicy: &never, Description: "etcd-operator e2e: " + t.Name()})
	t.Cleanup(func() {
		_ = k8s.Delete(context.Background(), &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}})
	})
}

// waitAcknowledged waits until the writer has n acknowledged writes.
func waitAcknowledged(t *testing.T, w *writer, n int) {
	t.Helper()
	eventually(t, 2*time.Minute, fmt.Sprintf("%d acknowledged writes", n), func() error {
		if got := w.acknowledged(); got < n {
			return fmt.Errorf("%d acknowledged, %d failed: %s", got, w.failures(), w.errorsSeen())
		}
		return nil
	})
}

func checkPlacement(t *testing.T, ns, cluster string, want placement) {
	t.Helper()
	if err := placedAsWanted(ns, cluster, want); err != nil {
		t.Fatal(err)
	}
}

// placedAsWanted checks every member Pod of a settled 3-member cluster: on the labelled
// node, with the nodeSelector, every wanted toleration (the apiserver adds its own for
// not-ready and unreachable nodes), the PriorityClass and the priority admission resolved
// from it.
func placedAsWanted(ns, cluster string, want placement) error {
	pods := &corev1.PodList{}
	if err := k8s.List(context.Background(), pods, client.InNamespace(ns), client.MatchingLabels{etcdv1.LabelCluster: cluster}); err != nil {
		return err
	}
	live := 0
	for _, p := range pods.Items {
		if !p.DeletionTimestamp.IsZero() {
			continue
		}
		live++
		if err := podPlacedAsWanted(&p, want); err != nil {
			return fmt.Errorf("Pod %s: %w", p.Name, err)
		}
	}
	if live != 3 {
		return fmt.Errorf("%d live member Pods, want 3", live)
	}
	return nil
}

func podPlacedAsWanted(p *corev1.Pod, want placement) error {
	if p.Spec.NodeName != want.node {
		return fmt.Errorf("on node %q, want %s (the only node labelled %s)", p.Spec.NodeName, want.node, want.labelKey)
	}
	if p.Spec.NodeSelector[want.labelKey] != "true" {
		return fmt.Errorf("nodeSelector %v, want %s=true", p.Spec.NodeSelector, want.labelKey)
	}
	for _, tol := range want.tolerations {
		if !slices.ContainsFunc(p.Spec.Tolerations, func(have corev1.Toleration) bool { return have.MatchToleration(&tol) }) {
			return fmt.Errorf("tolerations %v lack %v", p.Spec.Tolerations, tol)
		}
	}
	if p.Spec.PriorityClassName != want.class {
		return fmt.Errorf("priorityClassName %q, want %q", p.Spec.PriorityClassName, want.class)
	}
	if p.Spec.Priority == nil || *p.Spec.Priority != want.priority {
		return fmt.Errorf("priority %v, want %d (the value of PriorityClass %s)", p.Spec.Priority, want.priority, want.class)
	}
	return nil
}

// A one-member cluster on a PVC can be drained: its PodDisruptionBudget lets the eviction
// through, and the Pod comes back on its PVC under the same member ID with every
// acknowledged write. A one-member cluster on tmpfs cannot: the eviction would wipe the only
// copy of its data, so its PodDisruptionBudget refuses it (docs/install.md says what to do).
func TestOneMemberClusterIsEvictedOnlyWhenItsDataSurvives(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	createCluster(t, ns, "solo", 1)
	one, size := int32(1), resource.MustParse("256Mi") // room for etcd's 61 MiB WAL segment and the database
	create(t, &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "ram", Namespace: ns},
		Spec: etcdv1.EtcdClusterSpec{Replicas: &one, Version: etcdVersion,
			Storage: etcdv1.StorageSpec{Medium: etcdv1.StorageMediumMemory, Size: &size}}})
	before := waitSettled(t, ns, "solo", 1, 3*time.Minute)
	ram := waitSettled(t, ns, "ram", 1, 3*time.Minute)

	waitBudget(t, ns, "ram", 1, 0)
	kept := getPod(t, ns, ram.Status.Members[0].Name)
	if err := robustness.Evict(context.Background(), k8s, kept); !apierrors.IsTooManyRequests(err) {
		t.Fatalf("evicting the only member of a tmpfs cluster: %v; want it refused by the PodDisruptionBudget", err)
	}
	if p := getPod(t, ns, kept.Name); p.UID != kept.UID || !p.DeletionTimestamp.IsZero() {
		t.Fatalf("the refused eviction still took Pod %s", kept.Name)
	}

	w := startWriter(t, ns, "solo", "solo")
	waitAcknowledged(t, w, 20)
	waitBudget(t, ns, "solo", 0, 1)
	victim := getPod(t, ns, before.Status.Members[0].Name)
	evicted := time.Now()
	if err := robustness.Evict(context.Background(), k8s, victim); err != nil {
		t.Fatalf("evicting the only member of a cluster on a PVC: %v; want it let through", err)
	}
	eventually(t, 2*time.Minute, "a new Pod for "+victim.Name, func() error {
		p := &corev1.Pod{}
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(victim), p); err != nil {
			return err
		}
		if p.UID == victim.UID {
			return fmt.Errorf("still the evicted Pod")
		}
		return nil
	})
	after := waitSettledAfter(t, ns, "solo", 1, evicted, 3*time.Minute)
	if got, was := memberIDs(after)[victim.Name], memberIDs(before)[victim.Name]; got != was {
		t.Fatalf("member %s came back as %s, was %s", victim.Name, got, was)
	}
	waitAcknowledged(t, w, w.acknowledged()+20) // serving again
	// Writes fail while the only member is away: availability is what a one-member
	// cluster gives up on a drain. None acknowledged may be lost.
	w.stopAndVerify(t, 40)
}

// waitBudget waits until the cluster's PodDisruptionBudget asks for minAvailable voters and
// the disruption controller has counted its one healthy voter and the disruptions allowed.
func waitBudget(t *testing.T, ns, cluster string, minAvailable, allowed int32) {
	t.Helper()
	eventually(t, 2*time.Minute, fmt.Sprintf("PodDisruptionBudget of %s with minAvailable %d allowing %d disruptions", cluster, minAvailable, allowed), func() error {
		pdb := &policyv1.PodDisruptionBudget{}
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: specs.PDBName(cluster)}, pdb); err != nil {
			return err
		}
		s := pdb.Status
		if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != int(minAvailable) {
			return fmt.Errorf("minAvailable %v", pdb.Spec.MinAvailable)
		}
		if s.ObservedGeneration != pdb.Generation || s.CurrentHealthy != 1 || s.DisruptionsAllowed != allowed {
			return fmt.Errorf("status %+v of generation %d", s, pdb.Generation)
		}
		return nil
	})
}

func getPod(t *testing.T, ns, name string) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, p); err != nil {
		t.Fatal(err)
	}
	return p
}
