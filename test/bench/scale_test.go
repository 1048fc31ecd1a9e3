package main

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

// reconcileLatency takes the EtcdCluster controller's reconciles between two scrapes only:
// what came before the first and the other controllers' are left out.
func TestReconcileLatency(t *testing.T) {
	scrape := func(text string) families {
		t.Helper()
		f, err := parseMetrics(strings.NewReader("# TYPE controller_runtime_reconcile_time_seconds histogram\n" + text))
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	before := scrape(reconcileHistogram("etcdcluster", 10, 10, 0.5) + reconcileHistogram("etcdmember", 0, 0, 0))
	// Then 4 more EtcdCluster reconciles, all between 0.1 and 1 s, and 100 fast EtcdMember ones.
	after := scrape(reconcileHistogram("etcdcluster", 10, 14, 2.5) + reconcileHistogram("etcdmember", 100, 100, 1))
	got := reconcileLatency(before, after)
	if got.count != 4 || math.Abs(got.p50-0.55) > 1e-9 || math.Abs(got.p99-0.991) > 1e-9 {
		t.Fatalf("reconcileLatency = %+v, want 4 reconciles, p50 0.55 s, p99 0.991 s", got)
	}
	if idle := reconcileLatency(after, after); idle.count != 0 || !math.IsNaN(idle.p50) {
		t.Fatalf("no reconcile between the scrapes: %+v, want 0 and NaN", idle)
	}
}

// reconcileHistogram is one controller's controller_runtime_reconcile_time_seconds as the
// operator exposes it: fast reconciles (at most 0.1 s), all within 1 s (none slower), and
// their total time.
func reconcileHistogram(controller string, fast, all int, sum float64) string {
	series := "controller_runtime_reconcile_time_seconds"
	label := fmt.Sprintf("controller=%q", controller)
	return fmt.Sprintf("%[1]s_bucket{%[2]s,le=\"0.1\"} %[3]d\n%[1]s_bucket{%[2]s,le=\"1\"} %[4]d\n%[1]s_bucket{%[2]s,le=\"+Inf\"} %[4]d\n%[1]s_sum{%[2]s} %[5]g\n%[1]s_count{%[2]s} %[4]d\n",
		series, label, fast, all, sum)
}
