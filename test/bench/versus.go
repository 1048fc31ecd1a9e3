package main

// The side-by-side comparison (-versus): our operator beside another operator that serves the
// same API, each alone on the cluster in its turn, timed by one stopwatch that reads only
// Kubernetes and etcd. The bench cannot install or remove operators (the other one's CRDs
// replace ours while it runs): a command from the caller (-switch-operator) does that.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"github.com/quorumkeeper/etcd-operator/internal/etcd"
)

// The sides of a side-by-side run: ours, and the other operator by its -versus name.
const (
	ours      = "ours"
	cozystack = "cozystack"
)

// rivals are the operators the bench can time ours beside, by -versus name: what the report
// calls them.
var rivals = map[string]string{
	cozystack: "Cozystack's etcd-operator (github.com/cozystack/etcd-operator)",
}

// rival is the operator timed beside ours.
type rival struct {
	name    string // a key of rivals: the side's name in the report and for -switch-operator
	version string // labels the report only; the caller installed that version
}

// parseRival reads -versus: NAME or NAME@VERSION.
func parseRival(s string) (rival, error) {
	name, version, pinned := strings.Cut(s, "@")
	if _, known := rivals[name]; !known {
		return rival{}, fmt.Errorf("no operator %q to compare with (known: %s)", name, cozystack)
	}
	if pinned && version == "" {
		return rival{}, fmt.Errorf("%q: no version after @", s)
	}
	return rival{name: name, version: version}, nil
}

func (r rival) String() string {
	if r.version == "" {
		return rivals[r.name]
	}
	return rivals[r.name] + " " + r.version
}

// versusSteps are what each side does on one new cluster per run, in order: the follower
// whose Pod is lost is one of the 3, and the scale-out is one change of spec.replicas.
var versusSteps = []step{
	{"bootstrap, 3 members", "versus", 3, bootstrap(3, etcdVersion), false},
	{"Pod loss, 3 members", "versus", 3, loseFollowerOf(3), false},
	{"scale-out 3 -> 5", "versus", 5, growTo(5), false},
}

// sideBySide times the steps for ours and the rival, the rival's times set beside ours. The
// sides take turns (each turn one cluster through every step), and which goes first
// alternates between runs, so that a slow moment of the shared machine does not fall on one
// side only; the alternation also saves a switch of operators between runs.
func (b *bench) sideBySide(ctx context.Context, started time.Time) error {
	o := b.opts
	chosen := selectSteps(versusSteps, o.steps)
	times, failed := newSamples(), &failures{}
	for _, st := range chosen {
		times.declare(st.metric)
	}
	sw := &switcher{command: o.switchOperator}
	for i := range o.runs {
		logf("run %d of %d", i+1, o.runs)
		for _, side := range sideOrder(i, ours, o.versus.name) {
			if err := sw.to(ctx, side); err != nil {
				return err
			}
			if err := b.turn(ctx, side, i, chosen, times, failed); err != nil {
				return err
			}
		}
	}
	return printAligned(os.Stdout, formatVersus(o, times, *failed, time.Since(started)))
}

// turn takes one side's new cluster through the steps in order. A step that does not settle
// is reported, not fatal: the steps after it, which continue from it, are left out of this
// run, and the other side still takes its turn. Its namespace is gone when turn returns, so
// that the next switch finds no cluster of either operator.
func (b *bench) turn(ctx context.Context, side string, run int, chosen []step, times *samples, failed *failures) error {
	defer b.clearNamespaces(ctx)
	s, err := b.versusSubject(ctx, side)
	if err != nil {
		return err
	}
	for i, st := range chosen {
		if i > 0 {
			if err := b.atRest(ctx, s.namespace()); err != nil {
				return err
			}
		}
		d, _, err := b.measure(ctx, st, s)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			logf("%-9s %-22s FAILED: %v", side, st.metric, err)
			failed.add(side, run, chosen[i:], err)
			return nil
		}
		logf("%-9s %-22s %6.2fs", side, st.metric, d.Seconds())
		times.add(st.metric, side, d)
	}
	return nil
}

func (b *bench) versusSubject(ctx context.Context, side string) (subject, error) {
	ns, err := b.namespace(ctx, side)
	if err != nil {
		return nil, err
	}
	if side == ours {
		return oursOnStopwatch{&operated{b: b, ns: ns}}, nil
	}
	return &cozystackCluster{b: b, ns: ns}, nil
}

// oursOnStopwatch is our EtcdCluster settled by the side-by-side stopwatch rather than by its
// status, which the other operator does not write the same way.
type oursOnStopwatch struct{ *operated }

func (s oursOnStopwatch) settled(ctx context.Context, n int) error {
	return s.b.votersServing(ctx, s.ns, n)
}

// votersServing is the side-by-side stopwatch, the same for both operators and read from
// Kubernetes and etcd alone: n Pods Ready, etcd's member list n started voters, and every
// member answering a quorum read.
func (b *bench) votersServing(ctx context.Context, ns string, n int) error {
	return b.servingAnd(ctx, ns, n, func(cli etcd.Client) error {
		_, list, err := cli.MemberList(ctx)
		if err != nil {
			return err
		}
		return allVoters(list, n)
	})
}

// allVoters is nil when etcd lists exactly n members, every one a voter that has started.
func allVoters(list []etcd.Member, n int) error {
	if len(list) != n {
		return fmt.Errorf("etcd lists %d members, want %d voters", len(list), n)
	}
	for _, m := range list {
		switch {
		case m.IsLearner:
			return fmt.Errorf("member %s is a learner", m.IDHex())
		case m.Name == "":
			return fmt.Errorf("member %s has not started", m.IDHex())
		}
	}
	return nil
}

// switcher makes one side's operator the only one running, through the caller's command; the
// side already running is left as it is.
type switcher struct {
	command string
	active  string
}

func (s *switcher) to(ctx context.Context, side string) error {
	if s.active == side {
		return nil
	}
	argv, err := switchArgs(s.command, side)
	if err != nil {
		return err
	}
	logf("switching to %s: %s", side, strings.Join(argv, " "))
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr // the report alone goes to stdout
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("switching to %s (%s): %w", side, strings.Join(argv, " "), err)
	}
	s.active = side
	return nil
}

// switchArgs is the command line that switches to side: the -switch-operator words, then the
// side.
func switchArgs(command, side string) ([]string, error) {
	words := strings.Fields(command)
	if len(words) == 0 {
		return nil, errors.New("no -switch-operator command")
	}
	return append(words, side), nil
}

// failures are the steps a side did not get through, and those it left out after them.
type failures []failure

type failure struct {
	side, metric string
	run          int
	why          string
}

// add records the first of steps as failed with err and the others as left out after it.
func (f *failures) add(side string, run int, steps []step, err error) {
	for i, st := range steps {
		why := err.Error()
		if i > 0 {
			why = "left out: it continues from " + steps[0].metric
		}
		*f = append(*f, failure{side: side, metric: st.metric, run: run, why: why})
	}
}

// formatVersus is the side-by-side report: the rival's times beside ours, with tab-separated
// columns for a tabwriter.
func formatVersus(o options, times *samples, failed failures, took time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\netcd-operator side by side: ours beside %s; etcd %s, %d CPUs, median of %d runs\n", o.versus, etcdVersion, runtime.NumCPU(), o.runs)
	fmt.Fprintln(&b, "stopwatch, the same for both: from the act until n Pods are Ready, etcd lists n started voters, and every member answers a quorum read (no operator's status is read)")
	fmt.Fprintln(&b, "each operator alone on the cluster in its turn (the other one scaled to 0); per run and side one new cluster: bootstrap, a follower's Pod lost, scale-out")
	fmt.Fprintln(&b)
	writeComparison(&b, times, o.versus.name, ours)
	if len(failed) > 0 {
		fmt.Fprintln(&b, "\nnot measured:")
		for _, f := range failed {
			fmt.Fprintf(&b, "  %s, %s, run %d\t%s\n", f.side, f.metric, f.run+1, f.why)
		}
	}
	fmt.Fprintf(&b, "\nbench took %s\n", took.Round(time.Second))
	return b.String()
}
