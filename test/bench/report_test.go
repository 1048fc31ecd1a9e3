package main

import (
	"strings"
	"testing"
	"time"
)

// The floor's table keeps its columns: the operator first, the floor as the reference.
func TestFloorTable(t *testing.T) {
	times := newSamples()
	times.add("bootstrap, 3 members", operator, 4*time.Second)
	times.add("bootstrap, 3 members", floor, 2*time.Second)
	got := formatReport(options{runs: 1}, times, report{}, time.Minute)
	want := "metric\toperator\tfloor\toperator/floor\tspread (max-min)\toperator runs (s)\tfloor runs (s)\n" +
		"bootstrap, 3 members\t4.00s\t2.00s\t2.00\t0.0s / 0.0s\t4.0\t2.0\n"
	if !strings.Contains(got, want) {
		t.Fatalf("report\n%s\nlacks the table\n%s", got, want)
	}
}
