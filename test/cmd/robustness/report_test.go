package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestTableAndVerdict(t *testing.T) {
	clean := row{scenario: "pod-delete", operations: 120, faults: 3, trials: 3}
	var out bytes.Buffer
	printTable(&out, []row{clean})
	if !strings.Contains(out.String(), "lost acknowledged writes") || !strings.Contains(out.String(), "restore violations") || !strings.Contains(out.String(), "pod-delete") {
		t.Fatalf("table:\n%s", out.String())
	}
	if err := violations([]row{clean}); err != nil {
		t.Fatalf("a clean run fails: %v", err)
	}
	for _, bad := range []row{
		{scenario: "a", linearizable: 1},
		{scenario: "b", watch: 2},
		{scenario: "c", lost: 1, details: []string{"lost: k=v@3"}},
		{scenario: "d", unchecked: true},
		{scenario: "e", restores: 2, archive: 1, details: []string{"after store unreachable, at-2-latest restored to revision 90: k: missing"}},
	} {
		if err := violations([]row{clean, bad}); err == nil || !strings.Contains(err.Error(), bad.scenario) {
			t.Fatalf("%+v passes: %v", bad, err)
		}
	}
}
