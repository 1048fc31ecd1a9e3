package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

// cozystackVoters is the selector Cozystack's docs and PodDisruptionBudget select a
// cluster's voters by, written as they write it.
func cozystackVoters(cluster string) labels.Selector {
	sel, err := labels.Parse(fmt.Sprintf("etcd-operator.cozystack.io/cluster=%s,etcd-operator.cozystack.io/role=voter", cluster))
	if err != nil {
		panic(err)
	}
	return sel
}

// podsSelected are the names of the Pods in ns that sel selects.
func podsSelected(t *testing.T, ns string, sel labels.Selector) []string {
	t.Helper()
	pods := &corev1.PodList{}
	if err := k8s.List(context.Background(), pods, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range pods.Items {
		names = append(names, p.Name)
	}
	slices.Sort(names)
	return names
}

func statusVoters(c *etcdv1.EtcdCluster) []string {
	var names []string
	for _, m := range c.Status.Members {
		if m.Role == etcdv1.RoleVoter {
			names = append(names, m.Name)
		}
	}
	slices.Sort(names)
	return names
}

// checkVotersSelectedAsCozystacks: Cozystack's selector finds exactly the voters, the
// PodDisruptionBudget selects by it, and the disruption controller counts exactly them.
func checkVotersSelectedAsCozystacks(t *testing.T, ns, cluster string, n int) {
	t.Helper()
	eventually(t, 2*time.Minute, "Cozystack's selector finds the voters", func() error {
		c := getCluster(t, ns, cluster)
		voters := statusVoters(c)
		if got := podsSelected(t, ns, cozystackVoters(cluster)); len(voters) != n || !slices.Equal(got, voters) {
			return fmt.Errorf("selected %v, voters %v", got, voters)
		}
		pdb := &policyv1.PodDisruptionBudget{}
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: cluster}, pdb); err != nil {
			return err
		}
		sel := pdb.Spec.Selector
		if sel == nil || len(sel.MatchExpressions) != 0 || sel.MatchLabels[etcdv1.LabelCluster] != cluster || sel.MatchLabels[etcdv1.LabelRole] != "voter" {
			return fmt.Errorf("the PodDisruptionBudget selects by %v, not Cozystack's selector", sel)
		}
		pdbSel, err := metav1.LabelSelectorAsSelector(sel)
		if err != nil {
			return err
		}
		if got := podsSelected(t, ns, pdbSel); !slices.Equal(got, voters) {
			return fmt.Errorf("the PodDisruptionBudget selects %v, voters %v", got, voters)
		}
		if pdb.Status.ObservedGeneration != pdb.Generation || pdb.Status.ExpectedPods != int32(n) || pdb.Spec.MinAvailable.IntValue() != n/2+1 {
			return fmt.Errorf("PodDisruptionBudget status %+v, minAvailable %v", pdb.Status, pdb.Spec.MinAvailable)
		}
		return nil
	})
}

// Cozystack's selector (`etcd-operator.cozystack.io/role=voter` and its cluster label, as its
// docs and its PodDisruptionBudget write it) finds exactly the voters, before and after a
// scale-out whose learners were promoted.
func TestRoleLabelsSelectTheVotersAsCozystacks(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	createCluster(t, ns, "roles", 3)
	waitSettled(t, ns, "roles", 3, 4*time.Minute)
	checkVotersSelectedAsCozystacks(t, ns, "roles", 3)
	setReplicas(t, ns, "roles", 5)
	waitSettled(t, ns, "roles", 5, 6*time.Minute)
	checkVotersSelectedAsCozystacks(t, ns, "roles", 5)
}

// roleEvent is one change of a member Pod's role label or of the budget's selector, in the
// order of the API server's resource versions (etcd revisions, one sequence across kinds).
type roleEvent struct {
	rv       uint64
	pod      string // "" for the budget
	role     string
	set      bool
	selector *metav1.LabelSelector
	uid      types.UID
}

// A cluster that ran under an operator writing the old role values (Voter, Learner) moves
// over: with the operator stopped, its Pods and its PodDisruptionBudget are set back to the
// old values; the operator started again relabels the Pods in place (no Pod replaced, no
// container restarted) and moves the budget to Cozystack's selector, and at every moment in
// between the budget selects every voter. A client writes throughout.
func TestOldRoleLabelsMoveOverInPlace(t *testing.T) {
	ns := namespace(t)
	const cluster = "legacy"
	createCluster(t, ns, cluster, 3)
	waitSettled(t, ns, cluster, 3, 4*time.Minute)
	members := []string{cluster + "-1", cluster + "-2", cluster + "-3"}
	for _, m := range statusVoters(getCluster(t, ns, cluster)) {
		if !slices.Contains(members, m) {
			t.Fatalf("voters %v, want %v", statusVoters(getCluster(t, ns, cluster)), members)
		}
	}
	restarts := containerRestarts(t, ns, members)
	uids := map[string]types.UID{}
	for _, m := range members {
		uids[m] = getPod(t, ns, m).UID
	}

	ctx := context.Background()
	setOperatorReplicas(t, 0)
	t.Cleanup(func() { setOperatorReplicas(t, 1) })
	for _, m := range members {
		pod := getPod(t, ns, m)
		patch := client.MergeFrom(pod.DeepCopy())
		pod.Labels[etcdv1.LabelRole] = etcdv1.LegacyRoleLabelVoter
		if err := k8s.Patch(ctx, pod, patch); err != nil {
			t.Fatal(err)
		}
	}
	pdb := &policyv1.PodDisruptionBudget{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: cluster}, pdb); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(pdb.DeepCopy())
	pdb.Spec.Selector = &metav1.LabelSelector{MatchLabels: maps.Clone(pdb.Spec.Selector.MatchLabels)}
	pdb.Spec.Selector.MatchLabels[etcdv1.LabelRole] = etcdv1.LegacyRoleLabelVoter
	if err := k8s.Patch(ctx, pdb, patch); err != nil {
		t.Fatalf("setting the budget's selector back to the old value: %v", err)
	}

	var mu sync.Mutex
	var events []roleEvent
	record := func(e roleEvent) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, e)
	}
	rvOf := func(obj client.Object) uint64 {
		rv, err := strconv.ParseUint(obj.GetResourceVersion(), 10, 64)
		if err != nil {
			t.Errorf("resource version %q is not an etcd revision: %v", obj.GetResourceVersion(), err)
		}
		return rv
	}
	podWatch := watchChanges(t, &corev1.PodList{}, []client.ListOption{client.InNamespace(ns), client.MatchingLabels{etcdv1.LabelCluster: cluster}},
		func(list client.ObjectList) error {
			for _, p := range list.(*corev1.PodList).Items {
				v, ok := p.Labels[etcdv1.LabelRole]
				record(roleEvent{rv: rvOf(&p), pod: p.Name, role: v, set: ok, uid: p.UID})
			}
			return nil
		},
		func(obj client.Object, deleted bool, _ time.Time) {
			if deleted {
				record(roleEvent{rv: rvOf(obj), pod: obj.GetName(), uid: ""})
				return
			}
			v, ok := obj.GetLabels()[etcdv1.LabelRole]
			record(roleEvent{rv: rvOf(obj), pod: obj.GetName(), role: v, set: ok, uid: obj.GetUID()})
		})
	pdbWatch := watchChanges(t, &policyv1.PodDisruptionBudgetList{}, []client.ListOption{client.InNamespace(ns), client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("metadata.name", cluster)}},
		func(list client.ObjectList) error {
			for _, p := range list.(*policyv1.PodDisruptionBudgetList).Items {
				record(roleEvent{rv: rvOf(&p), selector: p.Spec.Selector.DeepCopy()})
			}
			return nil
		},
		func(obj client.Object, deleted bool, _ time.Time) {
			var sel *metav1.LabelSelector
			if !deleted {
				sel = obj.(*policyv1.PodDisruptionBudget).Spec.Selector.DeepCopy()
			}
			record(roleEvent{rv: rvOf(obj), selector: sel})
		})

	w := startWriter(t, ns, cluster, "legacy")
	setOperatorReplicas(t, 1)
	eventually(t, 3*time.Minute, "Pods and budget moved over", func() error {
		for _, m := range members {
			if v := getPod(t, ns, m).Labels[etcdv1.LabelRole]; v != etcdv1.RoleLabelVoter {
				return fmt.Errorf("Pod %s has role %q", m, v)
			}
		}
		have := &policyv1.PodDisruptionBudget{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: cluster}, have); err != nil {
			return err
		}
		if s := have.Spec.Selector; len(s.MatchExpressions) != 0 || s.MatchLabels[etcdv1.LabelRole] != etcdv1.RoleLabelVoter {
			return fmt.Errorf("budget selector %v", s)
		}
		return nil
	})
	checkVotersSelectedAsCozystacks(t, ns, cluster, 3)
	podWatch.finish(t)
	pdbWatch.finish(t)
	if failed := w.stopAndVerify(t, 10); failed != 0 {
		t.Errorf("%d writes failed while the labels moved over", failed)
	}
	for _, m := range members {
		if pod := neverRestarted(t, ns, m, restarts[m]); pod.UID != uids[m] {
			t.Errorf("Pod %s was replaced", m)
		}
	}

	// Replay every change in the API server's order: the budget selects all three voters at
	// every moment, and it was widened on the way (the move went through both values).
	mu.Lock()
	defer mu.Unlock()
	sort.SliceStable(events, func(i, j int) bool { return events[i].rv < events[j].rv })
	podLabels := map[string]map[string]string{}
	var selector *metav1.LabelSelector
	widened := false
	for _, e := range events {
		if e.pod == "" {
			selector = e.selector
			widened = widened || (selector != nil && len(selector.MatchExpressions) > 0)
		} else {
			if e.uid != "" && e.uid != uids[e.pod] {
				t.Errorf("at revision %d Pod %s is a new Pod", e.rv, e.pod)
			}
			l := map[string]string{etcdv1.LabelCluster: cluster, etcdv1.LabelName: "etcd", etcdv1.LabelInstance: cluster,
				etcdv1.LabelManagedBy: "etcd-operator", etcdv1.LabelMember: e.pod}
			if e.set {
				l[etcdv1.LabelRole] = e.role
			}
			podLabels[e.pod] = l
		}
		if selector == nil || len(podLabels) < len(members) {
			continue // before the first look at both kinds
		}
		sel, err := metav1.LabelSelectorAsSelector(selector)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range members {
			if !sel.Matches(labels.Set(podLabels[m])) {
				t.Errorf("at revision %d the budget (%v) does not select voter %s (role %q)", e.rv, selector, m, podLabels[m][etcdv1.LabelRole])
			}
		}
	}
	if !widened {
		t.Error("the budget never selected both voter values: the move skipped its widening")
	}
}
