package defrag

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller/kit"
	"github.com/quorumkeeper/etcd-operator/internal/controller/kit/kittest"
)

// A pass, and the defragmentation schedule, of a cluster another operator claims are left
// alone: no etcd call, no status, no pass created.
func TestDefragOfAnotherOperatorsClusterIsLeftAlone(t *testing.T) {
	h := newPassHarness(t, &etcdv1.DefragRule{All: true})
	// Claimed by operator B, with a defragmentation schedule due now.
	kittest.SetClaim(t, h.api, types.NamespacedName{Namespace: "ns", Name: "db"}, "ops-b/x", func(c *etcdv1.EtcdCluster) {
		c.Spec.Defrag = &etcdv1.DefragSchedule{Schedule: "@every 1m", Rule: &etcdv1.DefragRule{All: true}}
	})
	h.r.Claims = &kit.Claims{Me: "ops-a/x"}
	s := &ScheduleReconciler{Client: h.api, Claims: h.r.Claims}
	for range 3 {
		for _, r := range []interface {
			Reconcile(context.Context, ctrl.Request) (ctrl.Result, error)
		}{h.r, s} {
			name := "pass"
			if r == s {
				name = "db"
			}
			if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: name}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if calls := h.etcd.Calls(); len(calls) != 0 {
		t.Fatalf("etcd calls for another operator's cluster: %v", calls)
	}
	d := &etcdv1.EtcdDefrag{}
	if err := h.api.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "pass"}, d); err != nil || d.Status.Phase != "" {
		t.Fatalf("pass status %+v, %v; want untouched", d.Status, err)
	}
	if list := (&etcdv1.EtcdDefragList{}); h.api.List(context.Background(), list, client.MatchingLabels{etcdv1.LabelDefragSchedule: "db"}) != nil || len(list.Items) != 0 {
		t.Fatalf("the schedule of another operator's cluster created passes: %d", len(list.Items))
	}
	h.r.Claims.Me = "ops-b/x"
	if d := h.run(); d.Status.Phase != etcdv1.EtcdDefragPhaseComplete {
		t.Fatalf("the claimant's pass: %+v", d.Status)
	}
}
