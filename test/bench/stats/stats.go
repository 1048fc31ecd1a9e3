// Package stats holds what the benchmarks (test/bench and test/bench/snapshot) share to
// report samples: the median and the samples themselves, and quantiles of a histogram.
package stats

import (
	"fmt"
	"math"
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

// Spread is the largest sample less the smallest: how far apart the runs were (an outlier
// shows here when the median hides it).
func Spread(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	return slices.Max(ds) - slices.Min(ds)
}

// Seconds lists the samples in seconds, one decimal, in the order measured.
func Seconds(ds []time.Duration) string {
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = fmt.Sprintf("%.1f", d.Seconds())
	}
	return strings.Join(parts, " ")
}

// Bucket is one cumulative bucket of a Prometheus histogram: how many observations were at
// most UpperBound.
type Bucket struct {
	UpperBound float64
	Count      float64
}

// Quantile estimates the q-quantile (0 < q < 1) of the observations a histogram's
// cumulative buckets, sorted by bound, counted, interpolating linearly inside the bucket
// that holds it, as Prometheus's histogram_quantile does. The result is at most the largest
// finite bound: a quantile in the +Inf bucket is only known to exceed it. NaN when there
// were no observations.
func Quantile(q float64, buckets []Bucket) float64 {
	if len(buckets) == 0 || buckets[len(buckets)-1].Count == 0 {
		return math.NaN()
	}
	rank := q * buckets[len(buckets)-1].Count
	lower, below := 0.0, 0.0
	for _, b := range buckets {
		if b.Count >= rank {
			if math.IsInf(b.UpperBound, 1) {
				return lower
			}
			if b.Count == below {
				return b.UpperBound
			}
			return lower + (b.UpperBound-lower)*(rank-below)/(b.Count-below)
		}
		lower, below = b.UpperBound, b.Count
	}
	return lower
}
