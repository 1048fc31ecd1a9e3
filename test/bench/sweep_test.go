package main

import (
	"strings"
	"testing"
	"time"
)

func TestParseCounts(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []int
		err  string
	}{
		{in: "", want: nil},
		{in: "500", want: []int{500}},
		{in: "500, 1000,5000", want: []int{500, 1000, 5000}},
		{in: "500,500", err: "must rise"},
		{in: "1000,500", err: "must rise"},
		{in: "0", err: "positive"},
		{in: "5k", err: "positive"},
	} {
		got, err := parseCounts(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("parseCounts(%q) = %v, %v; want an error saying %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || len(got) != len(tc.want) {
			t.Errorf("parseCounts(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("parseCounts(%q) = %v; want %v", tc.in, got, tc.want)
			}
		}
	}
}

// The report's memory per cluster is the growth since the point before (the first point's
// since the memory before the sweep), and the whole sweep's over the memory before it.
func TestSweepReportStatesMemoryPerCluster(t *testing.T) {
	const mib = 1 << 20
	at := func(clusters int, rss float64) sweepPoint {
		return sweepPoint{clusters: clusters, added: clusters, created: time.Second,
			rest: &atRest{window: time.Minute, rssBytes: rss, reconcile: latency{p50: 0.001, p99: 0.01, count: 60}}}
	}
	r := &sweepResult{baseRSS: 64 * mib, points: []sweepPoint{at(512, 64*mib+100*mib), at(1024, 64*mib+150*mib)}}
	out := formatSweep(r, time.Minute)
	for _, want := range []string{
		"200 KiB",                   // (100 MiB) / 512 clusters
		"100 KiB",                   // (50 MiB) / 512 more
		"150 KiB per cluster",       // 150 MiB / 1024 over the whole sweep
		"holds about 1311 clusters", // (256 - 64) MiB / 150 KiB
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the report does not say %q:\n%s", want, out)
		}
	}
}
