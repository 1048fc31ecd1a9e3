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
		{"stalled", teardown{clusters: 102, took: teardownTimeout, stalled: "left: 102 EtcdMembers"}, "\tNOT gone after 600s: left: 102 EtcdMembers"},
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
