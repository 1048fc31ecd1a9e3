package member

import (
	"context"
	"testing"

	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// A Pod of the old operator (role label Voter or Learner) is relabelled in place with
// Cozystack's values, a voter only once the cluster's budget selects the new value: under the
// old operator's budget it keeps its label and is looked at again soon. Nothing is deleted.
func TestOldRoleLabelsMoveOverInPlaceBehindTheBudget(t *testing.T) {
	t.Parallel()
	h := newMemberHarness(t, "")
	ctx := context.Background()
	learner := h.member("db-3")
	learner.Status.Role = etcdv1.RoleLearner
	if err := h.api.Status().Update(ctx, learner); err != nil {
		t.Fatal(err)
	}
	old := specs.PDB(h.cluster, 2, false)
	old.Spec.Selector.MatchLabels[etcdv1.LabelRole] = etcdv1.LegacyRoleLabelVoter
	old.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(h.cluster, etcdv1.GroupVersion.WithKind("EtcdCluster"))}
	if err := h.api.Create(ctx, old); err != nil {
		t.Fatal(err)
	}
	uids := map[string]types.UID{}
	for name, value := range map[string]string{"db-1": "Voter", "db-3": "Learner"} {
		h.reconcile(name) // the Pod is created
		pod := h.pod(name)
		pod.Labels[etcdv1.LabelRole] = value // as the old operator labelled it
		if err := h.api.Update(ctx, pod); err != nil {
			t.Fatal(err)
		}
		uids[name] = pod.UID
	}
	reconcile := func(name string) ctrl.Result {
		t.Helper()
		res, err := h.r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: name}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	label := func(name string) (string, bool) {
		t.Helper()
		pod := h.pod(name)
		if pod == nil || pod.UID != uids[name] {
			t.Fatalf("Pod %s was replaced", name)
		}
		v, ok := pod.Labels[etcdv1.LabelRole]
		return v, ok
	}

	if res := reconcile("db-1"); res.RequeueAfter == 0 || res.RequeueAfter > roleLabelRetry {
		t.Errorf("a voter waiting for the budget is looked at again in %v", res.RequeueAfter)
	}
	if v, _ := label("db-1"); v != etcdv1.LegacyRoleLabelVoter {
		t.Errorf("the voter was relabelled %q under the old operator's budget", v)
	}
	reconcile("db-3")
	if v, ok := label("db-3"); ok {
		t.Errorf("the learner still carries %q", v)
	}

	widened := h.pdb()
	widened.Spec.Selector = specs.PDBSelector("db", true)
	if err := h.api.Update(ctx, widened); err != nil {
		t.Fatal(err)
	}
	reconcile("db-1")
	if v, _ := label("db-1"); v != etcdv1.RoleLabelVoter {
		t.Errorf("under the widened budget the voter carries %q, want %q", v, etcdv1.RoleLabelVoter)
	}
}

// A voter's new Pod carries Cozystack's value; one made while the old operator's budget is
// still in place carries none until the budget selects it.
func TestANewPodCarriesTheRoleLabelTheBudgetSelects(t *testing.T) {
	t.Parallel()
	h := newMemberHarness(t, "")
	h.reconcile("db-1")
	if v := h.pod("db-1").Labels[etcdv1.LabelRole]; v != etcdv1.RoleLabelVoter {
		t.Errorf("a voter's Pod carries role %q", v)
	}
	old := specs.PDB(h.cluster, 3, false)
	old.Spec.Selector.MatchLabels[etcdv1.LabelRole] = etcdv1.LegacyRoleLabelVoter
	old.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(h.cluster, etcdv1.GroupVersion.WithKind("EtcdCluster"))}
	if err := h.api.Create(context.Background(), old); err != nil {
		t.Fatal(err)
	}
	h.reconcile("db-2")
	if v, ok := h.pod("db-2").Labels[etcdv1.LabelRole]; ok {
		t.Errorf("a Pod made under the old operator's budget carries role %q", v)
	}
}

func (h *memberHarness) pdb() *policyv1.PodDisruptionBudget {
	return get(h, specs.PDBName("db"), &policyv1.PodDisruptionBudget{})
}
