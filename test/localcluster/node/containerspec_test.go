package node

import (
	"slices"
	"testing"
)

func TestLastWinsKeepsOneEntryPerName(t *testing.T) {
	got := lastWins([]string{"A=1", "KUBERNETES_SERVICE_HOST=10.214.0.1", "B=2", "KUBERNETES_SERVICE_HOST=10.213.0.1"})
	want := []string{"A=1", "KUBERNETES_SERVICE_HOST=10.213.0.1", "B=2"}
	if !slices.Equal(got, want) {
		t.Fatalf("lastWins = %v, want %v", got, want)
	}
}
