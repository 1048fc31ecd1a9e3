package cluster

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

func (h *harness) setSuspended(on bool) {
	h.t.Helper()
	c := h.clusterObj()
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	delete(c.Annotations, etcdv1.AnnotationSuspendReconcile)
	if on {
		c.Annotations[etcdv1.AnnotationSuspendReconcile] = "true"
	}
	if err := h.api.Update(context.Background(), c); err != nil {
		h.t.Fatal(err)
	}
}

// A suspended cluster is left alone: a scale-out asked meanwhile adds no member and touches
// etcd not at all, the condition says why; once the annotation goes, the scale-out happens
// and the condition is gone.
func TestASuspendedClusterIsLeftAlone(t *testing.T) {
	h := runningHarness(t)
	h.setSuspended(true)
	h.setReplicas(4)
	h.reconcile()
	if n := len(h.members()); n != 3 {
		t.Fatalf("%d members while suspended; want the 3 it had", n)
	}
	if calls := h.etcd.Calls(); len(calls) != 0 {
		t.Fatalf("etcd called while suspended: %v", calls)
	}
	cond := meta.FindStatusCondition(h.clusterObj().Status.Conditions, etcdv1.ConditionReconcileSuspended)
	if cond == nil || cond.Status != "True" || cond.Reason != etcdv1.ReasonReconcileSuspended {
		t.Fatalf("condition while suspended: %+v", cond)
	}

	h.setSuspended(false)
	h.reconcile()
	if n := len(h.members()); n != 4 {
		t.Fatalf("%d members after the suspension ended; want 4", n)
	}
	if cond := meta.FindStatusCondition(h.clusterObj().Status.Conditions, etcdv1.ConditionReconcileSuspended); cond != nil {
		t.Fatalf("condition left after the suspension ended: %+v", cond)
	}
}
