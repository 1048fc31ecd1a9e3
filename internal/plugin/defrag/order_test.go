package defrag

import (
	"slices"
	"testing"
)

func TestDefragOrderPutsTheLeaderLast(t *testing.T) {
	got := defragOrder([]string{"db-3", "db-1", "db-2"}, "db-1")
	if !slices.Equal(got, []string{"db-2", "db-3", "db-1"}) {
		t.Errorf("order %v", got)
	}
	if got := defragOrder([]string{"db-2", "db-1"}, ""); !slices.Equal(got, []string{"db-1", "db-2"}) {
		t.Errorf("order without a leader %v", got)
	}
}
