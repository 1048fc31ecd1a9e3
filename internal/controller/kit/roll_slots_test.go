package kit

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

func TestRollSlots(t *testing.T) {
	a, b, c := types.NamespacedName{Namespace: "x", Name: "a"}, types.NamespacedName{Namespace: "x", Name: "b"}, types.NamespacedName{Namespace: "y", Name: "a"}
	steps := []struct {
		name    string
		act     func(*RollSlots) bool
		allowed bool
	}{
		{"a takes the first slot", func(s *RollSlots) bool { ok, _ := s.Take(a); return ok }, true},
		{"b takes the second", func(s *RollSlots) bool { ok, _ := s.Take(b); return ok }, true},
		{"c waits: both slots taken", func(s *RollSlots) bool { ok, _ := s.Take(c); return ok }, false},
		{"a keeps its slot on its next restart", func(s *RollSlots) bool { ok, _ := s.Take(a); return ok }, true},
		{"a's roll ends, c gets the slot", func(s *RollSlots) bool { s.Release(a); ok, _ := s.Take(c); return ok }, true},
		{"a waits for a slot again", func(s *RollSlots) bool { ok, _ := s.Take(a); return ok }, false},
		{"releasing a cluster without a slot changes nothing", func(s *RollSlots) bool { s.Release(a); ok, _ := s.Take(a); return ok }, false},
	}
	s := NewRollSlots(2)
	for _, st := range steps {
		if got := st.act(s); got != st.allowed {
			t.Fatalf("%s: allowed %v, want %v", st.name, got, st.allowed)
		}
	}
	for _, unlimited := range []*RollSlots{nil, NewRollSlots(0)} {
		for _, key := range []types.NamespacedName{a, b, c} {
			if ok, _ := unlimited.Take(key); !ok {
				t.Fatalf("no cap (%v) refused %v", unlimited, key)
			}
		}
	}
}
