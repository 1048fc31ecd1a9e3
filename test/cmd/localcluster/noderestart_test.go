package main

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// The node-crash request of older callers keeps its meaning; shutdown, eviction, removal and
// the return of a removed node are asked in the same file.
func TestParseNodeRequest(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		want nodeRequest
		bad  bool
	}{
		{raw: "node-2 15\n", want: nodeRequest{node: "node-2", fault: faultCrash, down: 15 * time.Second}},
		{raw: "node-1 8 shutdown\n", want: nodeRequest{node: "node-1", fault: faultShutdown, down: 8 * time.Second}},
		{raw: "node-3 evict e2e-x/db-2\n", want: nodeRequest{node: "node-3", fault: faultEvict, pod: types.NamespacedName{Namespace: "e2e-x", Name: "db-2"}}},
		{raw: "node-2 remove\n", want: nodeRequest{node: "node-2", fault: faultRemove}},
		{raw: "node-2 add", want: nodeRequest{node: "node-2", fault: faultAdd}},
		{raw: "node-2 remove 5", bad: true},
		{raw: "node-3 evict db-2", bad: true},
		{raw: "node-3 evict /db-2", bad: true},
		{raw: "node-1 8 reboot", bad: true},
		{raw: "node-1 601", bad: true},
		{raw: "node-1 -1", bad: true},
		{raw: "node-1", bad: true},
		{raw: "", bad: true},
	} {
		got, err := parseNodeRequest(tc.raw)
		if tc.bad {
			if err == nil {
				t.Errorf("%q: parsed as %+v, want an error", tc.raw, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: %+v, %v; want %+v", tc.raw, got, err, tc.want)
		}
	}
}
