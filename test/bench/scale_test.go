package main

import (
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
	before := scrape(`controller_runtime_reconcile_time_seconds_bucket{controller="etcdcluster",le="0.1"} 10
controller_runtime_reconcile_time_seconds_bucket{controller="etcdcluster",le="1"} 10
controller_runtime_reconcile_time_seconds_bucket{controller="etcdcluster",le="+Inf"} 10
controller_runtime_reconcile_time_seconds_sum{controller="etcdcluster"} 0.5
controller_runtime_reconcile_time_seconds_count{controller="etcdcluster"} 10
controller_runtime_reconcile_time_seconds_bucket{controller="etcdmember",le="0.1"} 0
controller_runtime_reconcile_time_seconds_bucket{controller="etcdmember",le="1"} 0
controller_runtime_reconcile_time_seconds_bucket{controller="etcdmember",le="+Inf"} 0
controller_runtime_reconcile_time_seconds_sum{controller="etcdmember"} 0
controller_runtime_reconcile_time_seconds_count{controller="etcdmember"} 0
`)
	// Then 4 more EtcdCluster reconciles, all between 0.1 and 1 s, and 100 fast EtcdMember ones.
	after := scrape(`controller_runtime_reconcile_time_seconds_bucket{controller="etcdcluster",le="0.1"} 10
controller_runtime_reconcile_time_seconds_bucket{controller="etcdcluster",le="1"} 14
controller_runtime_reconcile_time_seconds_bucket{controller="etcdcluster",le="+Inf"} 14
controller_runtime_reconcile_time_seconds_sum{controller="etcdcluster"} 2.5
controller_runtime_reconcile_time_seconds_count{controller="etcdcluster"} 14
controller_runtime_reconcile_time_seconds_bucket{controller="etcdmember",le="0.1"} 100
controller_runtime_reconcile_time_seconds_bucket{controller="etcdmember",le="1"} 100
controller_runtime_reconcile_time_seconds_bucket{controller="etcdmember",le="+Inf"} 100
controller_runtime_reconcile_time_seconds_sum{controller="etcdmember"} 1
controller_runtime_reconcile_time_seconds_count{controller="etcdmember"} 100
`)
	got := reconcileLatency(before, after)
	if got.count != 4 || math.Abs(got.p50-0.55) > 1e-9 || math.Abs(got.p99-0.991) > 1e-9 {
		t.Fatalf("reconcileLatency = %+v, want 4 reconciles, p50 0.55 s, p99 0.991 s", got)
	}
	if idle := reconcileLatency(after, after); idle.count != 0 || !math.IsNaN(idle.p50) {
		t.Fatalf("no reconcile between the scrapes: %+v, want 0 and NaN", idle)
	}
}
