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
		quorum := n/2 + 1
		if pdb.Status.ObservedGeneration != pdb.Generation || pdb.Status.ExpectedPods != int32(n) || pdb.Spec.MinAvailable.IntValue() != quorum ||
			pdb.Status.DisruptionsAllowed != int32(n-quorum) {
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
	if got := statusVoters(getCluster(t, ns, cluster)); !slices.Equal(got, members) {
		t.Fatalf("voters %v, want %v", got, members)
	}
	restarts := containerRestarts(t, ns, members)
	uids := map[string]types.UID{}
	for _, m := range members {
		uids[m] = getPod(t, ns, m).UID
	}

	setOperatorReplicas(t, 0)
	t.Cleanup(func() { setOperatorReplicas(t, 1) })
	setBackToOldRoleValues(t, ns, cluster, members)
	rec := recordRoleChanges(t, ns, cluster)
	w := startWriter(t, ns, cluster, "legacy")
	setOperatorReplicas(t, 1)
	waitMovedOver(t, ns, cluster, members)
	checkVotersSelectedAsCozystacks(t, ns, cluster, 3)
	rec.finish(t)
	if failed := w.stopAndVerify(t, 10); failed != 0 {
		t.Errorf("%d writes failed while the labels moved over", failed)
	}
	for _, m := range members {
		if pod := neverRestarted(t, ns, m, restarts[m]); pod.UID != uids[m] {
			t.Errorf("Pod %s was replaced", m)
		}
	}
	rec.replay(t, cluster, members, uids)
}

// setBackToOldRoleValues labels the members' Pods and the budget's selector as the operator
// before Cozystack's values did.
func setBackToOldRoleValues(t *testing.T, ns, cluster string, members []string) {
	t.Helper()
	ctx := context.Background()
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
}

// waitMovedOver waits until every member's Pod carries Cozystack's voter value and the budget
// selects by Cozystack's selector.
func waitMovedOver(t *testing.T, ns, cluster string, members []string) {
	t.Helper()
	eventually(t, 3*time.Minute, "Pods and budget moved over", func() error {
		for _, m := range members {
			if v := getPod(t, ns, m).Labels[etcdv1.LabelRole]; v != etcdv1.RoleLabelVoter {
				return fmt.Errorf("pod %s has role %q", m, v)
			}
		}
		have := &policyv1.PodDisruptionBudget{}
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: cluster}, have); err != nil {
			return err
		}
		if s := have.Spec.Selector; len(s.MatchExpressions) != 0 || s.MatchLabels[etcdv1.LabelRole] != etcdv1.RoleLabelVoter {
			return fmt.Errorf("budget selector %v", s)
		}
		return nil
	})
}

// roleChanges records the role labels of a cluster's Pods and its budget's selector through
// watches, every change with its resource version.
type roleChanges struct {
	mu      sync.Mutex
	events  []roleEvent
	watches []*changeWatch
	t       *testing.T
}

func (rc *roleChanges) record(obj client.Object, e roleEvent) {
	rv, err := strconv.ParseUint(obj.GetResourceVersion(), 10, 64)
	if err != nil {
		rc.t.Errorf("resource version %q is not an etcd revision: %v", obj.GetResourceVersion(), err)
	}
	e.rv = rv
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.events = append(rc.events, e)
}

func podRoleEvent(obj client.Object, deleted bool) roleEvent {
	if deleted {
		return roleEvent{pod: obj.GetName()}
	}
	v, ok := obj.GetLabels()[etcdv1.LabelRole]
	return roleEvent{pod: obj.GetName(), role: v, set: ok, uid: obj.GetUID()}
}

func recordRoleChanges(t *testing.T, ns, cluster string) *roleChanges {
	t.Helper()
	rc := &roleChanges{t: t}
	rc.watches = append(rc.watches, watchChanges(t, &corev1.PodList{}, []client.ListOption{client.InNamespace(ns), client.MatchingLabels{etcdv1.LabelCluster: cluster}},
		func(list client.ObjectList) error {
			for i := range list.(*corev1.PodList).Items {
				p := &list.(*corev1.PodList).Items[i]
				rc.record(p, podRoleEvent(p, false))
			}
			return nil
		},
		func(obj client.Object, deleted bool, _ time.Time) { rc.record(obj, podRoleEvent(obj, deleted)) }))
	pdbEvent := func(obj client.Object, deleted bool) roleEvent {
		if deleted {
			return roleEvent{}
		}
		return roleEvent{selector: obj.(*policyv1.PodDisruptionBudget).Spec.Selector.DeepCopy()}
	}
	rc.watches = append(rc.watches, watchChanges(t, &policyv1.PodDisruptionBudgetList{},
		[]client.ListOption{client.InNamespace(ns), client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("metadata.name", cluster)}},
		func(list client.ObjectList) error {
			for i := range list.(*policyv1.PodDisruptionBudgetList).Items {
				p := &list.(*policyv1.PodDisruptionBudgetList).Items[i]
				rc.record(p, pdbEvent(p, false))
			}
			return nil
		},
		func(obj client.Object, deleted bool, _ time.Time) { rc.record(obj, pdbEvent(obj, deleted)) }))
	return rc
}

func (rc *roleChanges) finish(t *testing.T) {
	t.Helper()
	for _, w := range rc.watches {
		w.finish(t)
	}
}

// replay goes through every change in the API server's order: the budget selects all the
// members at every moment, no member's Pod is a new one, and the budget was widened on the
// way (the move went through both values).
func (rc *roleChanges) replay(t *testing.T, cluster string, members []string, uids map[string]types.UID) {
	t.Helper()
	rc.mu.Lock()
	defer rc.mu.Unlock()
	sort.SliceStable(rc.events, func(i, j int) bool { return rc.events[i].rv < rc.events[j].rv })
	podLabels := map[string]map[string]string{}
	var selector *metav1.LabelSelector
	widened, budgetSeen := false, false
	for _, e := range rc.events {
		if e.pod == "" {
			selector, budgetSeen = e.selector, true
			widened = widened || (selector != nil && len(selector.MatchExpressions) > 0)
		} else {
			if e.uid != uids[e.pod] {
				t.Errorf("at revision %d Pod %s is gone or a new Pod", e.rv, e.pod)
			}
			podLabels[e.pod] = map[string]string{etcdv1.LabelCluster: cluster, etcdv1.LabelName: "etcd", etcdv1.LabelInstance: cluster,
				etcdv1.LabelManagedBy: "etcd-operator", etcdv1.LabelMember: e.pod}
			if e.set {
				podLabels[e.pod][etcdv1.LabelRole] = e.role
			}
		}
		if budgetSeen && len(podLabels) == len(members) { // from the first look at both kinds on
			checkBudgetSelects(t, e.rv, selector, members, podLabels)
		}
	}
	if !widened {
		t.Error("the budget never selected both voter values: the move skipped its widening")
	}
}

func checkBudgetSelects(t *testing.T, rv uint64, selector *metav1.LabelSelector, members []string, podLabels map[string]map[string]string) {
	t.Helper()
	if selector == nil {
		t.Errorf("at revision %d the cluster has no budget", rv)
		return
	}
	sel, err := metav1.LabelSelectorAsSelector(selector)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range members {
		if !sel.Matches(labels.Set(podLabels[m])) {
			t.Errorf("at revision %d the budget (%v) does not select voter %s (role %q)", rv, selector, m, podLabels[m][etcdv1.LabelRole])
		}
	}
}
