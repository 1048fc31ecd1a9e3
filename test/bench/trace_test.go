package main

import (
	"regexp"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A step that continues from earlier ones on its cluster takes them along; others are left out.
func TestSelectSteps(t *testing.T) {
	metrics := func(ss []step) []string {
		var out []string
		for _, s := range ss {
			out = append(out, s.metric)
		}
		return out
	}
	for _, tc := range []struct {
		pattern string
		want    []string
	}{
		{"^bootstrap, 5", []string{"bootstrap, 5 members"}},
		{"^Pod loss", []string{"bootstrap, 3 members", "scale-out 3 -> 4", metricLearnerStep, "Pod loss, 5 members"}},
		{"^upgrade", []string{"bootstrap, 3 members at " + previousPatch, "upgrade " + previousPatch + " -> " + etcdVersion + ", 3 members", "upgrade " + etcdVersion + " -> " + nextMinor + ", 3 members"}},
		{"^upgrade 3.6.15", []string{"bootstrap, 3 members at " + previousPatch, "upgrade " + previousPatch + " -> " + etcdVersion + ", 3 members"}},
		{"^upgrade 3.6.16 -> 3.7", []string{"bootstrap, 3 members at " + previousPatch, "upgrade " + previousPatch + " -> " + etcdVersion + ", 3 members", "upgrade " + etcdVersion + " -> " + nextMinor + ", 3 members"}},
		{"no such step", nil},
	} {
		got := metrics(selectSteps(steps, regexp.MustCompile(tc.pattern)))
		if !slices.Equal(got, tc.want) {
			t.Errorf("%q: got %q, want %q", tc.pattern, got, tc.want)
		}
	}
	if got := selectSteps(steps, nil); len(got) != len(steps) {
		t.Errorf("no pattern: %d steps, want all %d", len(got), len(steps))
	}
}

// A milestone counts only once every member reached it.
func TestBootstrapMilestonesNeedEveryMember(t *testing.T) {
	readyPod := corev1.Pod{Status: corev1.PodStatus{
		Conditions:        []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}, {Type: corev1.PodReady, Status: corev1.ConditionTrue}},
		ContainerStatuses: []corev1.ContainerStatus{{State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}}},
	}}
	bound := corev1.PersistentVolumeClaim{Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}}
	pending := corev1.PersistentVolumeClaim{Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending}}
	s := sighting{pvcs: []corev1.PersistentVolumeClaim{bound, bound, pending}, pods: []corev1.Pod{readyPod, readyPod, {}}}
	reached := map[string]bool{}
	for _, m := range bootstrapMilestones {
		reached[m.name] = m.reached(s, 3)
	}
	want := map[string]bool{"PVCs created": true, "Pods created": true}
	for name, got := range reached {
		if got != want[name] {
			t.Errorf("%s reached: %v, want %v", name, got, want[name])
		}
	}
	if at := (reachedAt{"Pods created": 1500 * time.Millisecond}); at.String() != " (Pods created 1.5)" {
		t.Errorf("progress line %q", at.String())
	}
}
