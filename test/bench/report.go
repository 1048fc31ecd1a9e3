package main

import (
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/quorumkeeper/etcd-operator/test/bench/stats"
)

// samples are the measured times by metric and side, metrics in the order first measured.
type samples struct {
	metrics []string
	times   map[string]map[string][]time.Duration
	// milestones are the traced steps' milestones by metric and side, one per run.
	milestones map[string]map[string][]reachedAt
}

func newSamples() *samples {
	return &samples{times: map[string]map[string][]time.Duration{}, milestones: map[string]map[string][]reachedAt{}}
}

func (s *samples) addMilestones(metric, side string, at reachedAt) {
	if at == nil {
		return
	}
	if s.milestones[metric] == nil {
		s.milestones[metric] = map[string][]reachedAt{}
	}
	s.milestones[metric][side] = append(s.milestones[metric][side], at)
}

func (s *samples) add(metric, side string, d time.Duration) {
	s.declare(metric)
	s.times[metric][side] = append(s.times[metric][side], d)
}

// declare gives the metric its place in the report, also when no side ever measures it.
func (s *samples) declare(metric string) {
	if s.times[metric] == nil {
		s.metrics = append(s.metrics, metric)
		s.times[metric] = map[string][]time.Duration{}
	}
}

// printReport writes the report with its tab-separated columns aligned; lines without tabs
// (titles) do not take part in the alignment.
func printReport(w io.Writer, o options, times *samples, r report, took time.Duration) error {
	return printAligned(w, formatReport(o, times, r, took))
}

// printAligned writes a report with its tab-separated columns aligned.
func printAligned(w io.Writer, report string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if _, err := io.WriteString(tw, report); err != nil {
		return err
	}
	return tw.Flush()
}

// report is what the steps after the timed runs measured.
type report struct {
	scale *atScale
	rest  *atRest
	crowd *crowd
	gone  *teardown
}

func formatReport(o options, times *samples, r report, took time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\netcd-operator bench: etcd %s, %d CPUs, median of %d runs\n", etcdVersion, runtime.NumCPU(), o.runs)
	fmt.Fprintln(&b, "floor: the same etcd Pods started by hand as a static cluster, on the same cluster, in the same run")
	fmt.Fprintln(&b)
	writeComparison(&b, times, operator, floor)
	writeReplacement(&b, times)
	writeMilestones(&b, times)

	if r.scale != nil {
		writeScale(&b, r.scale)
	}
	if r.rest != nil && r.crowd != nil {
		writeAtRest(&b, r.rest, r.crowd)
	}
	if r.gone != nil {
		writeTeardown(&b, r.gone)
	}
	fmt.Fprintf(&b, "\nbench took %s\n", took.Round(time.Second))
	return b.String()
}

// writeComparison sets each metric's times of one side beside those of another, the
// reference: medians, the ratio of the two, the spreads and every run. A side with no time
// for a metric (its step failed, or came after one that did) shows "-".
func writeComparison(b *strings.Builder, times *samples, side, reference string) {
	fmt.Fprintf(b, "metric\t%[1]s\t%[2]s\t%[1]s/%[2]s\tspread (max-min)\t%[1]s runs (s)\t%[2]s runs (s)\n", side, reference)
	for _, metric := range times.metrics {
		of, ref := times.times[metric][side], times.times[metric][reference]
		ratio := "-"
		if len(of) > 0 && len(ref) > 0 {
			ratio = fmt.Sprintf("%.2f", stats.Median(of).Seconds()/stats.Median(ref).Seconds())
		}
		fmt.Fprintf(b, "%s\t%s\t%s\t%s\t%s / %s\t%s\t%s\n", metric, cell(of, median), cell(ref, median), ratio,
			cell(of, spread), cell(ref, spread), cell(of, stats.Seconds), cell(ref, stats.Seconds))
	}
}

// cell renders samples with show, or "-" when there are none.
func cell(ds []time.Duration, show func([]time.Duration) string) string {
	if len(ds) == 0 {
		return "-"
	}
	return show(ds)
}

func median(ds []time.Duration) string { return fmt.Sprintf("%.2fs", stats.Median(ds).Seconds()) }
func spread(ds []time.Duration) string { return fmt.Sprintf("%.1fs", stats.Spread(ds).Seconds()) }

// writeTeardown reports the deletion of every cluster at once, or that it stalled.
func writeTeardown(b *strings.Builder, t *teardown) {
	gone := fmt.Sprintf("%.1fs", t.took.Seconds())
	if t.stalled != "" {
		gone = fmt.Sprintf("NOT gone after %.0fs: %s", t.took.Seconds(), t.stalled)
	}
	fmt.Fprintf(b, "\nteardown: %d clusters' namespaces deleted at once, until no namespace, EtcdCluster or EtcdMember is left\t%s\n", t.clusters, gone)
}

func total(counts map[string]float64) float64 {
	var sum float64
	for _, n := range counts {
		sum += n
	}
	return sum
}

// writeKinds names each kind of write there was, so that writes at rest can be traced.
func writeKinds(b *strings.Builder, writes map[string]float64, perMinute func(float64) float64) {
	kinds := make([]string, 0, len(writes))
	for k := range writes {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	for _, k := range kinds {
		fmt.Fprintf(b, "  %s\t%.1f\n", k, perMinute(writes[k]))
	}
}

// writeReplacement sets the operator's time from a member's data wiped to a healthy
// replacement beside one learner step by hand (the floor's scale-out): what a replacement
// costs beyond the join it cannot avoid.
func writeReplacement(b *strings.Builder, times *samples) {
	if len(times.times[metricWiped][operator]) == 0 || len(times.times[metricLearnerStep][floor]) == 0 {
		return // not measured this time (-steps)
	}
	wiped, learner := stats.Median(times.times[metricWiped][operator]), stats.Median(times.times[metricLearnerStep][floor])
	fmt.Fprintf(b, "\ndata wiped -> healthy replacement (operator)\t%.2fs\t%.2f x one learner step by hand (%s, floor: %.2fs)\n",
		wiped.Seconds(), wiped.Seconds()/learner.Seconds(), metricLearnerStep, learner.Seconds())
}

// writeMilestones sets each traced step's milestones of both sides side by side: where the
// operator's time goes beyond the floor's is between two rows whose gap differs.
func writeMilestones(b *strings.Builder, times *samples) {
	for _, metric := range times.metrics {
		bySide := times.milestones[metric]
		if bySide == nil {
			continue
		}
		fmt.Fprintf(b, "\n%s: when every member reached each milestone (s after the act; median of runs, runs)\n", metric)
		for _, m := range bootstrapMilestones {
			fmt.Fprintf(b, "  %s\t%s\t%s\n", m.name, milestoneRuns(bySide[operator], m.name), milestoneRuns(bySide[floor], m.name))
		}
	}
}

// milestoneRuns is the median time of one milestone over the runs that reached it, and
// every run's ("-" where a run did not), or "-" when none did.
func milestoneRuns(runs []reachedAt, name string) string {
	var reached []time.Duration
	each := make([]string, len(runs))
	for i, at := range runs {
		d, ok := at[name]
		if !ok {
			each[i] = "-"
			continue
		}
		reached = append(reached, d)
		each[i] = fmt.Sprintf("%.1f", d.Seconds())
	}
	if len(reached) == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f (%s)", stats.Median(reached).Seconds(), strings.Join(each, " "))
}

// String lists the milestones reached, in order, for the progress log.
func (at reachedAt) String() string {
	var parts []string
	for _, m := range bootstrapMilestones {
		if d, ok := at[m.name]; ok {
			parts = append(parts, fmt.Sprintf("%s %.1f", m.name, d.Seconds()))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

// writeScale reports the clusters created at once beside one alone: the ratio to n times one
// cluster says how much the operator works on them side by side (1 would be one after the
// other).
func writeScale(b *strings.Builder, s *atScale) {
	one := stats.Median(s.one)
	fmt.Fprintf(b, "\nscale: %d one-member clusters created at once\n", s.clusters)
	fmt.Fprintf(b, "one cluster alone, to Available\t%.2fs\truns (s): %s\n", one.Seconds(), stats.Seconds(s.one))
	fmt.Fprintf(b, "all %d, to every one Available\t%.2fs\tratio to %d x one alone: %.3f\n", s.clusters, s.all.Seconds(), s.clusters, s.all.Seconds()/(float64(s.clusters)*one.Seconds()))
	fmt.Fprintf(b, "reconcile latency meanwhile (EtcdCluster)\tp50 %s\tp99 %s\t%.0f reconciles\n", ms(s.burst.p50), ms(s.burst.p99), s.burst.count)
}

// ms renders seconds as milliseconds; a NaN (no reconcile) as "-".
func ms(seconds float64) string {
	if math.IsNaN(seconds) {
		return "-"
	}
	return fmt.Sprintf("%.0f ms", seconds*1000)
}

// writeAtRest reports the at-rest step and the crowd step after it.
func writeAtRest(b *strings.Builder, rest *atRest, c *crowd) {
	perMinute := func(n float64) float64 { return n / rest.window.Minutes() }
	fmt.Fprintf(b, "\nat rest: %d one-member clusters, API requests counted for %s once all were Available (floor: 0 writes)\n",
		rest.clusters, rest.window.Round(time.Second))
	fmt.Fprintf(b, "operator API requests/min, reads included\t%.1f\n", perMinute(total(rest.requests)))
	writeKinds(b, rest.requests, perMinute)
	fmt.Fprintf(b, "reconcile latency at rest (EtcdCluster)\tp50 %s\tp99 %s\t%.0f reconciles\n", ms(rest.reconcile.p50), ms(rest.reconcile.p99), rest.reconcile.count)
	fmt.Fprintf(b, "operator API writes/min\t%.1f\tLease renewals for leader election left out: %.1f/min\n",
		perMinute(total(rest.operatorWrites)), perMinute(float64(rest.leaseRenewals)))
	writeKinds(b, rest.operatorWrites, perMinute)
	fmt.Fprintf(b, "operator resident memory\t%.1f MiB\n", rest.rssBytes/(1<<20))
	fmt.Fprintf(b, "apiserver writes/min\t%.1f\tevery client; Leases and Nodes (heartbeats) left out\n", perMinute(total(rest.apiserverWrites)))
	writeKinds(b, rest.apiserverWrites, perMinute)
	fmt.Fprintf(b, "\nwith %d unrelated Secrets and %d unrelated Pods in %d other namespaces\n", c.secrets, c.pods, unrelatedNamespaces)
	fmt.Fprintf(b, "operator resident memory\t%.1f MiB\tbefore: %.1f MiB\n", c.rssBytes/(1<<20), rest.rssBytes/(1<<20))
	fmt.Fprintf(b, "operator heap in use\t%.1f MiB\tbefore: %.1f MiB\n", c.heapBytes/(1<<20), rest.heapBytes/(1<<20))
}
