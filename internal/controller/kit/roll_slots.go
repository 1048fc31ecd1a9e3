package kit

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// RollSlots caps how many clusters restart members for a changed Pod spec at once, across
// every cluster of the operator. An operator release that changes how Pods are built (a
// PodFormat bump) makes every cluster outdated at the same moment; the cap spreads those
// restarts over time instead of restarting a member of every cluster together. A cluster
// keeps its slot from its first restart until none of its Pods is outdated.
//
// The slots live in memory: after an operator restart the clusters still rolling take
// slots again as they come, so the cap can be exceeded only by clusters already mid-roll.
type RollSlots struct {
	mu      sync.Mutex
	max     int
	rolling map[types.NamespacedName]struct{}
}

// NewRollSlots allows max clusters to roll at once; max <= 0 means no cap.
func NewRollSlots(maxRolling int) *RollSlots {
	return &RollSlots{max: maxRolling, rolling: map[types.NamespacedName]struct{}{}}
}

// Take gives the cluster a slot, or keeps the one it has; false when every slot is taken by
// other clusters, with how many roll. A nil RollSlots has no cap.
func (s *RollSlots) Take(cluster types.NamespacedName) (bool, int) {
	if s == nil || s.max <= 0 {
		return true, 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.rolling[cluster]; ok {
		return true, len(s.rolling)
	}
	if len(s.rolling) >= s.max {
		return false, len(s.rolling)
	}
	s.rolling[cluster] = struct{}{}
	return true, len(s.rolling)
}

// Release frees the cluster's slot: its roll is done, or the cluster is gone.
func (s *RollSlots) Release(cluster types.NamespacedName) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.rolling, cluster)
}
