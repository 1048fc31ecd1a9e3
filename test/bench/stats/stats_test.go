package stats

import (
	"math"
	"testing"
)

func TestQuantile(t *testing.T) {
	inf := math.Inf(1)
	// 100 observations: 50 up to 0.01 s, 40 more up to 0.1 s, 9 more up to 1 s, 1 above.
	latencies := []Bucket{{0.01, 50}, {0.1, 90}, {1, 99}, {inf, 100}}
	for _, tc := range []struct {
		name    string
		q       float64
		buckets []Bucket
		want    float64
	}{
		{"median at a bucket's bound", 0.5, latencies, 0.01},
		{"interpolated inside a bucket", 0.7, latencies, 0.01 + 0.09*(70-50)/40},
		{"p99 at a bound", 0.99, latencies, 1},
		{"in the +Inf bucket: the largest finite bound", 0.995, latencies, 1},
		{"first bucket interpolates from 0", 0.25, latencies, 0.005},
		{"empty buckets skipped", 0.5, []Bucket{{0.01, 0}, {0.1, 0}, {1, 10}, {inf, 10}}, 0.1 + 0.9*5/10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Quantile(tc.q, tc.buckets); math.Abs(got-tc.want) > 1e-9 {
				t.Fatalf("Quantile(%v) = %v, want %v", tc.q, got, tc.want)
			}
		})
	}
	if got := Quantile(0.5, []Bucket{{1, 0}, {inf, 0}}); !math.IsNaN(got) {
		t.Fatalf("no observations: %v, want NaN", got)
	}
}
