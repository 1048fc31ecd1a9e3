package main

import (
	"strings"
	"testing"
	"time"
)

// A teardown that stalled says so and what was left, rather than a time that reads as done.
func TestTeardownReportSaysWhetherItStalled(t *testing.T) {
	cases := []struct {
		name string
		t    teardown
		want string
	}{
		{"gone", teardown{clusters: 102, took: 41500 * time.Millisecond}, "102 clusters' namespaces deleted at once, until no namespace, EtcdCluster or EtcdMember is left\t41.5s"},
		{"stalled", teardown{clusters: 102, took: 600 * time.Second, stalled: "left: 102 EtcdMembers"}, "\tNOT gone after 600s: left: 102 EtcdMembers"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			writeTeardown(&b, &tc.t)
			if !strings.Contains(b.String(), tc.want) {
				t.Fatalf("report %q, want it to contain %q", b.String(), tc.want)
			}
		})
	}
}

// A deletion stalls when nothing more has gone for stallAfter, however long it has taken.
func TestADeletionStallsOnlyWhenNothingMoreGoes(t *testing.T) {
	t0 := time.Now()
	var p progress
	for _, step := range []struct {
		left    int
		after   time.Duration
		stalled bool
	}{
		{left: 4500, after: 0},
		{left: 4500, after: stallAfter - time.Second},
		{left: 4400, after: stallAfter + time.Second}, // slow, but going
		{left: 10, after: 4 * stallAfter},
		{left: 10, after: 5*stallAfter - time.Second},
		{left: 10, after: 5 * stallAfter, stalled: true},
	} {
		if got := p.stalled(step.left, t0.Add(step.after)); got != step.stalled {
			t.Fatalf("%d left after %s: stalled %v, want %v", step.left, step.after, got, step.stalled)
		}
	}
}
