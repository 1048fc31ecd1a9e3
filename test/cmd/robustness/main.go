// Command scenarios runs the robustness scenarios on the cluster of $KUBECONFIG (with the
// operator deployed): for each, an EtcdCluster, a recorded workload through its client
// Service, operations and faults injected while it runs, then the checks of
// test/robustness. It prints one table row per scenario and exits non-zero when any check
// found a violation or a scenario could not run. make robustness starts the local cluster,
// deploys the operator, runs this and stops the cluster again.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

type options struct {
	trials    int
	seed      uint64
	scenarios string
	clients   int
}

func main() {
	var o options
	flag.IntVar(&o.trials, "trials", 1, "faults injected per scenario (at least what a scenario needs to cover its steps)")
	flag.Uint64Var(&o.seed, "seed", uint64(time.Now().UnixNano()), "seed of every random choice; printed, so that a run can be replayed")
	flag.StringVar(&o.scenarios, "scenarios", "", "comma-separated scenario names (default: all)")
	flag.IntVar(&o.clients, "clients", 3, "workload clients")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logf("seed %d (replay with -seed %d, or ROBUSTNESS_SEED=%d make robustness)", o.seed, o.seed, o.seed)
	rows, err := run(ctx, o)
	printTable(os.Stdout, rows)
	if err == nil {
		err = violations(rows)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "robustness (seed %d): %v\n", o.seed, err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) ([]row, error) {
	e, err := newEnv()
	if err != nil {
		return nil, err
	}
	var rows []row
	defer e.waitDeleted(context.WithoutCancel(ctx))
	for i, s := range selected(o.scenarios) {
		seed := o.seed + uint64(i)
		logf("scenario %s: %d trials, seed %d", s.name, s.trials(o.trials), seed)
		r, err := e.runScenario(ctx, s, o, seed)
		rows = append(rows, r)
		if err != nil {
			return rows, fmt.Errorf("scenario %s: %w", s.name, err)
		}
	}
	return rows, nil
}

func selected(names string) []scenario {
	if names == "" {
		return allScenarios
	}
	var out []scenario
	for _, s := range allScenarios {
		for _, n := range strings.Split(names, ",") {
			if s.name == strings.TrimSpace(n) {
				out = append(out, s)
			}
		}
	}
	return out
}

// logf reports progress on stderr; the table alone goes to stdout.
func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[robustness %s] %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}
