package robustness

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func pod(name, uid string, ready, terminating bool) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(uid)}}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
	if terminating {
		now := metav1.Now()
		p.DeletionTimestamp = &now
	}
	return p
}

// change is one event: the Pod after it, and whether the object is gone.
type change struct {
	pod     *corev1.Pod
	deleted bool
}

// restart is the events of one member's restart: terminating, gone, replaced, Ready.
func restart(name, oldUID, newUID string) []change {
	return []change{
		{pod(name, oldUID, true, true), false},
		{pod(name, oldUID, false, true), true},
		{pod(name, newUID, false, false), false},
		{pod(name, newUID, true, false), false},
	}
}

func TestRestarts(t *testing.T) {
	members := []string{"a", "b", "c"}
	initial := []corev1.Pod{*pod("a", "a1", true, false), *pod("b", "b1", true, false), *pod("c", "c1", true, false)}
	overlapping := append(restart("a", "a1", "a2")[:3:3], restart("b", "b1", "b2")...)
	overlapping = append(overlapping, change{pod("a", "a2", true, false), false})
	for _, tc := range []struct {
		name       string
		changes    []change
		mostAtOnce int
		replaced   map[string]int
		order      string // the members whose restarts ended, in that order
	}{
		{"one at a time", append(append(restart("a", "a1", "a2"), restart("c", "c1", "c2")...), restart("b", "b1", "b2")...), 1, map[string]int{"a": 1, "b": 1, "c": 1}, "[a c b]"},
		{"two at once", overlapping, 2, map[string]int{"a": 1, "b": 1}, "[b a]"},
		{"a readiness flicker is no restart", []change{{pod("a", "a1", false, false), false}, {pod("b", "b1", false, false), false}, {pod("a", "a1", true, false), false}}, 0, map[string]int{}, "[]"},
		{"a replacement that never gets Ready is still restarting", append(restart("a", "a1", "a2")[:3:3], restart("b", "b1", "b2")[0]), 2, map[string]int{"a": 1}, "[]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := NewRestarts(members, initial)
			if err != nil {
				t.Fatal(err)
			}
			t0 := time.Now()
			for i, c := range tc.changes {
				r.Observe(c.pod, c.deleted, t0.Add(time.Duration(i)*time.Second))
			}
			var order []string
			for i, turn := range r.Order {
				order = append(order, turn.Member)
				if i > 0 && !turn.Done.After(r.Order[i-1].Done) {
					t.Fatalf("restarts ended out of time order: %+v", r.Order)
				}
			}
			if got := fmt.Sprint(order); got != tc.order {
				t.Fatalf("restarts ended in the order %s, want %s", got, tc.order)
			}
			if r.MostAtOnce != tc.mostAtOnce {
				t.Fatalf("most restarting at once %d, want %d", r.MostAtOnce, tc.mostAtOnce)
			}
			for _, m := range members {
				if r.Replaced[m] != tc.replaced[m] {
					t.Fatalf("replaced %v, want %v", r.Replaced, tc.replaced)
				}
			}
		})
	}
	if _, err := NewRestarts(members, initial[:2]); err == nil {
		t.Fatal("a member without a Pod is accepted at the start")
	}
}
