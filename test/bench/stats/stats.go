// Package stats holds what the benchmarks (test/bench and test/bench/snapshot) share to
// report samples: the median and the samples themselves.
package stats

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Median resists the one slow sample that a machine shared with other builds produces.
func Median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	sorted := slices.Clone(ds)
	slices.Sort(sorted)
	mid := len(sorted) / 2
	if len(sorted)%2 == 0 {
		return (sorted[mid-1] + sorted[mid]) / 2
	}
	return sorted[mid]
}

// Seconds lists the samples in seconds, one decimal, in the order measured.
func Seconds(ds []time.Duration) string {
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = fmt.Sprintf("%.1f", d.Seconds())
	}
	return strings.Join(parts, " ")
}
