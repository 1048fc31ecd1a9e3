package controller

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
)

func TestDecideAutoRecovery(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	auto := &etcdv1.QuorumLossPolicy{Policy: etcdv1.QuorumLossRecoverFromMostAdvancedMember, GracePeriodSeconds: ptrTo[int32](60)}
	lostAgo := func(d time.Duration) *metav1.Condition {
		return &metav1.Condition{Type: etcdv1.ConditionAvailable, Status: metav1.ConditionFalse, Reason: ReasonQuorumLost, LastTransitionTime: metav1.NewTime(now.Add(-d))}
	}
	voter := func(name string, applied, term uint64) survivor {
		return survivor{name: name, answered: true, status: etcd.Status{RaftAppliedIndex: applied, RaftTerm: term}}
	}
	two := []survivor{voter("db-1", 90, 3), voter("db-3", 100, 3), {name: "db-2"}}
	for _, tc := range []struct {
		name      string
		policy    *etcdv1.QuorumLossPolicy
		available *metav1.Condition
		survivors []survivor
		source    string
		wait      time.Duration
		why       string
	}{
		{"no policy", nil, lostAgo(time.Hour), two, "", 0, ""},
		{"Manual", &etcdv1.QuorumLossPolicy{Policy: etcdv1.QuorumLossManual}, lostAgo(time.Hour), two, "", 0, ""},
		{"the loss not recorded yet", auto, &metav1.Condition{Status: metav1.ConditionTrue, Reason: "QuorumHealthy"}, two, "", 0, ""},
		{"within the grace period", auto, lostAgo(20 * time.Second), two, "", 40 * time.Second, "recovers from the most advanced member at 2026-01-01T12:00:40Z"},
		{"default grace of 300 s", &etcdv1.QuorumLossPolicy{Policy: etcdv1.QuorumLossRecoverFromMostAdvancedMember}, lostAgo(100 * time.Second), two, "", 200 * time.Second, "unless the quorum comes back first"},
		{"past the grace period", auto, lostAgo(61 * time.Second), two, "db-3", 0, ""},
		{"no survivor", auto, lostAgo(time.Hour), []survivor{{name: "db-1"}, {name: "db-2"}}, "", 0, "no member answers as a voter"},
		{"a learner only", auto, lostAgo(time.Hour), []survivor{answered("db-4", 500, true)}, "", 0, "no member answers as a voter"},
		{"a learner ahead of the voters", auto, lostAgo(time.Hour), append([]survivor{answered("db-4", 500, true)}, two...), "db-3", 0, ""},
		{"a tie goes to the higher term", auto, lostAgo(time.Hour), []survivor{voter("db-1", 100, 3), voter("db-2", 100, 4)}, "db-2", 0, ""},
		{"a full tie goes to the lowest ordinal", auto, lostAgo(time.Hour), []survivor{voter("db-3", 100, 3), voter("db-1", 100, 3)}, "db-1", 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := decideAutoRecovery(tc.policy, tc.available, tc.survivors, now)
			if d.source != tc.source || d.wait != tc.wait || (tc.why == "") != (d.why == "") || !strings.Contains(d.why, tc.why) {
				t.Fatalf("got %+v, want source %q, wait %s, why %q", d, tc.source, tc.wait, tc.why)
			}
		})
	}
}

// The policy asks for the recovery from the most advanced survivor once the grace period has
// passed, through the recover-from annotation, and not before; the recovery then states what
// is lost before any act, as for a person's request.
func TestAutomaticRecoveryAfterTheGracePeriod(t *testing.T) {
	h := runningHarness(t)
	h.editSpec(func(s *etcdv1.EtcdClusterSpec) {
		s.QuorumLoss = &etcdv1.QuorumLossPolicy{Policy: etcdv1.QuorumLossRecoverFromMostAdvancedMember, GracePeriodSeconds: ptrTo[int32](60)}
	})
	h.startPodOf("db-1")
	h.etcd.SetDown(h.etcdID("db-2"), true)
	h.etcd.SetDown(h.etcdID("db-3"), true)
	h.reconcile() // the loss is recorded
	h.reconcile()
	if from := h.clusterObj().Annotations[AnnotationRecoverFrom]; from != "" {
		t.Fatalf("recovery asked for within the grace period: %s", from)
	}
	if av := h.condition(etcdv1.ConditionAvailable); av.Reason != ReasonQuorumLost {
		t.Fatalf("Available %+v", av)
	}
	if pr := h.condition(etcdv1.ConditionProgressing); !strings.Contains(pr.Message, "spec.quorumLoss.policy RecoverFromMostAdvancedMember recovers from the most advanced member at") {
		t.Fatalf("Progressing does not say when the policy acts: %+v", pr)
	}
	h.r.Now = func() time.Time { return time.Now().Add(61 * time.Second) }
	h.reconcile()
	if from := h.clusterObj().Annotations[AnnotationRecoverFrom]; from != "db-1" {
		t.Fatalf("recover-from %q after the grace period, want db-1", from)
	}
	h.reconcile()
	if pr := h.condition(etcdv1.ConditionProgressing); pr.Reason != ReasonQuorumRecovery || !strings.Contains(pr.Message, "recovering from member db-1") || len(h.members()) != 3 {
		t.Fatalf("the automatic request did not state the loss first: %+v", pr)
	}
}
