package main

import (
	"slices"
	"testing"
)

// Sides take turns, the first one swapped every other run.
func TestSideOrder(t *testing.T) {
	for run, want := range [][]string{{floor, operator}, {operator, floor}, {floor, operator}} {
		if got := sideOrder(run, floor, operator); !slices.Equal(got, want) {
			t.Fatalf("run %d: %q, want %q", run, got, want)
		}
	}
}
