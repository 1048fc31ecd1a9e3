// Command bench measures the operator against a floor measured in the same run: the same etcd
// image started by hand as a static cluster on the same Kubernetes cluster. A ratio to that
// floor says what the operator adds; an absolute time would mostly say how busy the machine
// was. It also times many clusters created at once, counts the operator's API requests and
// its memory with them at rest (the operator must write nothing then), and its memory once
// many objects not its own exist.
//
// It works on the cluster of $KUBECONFIG with the operator deployed; make bench starts the
// local cluster, deploys the operator, runs this and stops the cluster again. With -versus it
// times ours beside another operator instead (versus.go; hack/cozystack-side-by-side.sh).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"regexp"
	"syscall"
	"time"
)

type options struct {
	runs       int
	timeout    time.Duration
	clusters   int
	unrelated  int
	idleWarmup time.Duration
	idleWindow time.Duration
	// steps selects the timed steps by metric; nil runs them all.
	steps *regexp.Regexp
	// timedOnly skips the scale, at-rest and crowd steps after the timed runs.
	timedOnly bool
	// versus, when set, names another operator to time ours beside instead of the floor;
	// switchOperator is the command that makes one side's operator the running one.
	versus         rival
	switchOperator string
	// sweep, when set, runs the scale sweep on a simulated node instead of everything else:
	// the cluster counts to measure at, rising.
	sweep             []int
	sweepPerNamespace int
	sweepDelete       int
	simListen         string
}

func main() {
	var o options
	flag.IntVar(&o.runs, "runs", 3, "how often each time is measured; the median is reported")
	flag.DurationVar(&o.timeout, "timeout", 5*time.Minute, "longest wait for one cluster to be ready; an error after it")
	flag.IntVar(&o.clusters, "clusters", 100, "one-member clusters created at once for the scale step, then left idle while the operator's API requests are counted")
	flag.IntVar(&o.unrelated, "unrelated", 5000, "Secrets and Pods (half each) of no cluster created in other namespaces, to see whether the operator's memory grows with them")
	flag.DurationVar(&o.idleWarmup, "idle-warmup", 15*time.Second, "wait between the idle clusters being Available and counting")
	flag.DurationVar(&o.idleWindow, "idle-window", 2*time.Minute, "how long the operator's API writes are counted at rest")
	stepsPattern := flag.String("steps", "", "run only the timed steps whose metric matches this regular expression (and the earlier steps on the same cluster they continue from), e.g. '^bootstrap'")
	flag.BoolVar(&o.timedOnly, "timed-only", false, "skip the scale, at-rest and crowd steps (which take about 15 minutes) after the timed runs")
	sweep := flag.String("sweep", "", "instead of the other steps, raise the number of one-member clusters on a simulated node (no etcd processes: test/etcdsim) to each of these counts, e.g. 500,1000,2500,5000, measuring the operator at rest at each")
	flag.IntVar(&o.sweepPerNamespace, "sweep-per-namespace", 10, "the sweep's clusters per namespace")
	flag.IntVar(&o.sweepDelete, "sweep-delete", 500, "how many of the sweep's clusters are deleted at once at its end")
	flag.StringVar(&o.simListen, "sim-listen", "10.213.0.1:2379", "where the etcd simulator answers; its host is the address the simulated node's Pods report, so it must be reachable from the operator's Pod (the local cluster's bridge address)")
	versus := flag.String("versus", "", "instead of the floor and the steps after the timed runs, time ours beside another operator of the same API, one after the other, on a stopwatch of Kubernetes and etcd alone: "+
		"bootstrap of 3, a follower's Pod lost, scale-out 3 -> 5. NAME[@VERSION]; the one NAME known is cozystack (Cozystack's etcd-operator); VERSION only labels the report. hack/cozystack-side-by-side.sh runs it")
	flag.StringVar(&o.switchOperator, "switch-operator", "", "with -versus: the command that makes one side's operator the only one running, run with the side (ours, or the -versus NAME) as its last argument whenever the side changes; the last side is left running")
	flag.Parse()
	if err := o.parse(*stepsPattern, *versus, *sweep); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// The first signal cancels the run, which still starts its clean-up; a second one ends
	// the process at once.
	context.AfterFunc(ctx, stop)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// parse reads the flags given as text.
func (o *options) parse(stepsPattern, versus, sweep string) error {
	var err error
	if o.sweep, err = parseCounts(sweep); err != nil {
		return fmt.Errorf("-sweep: %w", err)
	}
	if stepsPattern != "" {
		re, err := regexp.Compile(stepsPattern)
		if err != nil {
			return fmt.Errorf("-steps: %w", err)
		}
		o.steps = re
	}
	if versus == "" {
		return nil
	}
	if o.versus, err = parseRival(versus); err != nil {
		return fmt.Errorf("-versus: %w", err)
	}
	if o.switchOperator == "" {
		return errors.New("-versus needs -switch-operator: the bench cannot swap the operators itself")
	}
	return nil
}

func run(ctx context.Context, o options) error {
	started := time.Now()
	b, err := newBench(o)
	if err != nil {
		return err
	}
	// A previous bench's clusters (KEEP_CLUSTER=1) are gone before anything is measured.
	b.clearNamespaces(ctx)
	// Whatever happens, the deletion of everything the bench made is started, also after a
	// signal, but not waited for: hundreds of clusters take minutes to go, hack/bench.sh
	// stops the local cluster next anyway, and the next bench waits for any left over.
	defer func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if _, err := b.deleteNamespaces(ctx); err != nil {
			logf("deleting the bench's namespaces: %v", err)
		}
	}()
	switch {
	case o.versus.name != "":
		return b.sideBySide(ctx, started)
	case len(o.sweep) > 0:
		return b.runSweep(ctx, started)
	}
	return b.againstFloor(ctx, started)
}

// againstFloor is the bench proper: the timed steps beside the floor, then the steps at scale.
func (b *bench) againstFloor(ctx context.Context, started time.Time) error {
	o := b.opts
	first, err := b.operatorMetrics(ctx)
	if err != nil {
		return err
	}
	b.operatorStarted = first.value(processStarted)
	times := newSamples()
	for i := range o.runs {
		logf("run %d of %d", i+1, o.runs)
		if err := b.timedRun(ctx, i, times); err != nil {
			return err
		}
	}
	var r report
	var scaleErr error
	if !o.timedOnly {
		// What the steps measured before one failed is still reported (a teardown that
		// stalled comes after the scale and rest steps).
		r, scaleErr = b.atScale(ctx)
	}
	if err := printReport(os.Stdout, o, times, r, time.Since(started)); err != nil {
		return err
	}
	if scaleErr != nil {
		return scaleErr
	}
	// Zero writes at rest is a requirement, not a speed: a cluster at rest must cost nothing.
	if rest := r.rest; rest != nil && len(rest.operatorWrites) > 0 {
		return fmt.Errorf("the operator wrote to the API with every cluster at rest: %v per verb (the apiserver's count names the resources)", rest.operatorWrites)
	}
	return nil
}

// atScale runs the steps after the timed runs: many clusters at once, then at rest, then
// among many unrelated objects.
func (b *bench) atScale(ctx context.Context) (report, error) {
	many, err := b.scale(ctx)
	if err != nil {
		return report{}, err
	}
	rest, err := b.idle(ctx)
	if err != nil {
		return report{scale: many}, err
	}
	crowded, err := b.crowdIn(ctx)
	if err != nil {
		return report{scale: many, rest: rest}, err
	}
	gone, err := b.tearDown(ctx)
	return report{many, rest, crowded, gone}, err
}

// logf reports progress on stderr; the report alone goes to stdout.
func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[bench %s] %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}
