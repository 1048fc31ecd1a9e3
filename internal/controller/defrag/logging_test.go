package defrag

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller/kit/kittest"
)

func passLog(t *testing.T) *kittest.Log {
	return kittest.NewLog(t, "etcddefrag", "EtcdDefrag", types.NamespacedName{Namespace: "ns", Name: "pass"})
}

func TestEachReconcileOfAPassLogsItsStepAtV1(t *testing.T) {
	h := newPassHarness(t, &etcdv1.DefragRule{All: true})
	logged := passLog(t)
	if line := logged.Reconcile(h.r); line["msg"] != "step taken" || line["step"] != "start" || line["members"] != float64(3) || line["phase"] != string(etcdv1.EtcdDefragPhaseRunning) {
		t.Errorf("want the start of the pass over 3 members: %v", line)
	}
	line := logged.Reconcile(h.r)
	if line["step"] != "defragment" || line["member"] != "db-2" || line["outcome"] != string(etcdv1.DefragOutcomeDefragmented) ||
		line["verdictReason"] != etcdv1.ReasonRuleMatched || line["reclaimedBytes"] != float64(10<<20) || line["EtcdCluster"] == nil {
		t.Errorf("want db-2, a follower, defragmented first and why, with the cluster it serves: %v", line)
	}
}

func TestAPassThatWaitsLogsWhyAtV1(t *testing.T) {
	h := newPassHarness(t, nil)
	h.etcd.FailNext("MemberList", errors.New("connection refused"))
	line := passLog(t).Reconcile(h.r)
	if line["msg"] != "step waits" || line["step"] != "wait" || line["waitReason"] != etcdv1.ReasonEtcdUnreachable || line["why"] == "" {
		t.Errorf("want the pass waiting for etcd, and why: %v", line)
	}
}

func TestEachReconcileOfADefragScheduleLogsThePassItCreatesAndWhenItRunsNextAtV1(t *testing.T) {
	h := newPassHarness(t, nil)
	key := types.NamespacedName{Namespace: "ns", Name: "db"}
	c := &etcdv1.EtcdCluster{}
	if err := h.api.Get(context.Background(), key, c); err != nil {
		t.Fatal(err)
	}
	c.Spec.Defrag = &etcdv1.DefragSchedule{Schedule: "@every 1h"}
	if err := h.api.Update(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	due := c.CreationTimestamp.Add(time.Hour)
	s := &ScheduleReconciler{Client: h.api, Now: func() time.Time { return due.Add(30 * time.Minute) }}
	line := kittest.NewLog(t, "etcddefrag-schedule", "EtcdCluster", key).Reconcile(s)
	if line["msg"] != "step taken" || line["step"] != "createPass" || line["pass"] != passName(c, due) ||
		line["nextRun"] != due.Add(time.Hour).UTC().Format(time.RFC3339) {
		t.Errorf("want the pass due an hour after the cluster's creation, and the next run an hour later: %v", line)
	}
}
