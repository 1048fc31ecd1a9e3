package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// row is one scenario's result.
type row struct {
	scenario     string
	operations   int
	faults       int
	trials       int
	linearizable int // keys whose history is not linearizable
	unchecked    bool
	watch        int // watch violations
	lost         int // acknowledged writes lost
	restores     int // clusters restored from the archive and checked
	archive      int // restore violations: a window claimed that did not restore as recorded
	details      []string
}

func printTable(w io.Writer, rows []row) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	_, _ = fmt.Fprintln(tw, "scenario\toperations\tfaults\ttrials\tlinearizability violations\twatch violations\tlost acknowledged writes\trestores\trestore violations")
	for _, r := range rows {
		lin := fmt.Sprint(r.linearizable)
		if r.unchecked {
			lin += " (checker timed out)"
		}
		_, _ = fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%d\t%d\t%d\t%d\n", r.scenario, r.operations, r.faults, r.trials, lin, r.watch, r.lost, r.restores, r.archive)
	}
	_ = tw.Flush()
	for _, r := range rows {
		for _, d := range r.details {
			_, _ = fmt.Fprintf(w, "%s: %s\n", r.scenario, d)
		}
	}
}

// violations is an error naming the scenarios with any violation, or with a history the
// checker could not decide.
func violations(rows []row) error {
	var bad []string
	for _, r := range rows {
		if r.linearizable+r.watch+r.lost+r.archive > 0 || r.unchecked {
			bad = append(bad, r.scenario)
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("violations in %s", strings.Join(bad, ", "))
	}
	return nil
}
