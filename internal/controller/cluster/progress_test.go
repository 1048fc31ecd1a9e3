package cluster

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

// progressClock runs applyDeadline the way reconciles do: each result becomes the stored
// condition the next one sees.
type progressClock struct {
	c   *etcdv1.EtcdCluster
	now time.Time
}

func newProgressClock() *progressClock {
	deadline := int32(600)
	c := &etcdv1.EtcdCluster{Spec: etcdv1.EtcdClusterSpec{ProgressDeadlineSeconds: &deadline}}
	c.Generation = 1
	return &progressClock{c: c, now: time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)}
}

// reconcile applies one reconcile's Progressing condition after the clock moved by elapsed.
func (p *progressClock) reconcile(elapsed time.Duration, inMotion, progressed bool) metav1.Condition {
	p.now = p.now.Add(elapsed)
	cond := metav1.Condition{Type: etcdv1.ConditionProgressing, Status: metav1.ConditionFalse, Reason: "Idle"}
	if inMotion {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionTrue, "MembersUnhealthy", "not scaling: 2 of 3 voters healthy"
	}
	cond = applyDeadline(p.c, cond, progressed, p.now)
	cond.ObservedGeneration = p.c.Generation
	meta.SetStatusCondition(&p.c.Status.Conditions, cond)
	return cond
}

func TestProgressDeadlineCountsFromTheLastChange(t *testing.T) {
	p := newProgressClock()
	p.reconcile(0, false, false)
	start := p.now.Add(time.Hour)
	if got := p.reconcile(time.Hour, true, false); got.Status != metav1.ConditionTrue {
		t.Fatalf("work begins: %+v", got)
	}
	if !p.c.Status.LastProgressTime.Time.Equal(start) {
		t.Fatalf("the clock starts when work begins, not at the last idle time: %v", p.c.Status.LastProgressTime)
	}
	if got := p.reconcile(9*time.Minute, true, true); got.Status != metav1.ConditionTrue {
		t.Fatalf("a change within the deadline: %+v", got)
	}
	if got := p.reconcile(9*time.Minute, true, false); got.Status != metav1.ConditionTrue {
		t.Fatalf("nine minutes after the last change, the deadline has not passed: %+v", got)
	}
	exceeded := p.reconcile(2*time.Minute, true, false)
	if exceeded.Status != metav1.ConditionFalse || exceeded.Reason != etcdv1.ReasonProgressDeadlineExceeded ||
		!strings.Contains(exceeded.Message, "spec.progressDeadlineSeconds 600") || !strings.Contains(exceeded.Message, "2 of 3 voters healthy") {
		t.Fatalf("eleven minutes without a change: %+v", exceeded)
	}
	again := p.reconcile(time.Minute, true, false)
	if again != exceeded {
		t.Fatalf("a stuck cluster's condition must not change between retries (no status writes):\n%+v\n%+v", exceeded, again)
	}
	if got := p.reconcile(time.Minute, true, true); got.Status != metav1.ConditionTrue || !p.c.Status.LastProgressTime.Time.Equal(p.now) {
		t.Fatalf("a change restarts the clock: %+v at %v", got, p.c.Status.LastProgressTime)
	}
}

func TestProgressDeadlineRestartsWithANewSpec(t *testing.T) {
	p := newProgressClock()
	p.reconcile(0, true, false)
	if got := p.reconcile(11*time.Minute, true, false); got.Reason != etcdv1.ReasonProgressDeadlineExceeded {
		t.Fatalf("stuck: %+v", got)
	}
	p.c.Generation = 2
	if got := p.reconcile(time.Minute, true, false); got.Status != metav1.ConditionTrue || !p.c.Status.LastProgressTime.Time.Equal(p.now) {
		t.Fatalf("a new spec gets a new deadline: %+v", got)
	}
}

func TestProgressDeadlineLeavesAnIdleClusterAlone(t *testing.T) {
	p := newProgressClock()
	for range 3 {
		if got := p.reconcile(time.Hour, false, false); got.Status != metav1.ConditionFalse || got.Reason != "Idle" {
			t.Fatalf("idle: %+v", got)
		}
	}
	if p.c.Status.LastProgressTime != nil {
		t.Fatalf("an idle cluster needs no clock: %v", p.c.Status.LastProgressTime)
	}
}
