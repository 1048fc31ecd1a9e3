package simnode

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestDecide(t *testing.T) {
	now := time.Now()
	deleting := metav1.NewTime(now)
	tests := []struct {
		name     string
		deleting bool
		phase    corev1.PodPhase
		running  bool
		retryAt  time.Time
		want     action
	}{
		{name: "a new Pod starts", want: start},
		{name: "a running Pod is reported", running: true, want: report},
		{name: "a crashed Pod waits out its back-off", retryAt: now.Add(time.Second), want: report},
		{name: "a crashed Pod past its back-off starts again", retryAt: now.Add(-time.Second), want: start},
		{name: "a Pod marked for deletion is removed", deleting: true, running: true, want: remove},
		{name: "a failed Pod marked for deletion is removed", deleting: true, phase: corev1.PodFailed, want: remove},
		{name: "a failed Pod never starts", phase: corev1.PodFailed, want: leave},
		{name: "a succeeded Pod never starts", phase: corev1.PodSucceeded, running: true, want: leave},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &corev1.Pod{Status: corev1.PodStatus{Phase: tt.phase}}
			if tt.deleting {
				pod.DeletionTimestamp = &deleting
			}
			if got := decide(pod, tt.running, tt.retryAt, now); got != tt.want {
				t.Fatalf("decide = %d; want %d", got, tt.want)
			}
		})
	}
}

// The node owns the readiness conditions and keeps the others: the scheduler's PodScheduled,
// a disruption controller's DisruptionTarget.
func TestPodConditionsKeepOthers(t *testing.T) {
	took := metav1.NewTime(time.Unix(1000, 0))
	scheduled := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(time.Unix(10, 0))}
	disruption := corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}
	staleReady := corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse}
	st := &podState{startTime: took, startedAt: took, running: true}

	got := podConditions([]corev1.PodCondition{scheduled, staleReady, disruption}, st)
	byType := map[corev1.PodConditionType]corev1.PodCondition{}
	for _, c := range got {
		if _, dup := byType[c.Type]; dup {
			t.Fatalf("condition %s twice in %v", c.Type, got)
		}
		byType[c.Type] = c
	}
	if byType[corev1.PodScheduled] != scheduled || byType[corev1.DisruptionTarget] != disruption || byType[corev1.PodReady].Status != corev1.ConditionTrue || len(got) != 6 {
		t.Fatalf("conditions %v; want the scheduler's and the disruption's kept, Ready true", got)
	}
	if c := podConditions(nil, st)[4]; c.Type != corev1.PodScheduled || c.Status != corev1.ConditionTrue {
		t.Fatalf("a Pod bound by hand has %v; want PodScheduled true", c)
	}
}
