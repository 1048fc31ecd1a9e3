package cluster

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// A learner etcd lists as started gets status.joined, and before etcd is asked to promote it:
// from the promotion on etcd may count it as a voter while its status still says learner,
// and the member controller must never start it on empty data with its peers named.
func TestAStartedLearnerIsRecordedJoinedBeforeItsPromotion(t *testing.T) {
	var h *harness
	promotesAtMark := -1 // Promote calls made when db-4's mark was first written
	h = harnessWith(t, interceptor.Funcs{SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
		if m, ok := obj.(*etcdv1.EtcdMember); ok && m.Name == "db-4" && m.Status.Joined && promotesAtMark < 0 {
			promotesAtMark = len(h.etcd.CallsTo("Promote"))
		}
		return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
	}})
	h.reconcile()
	h.running()
	h.setReplicas(4)
	h.reconcile() // creates db-4
	h.reconcile() // adds it as a learner
	m4 := h.members()[3]
	if m4.Status.Joined {
		t.Fatalf("db-4 recorded as joined before it started: %+v", m4.Status)
	}
	id, err := etcd.ParseID(m4.Status.MemberID)
	if err != nil {
		t.Fatal(err)
	}
	h.etcd.StartMember(id, "db-4", specs.ClientURL(h.clusterObj(), "db-4"))
	h.etcd.SetCaughtUp(id, true)
	h.reconcile()
	if promotes := len(h.etcd.CallsTo("Promote")); promotes != 1 || promotesAtMark != 0 {
		t.Fatalf("%d promotions; the mark written after %d of them, want it before the first", promotes, promotesAtMark)
	}
	if m4 := h.members()[3]; !m4.Status.Joined {
		t.Fatalf("db-4 promoted without status.joined: %+v", m4.Status)
	}
}

// Right after a promotion etcd refuses the next learner as unhealthy for up to its 5-s health
// interval (etcd 3.5.0 and 3.6.0 do, TestAnAddRightAfterAPromotionIsRefusedOnlyAsUnhealthy in
// internal/etcd; the operator adds members on 3.6.0): with every voter healthy, the scale-out waits, under Scaling, and asks
// again addRefusedPoll later. It is no failure (no StepFailed, no backoff) and says nothing
// of unhealthy members (no MembersUnhealthy).
func TestAnAddRefusedRightAfterAPromotionIsAWait(t *testing.T) {
	h := runningHarness(t)
	h.setReplicas(5)
	h.reconcile() // creates db-4
	h.reconcile() // adds it as a learner
	id, err := etcd.ParseID(h.members()[3].Status.MemberID)
	if err != nil {
		t.Fatal(err)
	}
	h.etcd.StartMember(id, "db-4", specs.ClientURL(h.clusterObj(), "db-4"))
	h.etcd.SetCaughtUp(id, true)
	h.reconcile() // promotes it
	if len(h.etcd.CallsTo("Promote")) != 1 {
		t.Fatalf("db-4 not promoted: %v", h.etcd.Calls())
	}
	h.reconcile() // creates db-5
	if n := len(h.members()); n != 5 {
		t.Fatalf("%d members, want db-5 created", n)
	}
	// As the client returns it: etcd's error, matching the sentinel.
	refusal := fmt.Errorf("etcd add learner [%s]: %w", specs.PeerURL(h.clusterObj(), "db-5"), etcd.ErrUnhealthyCluster)
	for i := range 3 {
		h.etcd.FailNext("AddLearner", refusal)
		if d := h.reconcileAfter(); d != addRefusedPoll {
			t.Fatalf("refusal %d looked at again after %v, want %v", i+1, d, addRefusedPoll)
		}
		if p := h.condition(etcdv1.ConditionProgressing); p.Reason != etcdv1.ReasonScaling || !strings.Contains(p.Message, "does not take db-5 yet") {
			t.Fatalf("refusal %d: Progressing %s %q; want Scaling, waiting for etcd to take db-5", i+1, p.Reason, p.Message)
		}
	}
	h.reconcile()
	if m5 := h.members()[4]; m5.Status.Role != etcdv1.RoleLearner || m5.Status.MemberID == "" {
		t.Fatalf("db-5 status %+v once etcd takes it, want a learner with an ID", m5.Status)
	}
}
