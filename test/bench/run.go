package main

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// subject is one etcd cluster under measurement: run by the operator, or by hand (the floor).
type subject interface {
	// start creates n founding members running etcd version.
	start(ctx context.Context, n int, version string) error
	// upgrade restarts every member on etcd version, one at a time, the leader last.
	upgrade(ctx context.Context, version string) error
	// replaceWiped replaces the member whose data was wiped (its Pod deleted, the empty
	// volume left) with a fresh one. The operator does it by itself.
	replaceWiped(ctx context.Context, pod string, id uint64) error
	// grow adds one member, making n.
	grow(ctx context.Context, n int) error
	// shrink removes one member, leaving n.
	shrink(ctx context.Context, n int) error
	// losePod deletes a member's Pod. By hand, it is also recreated, as a person would.
	losePod(ctx context.Context, pod string) error
	// settled is nil once n members serve, as this subject's user sees it.
	settled(ctx context.Context, n int) error
	namespace() string
}

// Who runs a subject.
const (
	operator = "operator"
	floor    = "floor"
)

// step is one measured operation: from act to the subject settled with the given members.
type step struct {
	metric  string
	cluster string // which of a run's clusters; a step on an existing one continues from the previous step
	members int
	act     func(ctx context.Context, b *bench, s subject) error
	// traced steps start a cluster: when each of its members reached each milestone of a
	// bootstrap is reported beside the time.
	traced bool
}

// steps are what a user does to clusters, in order. Pod loss takes a follower of the grown
// cluster; bootstrap of 5 is a second cluster.
var steps = []step{
	{"bootstrap, 3 members", "grown", 3, bootstrap(3, etcdVersion), true},
	{"scale-out 3 -> 4", "grown", 4, growTo(4), false},
	{metricLearnerStep, "grown", 5, growTo(5), false},
	{"Pod loss, 5 members", "grown", 5, loseFollowerOf(5), false},
	{metricWiped, "grown", 5, wipeFollower, false},
	{"scale-in 5 -> 4", "grown", 4, shrinkTo(4), false},
	{"bootstrap, 5 members", "five", 5, bootstrap(5, etcdVersion), true},
	{"bootstrap, 3 members at " + previousPatch, "upgraded", 3, bootstrap(3, previousPatch), true},
	{"upgrade " + previousPatch + " -> " + etcdVersion + ", 3 members", "upgraded", 3, upgradeTo(3, etcdVersion), false},
	{"upgrade " + etcdVersion + " -> " + nextMinor + ", 3 members", "upgraded", 3, upgradeTo(3, nextMinor), false},
}

// metricWiped is also set beside one learner step (metricLearnerStep) in the report.
const (
	metricWiped       = "data wiped -> replaced, 5"
	metricLearnerStep = "scale-out 4 -> 5"
)

func bootstrap(n int, version string) func(context.Context, *bench, subject) error {
	return func(ctx context.Context, _ *bench, s subject) error { return s.start(ctx, n, version) }
}

// upgradeTo changes the version and waits, inside the measured time, until every member's
// etcd answers with it: a settled status alone could be read before the roll began.
func upgradeTo(n int, version string) func(context.Context, *bench, subject) error {
	return func(ctx context.Context, b *bench, s subject) error {
		if err := s.upgrade(ctx, version); err != nil {
			return err
		}
		return waitFor(ctx, b.opts.timeout, s.namespace()+" on etcd "+version, func(ctx context.Context) error {
			return b.allOn(ctx, s.namespace(), n, version)
		})
	}
}

// wipeFollower empties a follower's volume and deletes its Pod (a disk lost under a
// running member), has the member replaced (by hand on the floor; the operator does it by
// itself), and waits, inside the measured time, until etcd no longer lists the wiped
// member's ID.
func wipeFollower(ctx context.Context, b *bench, s subject) error {
	f, err := b.follower(ctx, s.namespace(), 5)
	if err != nil {
		return err
	}
	if err := b.wipe(ctx, s.namespace(), f.pod); err != nil {
		return err
	}
	if err := s.replaceWiped(ctx, f.pod, f.MemberID); err != nil {
		return err
	}
	return waitFor(ctx, b.opts.timeout, fmt.Sprintf("member %x of %s removed", f.MemberID, f.pod), func(ctx context.Context) error {
		return b.idGone(ctx, s.namespace(), f.MemberID)
	})
}

func growTo(n int) func(context.Context, *bench, subject) error {
	return func(ctx context.Context, _ *bench, s subject) error { return s.grow(ctx, n) }
}

func shrinkTo(n int) func(context.Context, *bench, subject) error {
	return func(ctx context.Context, _ *bench, s subject) error { return s.shrink(ctx, n) }
}

// lost deletes a Pod as a crash or a lost node does: at once, with no graceful stop. A
// graceful delete would mostly measure the termination grace period, the same on both sides.
var lost = client.GracePeriodSeconds(0)

// loseFollowerOf finds a follower of the n members (a few milliseconds, inside the measured
// time on both sides) and loses its Pod.
func loseFollowerOf(n int) func(context.Context, *bench, subject) error {
	return func(ctx context.Context, b *bench, s subject) error {
		f, err := b.follower(ctx, s.namespace(), n)
		if err != nil {
			return err
		}
		return s.losePod(ctx, f.pod)
	}
}

// timedRun measures every step on both sides. The sides take turns step by step, and which
// goes first alternates between runs, so that a slow moment of the shared machine does not
// fall on one side only.
func (b *bench) timedRun(ctx context.Context, run int, times *samples) error {
	sides := sideOrder(run, floor, operator)
	subjects := map[string]subject{}
	for _, st := range selectSteps(steps, b.opts.steps) {
		for _, side := range sides {
			key := side + "/" + st.cluster
			if subjects[key] == nil {
				s, err := b.newSubject(ctx, side)
				if err != nil {
					return err
				}
				subjects[key] = s
			} else if err := b.atRest(ctx, subjects[key].namespace()); err != nil {
				return fmt.Errorf("%s, before %s: %w", side, st.metric, err)
			}
			d, milestones, err := b.measure(ctx, st, subjects[key])
			if err != nil {
				return fmt.Errorf("%s, %s: %w", side, st.metric, err)
			}
			logf("%-8s %-22s %6.2fs%s", side, st.metric, d.Seconds(), milestones.String())
			times.add(st.metric, side, d)
			times.addMilestones(st.metric, side, milestones)
		}
	}
	b.clearNamespaces(ctx)
	return nil
}

// sideOrder is the order in which two sides take their turns in a run: swapped every other
// run.
func sideOrder(run int, first, second string) []string {
	if run%2 == 1 {
		return []string{second, first}
	}
	return []string{first, second}
}

func (b *bench) newSubject(ctx context.Context, side string) (subject, error) {
	ns, err := b.namespace(ctx, side)
	if err != nil {
		return nil, err
	}
	if side == operator {
		return &operated{b: b, ns: ns}, nil
	}
	return newHandMade(b, ns), nil
}

// measure times one step; a traced step also says when it passed each milestone.
func (b *bench) measure(ctx context.Context, st step, s subject) (time.Duration, reachedAt, error) {
	began := time.Now()
	finishTrace := func() reachedAt { return nil }
	if st.traced {
		finishTrace = b.startTrace(ctx, s, st.members, began)
	}
	err := st.act(ctx, b, s)
	if err == nil {
		what := fmt.Sprintf("%s settled at %d members", s.namespace(), st.members)
		err = waitFor(ctx, b.opts.timeout, what, func(ctx context.Context) error { return s.settled(ctx, st.members) })
	}
	took, milestones := time.Since(began), finishTrace()
	if err != nil {
		return 0, nil, err
	}
	return took, milestones, nil
}

// startTrace traces s in the background; what it returns stops the trace and says what it saw.
func (b *bench) startTrace(ctx context.Context, s subject, n int, began time.Time) func() reachedAt {
	ctx, stop := context.WithCancel(ctx)
	seen := make(chan reachedAt, 1)
	_, operated := s.(*operated)
	go func() { seen <- b.trace(ctx, s.namespace(), n, began, operated) }()
	return func() reachedAt {
		stop()
		return <-seen
	}
}

// selectSteps keeps the steps whose metric matches, and the earlier steps on the same cluster,
// which they continue from; all of them when pattern is nil.
func selectSteps(all []step, pattern *regexp.Regexp) []step {
	if pattern == nil {
		return all
	}
	var kept []step
	for i, st := range all {
		if slices.ContainsFunc(all[i:], func(later step) bool { return later.cluster == st.cluster && pattern.MatchString(later.metric) }) {
			kept = append(kept, st)
		}
	}
	return kept
}

// etcdHealthInterval is etcd's HealthInterval: with strict reconfiguration, its default, etcd
// takes a new member only once its leader has been connected to every voter this long.
const etcdHealthInterval = 5 * time.Second

// atRest waits, untimed, until every Pod of ns has been Ready for etcdHealthInterval (plus a
// second: the API keeps the time in whole seconds). So a step that continues a cluster starts
// from it at rest on both sides, and not inside the window etcd keeps after the step before,
// in which it refuses new members: timed from the end of a bootstrap or a Pod loss, a
// scale-out waited up to 5 s for etcd alone, and which side waited depended on how long the
// other side's step had taken meanwhile (the faster side's cluster rests less), not on
// either side's work.
func (b *bench) atRest(ctx context.Context, ns string) error {
	return waitFor(ctx, b.opts.timeout, ns+" at rest", func(ctx context.Context) error {
		pods := &corev1.PodList{}
		if err := b.k8s.List(ctx, pods, client.InNamespace(ns)); err != nil {
			return err
		}
		return readyLongEnough(pods.Items, time.Now().Add(-etcdHealthInterval-time.Second))
	})
}

// readyLongEnough is nil when every Pod has been Ready since before since.
func readyLongEnough(pods []corev1.Pod, since time.Time) error {
	for _, p := range pods {
		i := slices.IndexFunc(p.Status.Conditions, func(c corev1.PodCondition) bool { return c.Type == corev1.PodReady })
		if i < 0 || p.Status.Conditions[i].Status != corev1.ConditionTrue {
			return fmt.Errorf("pod %s is not ready", p.Name)
		}
		if at := p.Status.Conditions[i].LastTransitionTime; !at.Time.Before(since) {
			return fmt.Errorf("pod %s has been ready only since %s", p.Name, at.Format(time.RFC3339))
		}
	}
	return nil
}
