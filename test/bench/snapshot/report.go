package main

import (
	"fmt"
	"io"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/quorumkeeper/etcd-operator/test/bench/stats"
)

// results are the costs measured, by metric and side, in the order measured.
type results struct {
	costs map[string]map[string][]cost
	// idle is the agent's cost with nothing to do.
	idle cost
}

func newResults() *results { return &results{costs: map[string]map[string][]cost{}} }

func (r *results) add(metric, side string, c cost) {
	if r.costs[metric] == nil {
		r.costs[metric] = map[string][]cost{}
	}
	r.costs[metric][side] = append(r.costs[metric][side], c)
}

func (r *results) walls(metric, side string) []time.Duration {
	var ds []time.Duration
	for _, c := range r.costs[metric][side] {
		ds = append(ds, c.wall)
	}
	return ds
}

// peaks is each sample's peak in MiB, as pick reads it from the cost.
func (r *results) peaks(metric, side string, pick func(cost) int64) []float64 {
	var ps []float64
	for _, c := range r.costs[metric][side] {
		ps = append(ps, mib(pick(c)))
	}
	return ps
}

func peak(c cost) int64     { return c.peak }
func anon(c cost) int64     { return c.anon }
func treePeak(c cost) int64 { return c.treePeak }

// The targets of the project's issue 10: printed beside the figures, never enforced.
var (
	timeTargets = map[string]string{snapshotMetric: "<= 1.2", restoreMetric: "<= 1.3"}
	memTarget   = "< 64 MiB, flat in the database size"
)

// printReport writes the report with its tab-separated columns aligned.
func printReport(w io.Writer, b *bench, r *results, took time.Duration) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if _, err := io.WriteString(tw, formatReport(b, r, took)); err != nil {
		return err
	}
	return tw.Flush()
}

func formatReport(b *bench, r *results, took time.Duration) string {
	var s strings.Builder
	fmt.Fprintf(&s, "\netcd-operator snapshot bench: etcd %s, database %.1f MiB (%d keys of %d KiB), %d CPUs, median of %d runs\n",
		b.db.version, mib(b.db.sizeBytes), b.db.keys, b.o.valueKiB, runtime.NumCPU(), b.o.runs)
	fmt.Fprintln(&s, "by hand: etcdctl snapshot save, then mc cp of the file (snapshot); mc cp of the agent's object, then etcdutl snapshot restore (restore)")
	fmt.Fprintln(&s, "same etcd, MinIO (http on loopback) and machine, in the same run; which side goes first alternates")
	fmt.Fprintln(&s)
	fmt.Fprintln(&s, "metric\tagent\tby hand\tagent/by hand\ttarget\tagent runs (s)\tby-hand runs (s)")
	for _, m := range metrics {
		ag, hd := r.walls(m, agentSide), r.walls(m, handSide)
		ma, mh := stats.Median(ag), stats.Median(hd)
		fmt.Fprintf(&s, "%s\t%.2fs\t%.2fs\t%.2f\t%s\t%s\t%s\n", m, ma.Seconds(), mh.Seconds(), ma.Seconds()/mh.Seconds(),
			timeTargets[m], stats.Seconds(ag), stats.Seconds(hd))
	}
	fmt.Fprintf(&s, "\npeak resident memory (MiB)\tagent, largest\tagent runs\tof it anonymous, largest\tby hand, largest process\ttarget\n")
	for _, m := range metrics {
		ag := r.peaks(m, agentSide, peak)
		fmt.Fprintf(&s, "%s\t%.1f\t%s\t%.1f\t%.1f\t%s\n", m, maxOf(ag), floats(ag), maxOf(r.peaks(m, agentSide, anon)),
			maxOf(r.peaks(m, handSide, peak)), memTarget)
	}
	fmt.Fprintf(&s, "agent with nothing to do\t%.1f\t\t%.1f\n", mib(r.idle.peak), mib(r.idle.anon))
	fmt.Fprintf(&s, "resident memory is VmHWM (the binary's own pages count: the rest beside the anonymous part); the restore agent's is polled\n")
	fmt.Fprintf(&s, "every %s, its own; with etcdutl, the child it waits for: %.1f MiB\n", hwmPoll, maxOf(r.peaks(restoreMetric, agentSide, treePeak)))
	fmt.Fprintf(&s, "\nbench took %s\n", took.Round(time.Second))
	return s.String()
}

func maxOf(xs []float64) float64 {
	var m float64
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

func floats(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf("%.1f", x)
	}
	return strings.Join(parts, " ")
}
