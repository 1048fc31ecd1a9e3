package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/test/etcdsim"
	"github.com/quorumkeeper/etcd-operator/test/etcdsim/simnode"
)

// The scale sweep measures one operator against more clusters than the machine could run
// etcd for: their member Pods land on a simulated node (simnode) that runs no process, and
// one etcdsim process answers etcd's client API for all of them. The operator, the
// apiserver, the scheduler, the controller-manager, the informers and the local cluster's
// DNS are the real ones; only the kubelet of that node and etcd are simulated.

// sweepLabel marks the sweep's clusters, so that one list finds all of them.
const sweepLabel = "etcd-operator.cozystack.io/bench-sweep"

// sweepNode is the simulated node's name.
const sweepNode = "sim-0"

// sweepPoint is the operator with a number of clusters: how long the last batch took to
// come up, and what all of them cost at rest.
type sweepPoint struct {
	clusters int
	added    int
	created  time.Duration
	burst    latency
	rest     *atRest
	// queued is the depth of every controller's work queue at the end of the window.
	queued float64
}

// sweepResult is the whole sweep: the operator's memory before, its points, then a batch
// deleted at once and the rest after it.
type sweepResult struct {
	baseRSS float64
	points  []sweepPoint
	deleted *teardown
	rest    *teardown
}

// sweep raises the number of clusters to each of o.sweep in turn (the new ones created at
// once), times until all are Available, and measures the operator at rest with them; then
// it deletes o.sweepDelete clusters at once and times until they are gone, then the rest.
// Both deletions happen while the simulated node runs: without its kubelet, Pods being
// deleted would wait for kube-controller-manager's garbage collection of a gone node's Pods.
func (b *bench) sweep(ctx context.Context) (*sweepResult, error) {
	stop, err := b.startSimulation(ctx)
	if err != nil {
		return nil, err
	}
	defer stop()
	first, err := b.operatorMetrics(ctx)
	if err != nil {
		return nil, err
	}
	// The operator measured is this one: a restart or redeploy during the sweep fails it.
	b.operatorStarted = first.value(processStarted)
	r := &sweepResult{baseRSS: first.value(residentMemory)}
	have := 0
	for _, target := range b.opts.sweep {
		p, err := b.sweepTo(ctx, have, target)
		if err != nil {
			return r, err
		}
		r.points = append(r.points, *p)
		have = target
	}
	if r.deleted, err = b.deleteSome(ctx, b.opts.sweepDelete); err != nil {
		return r, err
	}
	r.rest, err = b.tearDown(ctx)
	return r, err
}

// startSimulation serves etcd's API for every simulated member on o.simListen and registers
// the simulated node, whose Pods report that address: the local cluster's DNS then answers
// every member's name with it, and the simulator tells members apart by the name dialled.
func (b *bench) startSimulation(ctx context.Context) (stop func(), err error) {
	sim := etcdsim.New(etcdsim.Options{})
	lis, err := net.Listen("tcp", b.opts.simListen)
	if err != nil {
		return nil, fmt.Errorf("the etcd simulator on %s: %w", b.opts.simListen, err)
	}
	g := sim.Server()
	go func() { _ = g.Serve(lis) }()
	host, _, _ := net.SplitHostPort(b.opts.simListen)
	node, err := simnode.Start(ctx, simnode.Config{Name: sweepNode, PodIP: host, Sim: sim, Client: b.kube})
	if err != nil {
		g.Stop()
		return nil, err
	}
	logf("simulated node %s: Pods report %s, where the etcd simulator answers", sweepNode, b.opts.simListen)
	return func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if err := node.Stop(ctx); err != nil {
			logf("stopping the simulated node: %v", err)
		}
		g.Stop()
	}, nil
}

// sweepTo creates the clusters from have up to target at once and measures.
func (b *bench) sweepTo(ctx context.Context, have, target int) (*sweepPoint, error) {
	p := &sweepPoint{clusters: target, added: target - have}
	before, err := b.operatorMetrics(ctx)
	if err != nil {
		return nil, err
	}
	began := time.Now()
	if err := b.createSimulated(ctx, have, target); err != nil {
		return nil, err
	}
	wait := b.opts.timeout + time.Duration(p.added)*time.Second
	if err := waitForEvery(ctx, wait, fmt.Sprintf("%d clusters Available", target), b.sweepSettled); err != nil {
		return nil, err
	}
	p.created = time.Since(began)
	after, err := b.operatorMetrics(ctx)
	if err != nil {
		return nil, err
	}
	if err := b.sameOperator(after); err != nil {
		return nil, err
	}
	p.burst = reconcileLatency(before, after)
	logf("%d clusters: %d more created at once, all Available in %.1fs", target, p.added, p.created.Seconds())
	if p.rest, err = b.idle(ctx); err != nil {
		return nil, err
	}
	p.rest.clusters = target
	last, err := b.operatorMetrics(ctx)
	if err != nil {
		return nil, err
	}
	p.queued = last.sumBy(workqueueDepth, func(map[string]string) string { return "all" })["all"]
	logf("%d clusters at rest: reconcile p99 %.3fs, RSS %.1f MiB", target, p.rest.reconcile.p99, p.rest.rssBytes/(1<<20))
	return p, nil
}

// createSimulated creates clusters number from up to to, o.sweepPerNamespace to a namespace
// as tenants have them, with a few creators at once as many users would.
func (b *bench) createSimulated(ctx context.Context, from, to int) error {
	namespaces := map[int]string{} // by index
	var mu sync.Mutex
	nsFor := func(i int) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		idx := i / b.opts.sweepPerNamespace
		if ns, ok := namespaces[idx]; ok {
			return ns, nil
		}
		ns, err := b.namespace(ctx, fmt.Sprintf("sweep-%d", idx))
		if err == nil {
			namespaces[idx] = ns
		}
		return ns, err
	}
	var next atomic.Int64
	next.Store(int64(from))
	errs := make(chan error, sweepCreators)
	for range sweepCreators {
		go func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= to {
					errs <- nil
					return
				}
				ns, err := nsFor(i)
				if err == nil {
					err = b.k8s.Create(ctx, simulatedCluster(ns, fmt.Sprintf("c-%d", i)))
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	var first error
	for range sweepCreators {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// sweepCreators is how many clients create the sweep's clusters at once.
const sweepCreators = 8

// simulatedCluster is a one-member cluster whose member lands on the simulated node, its data
// on tmpfs (the node has no volumes).
func simulatedCluster(ns, name string) *etcdv1.EtcdCluster {
	replicas := int32(1)
	selector, tolerations := simnode.Placement()
	return &etcdv1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{sweepLabel: "true"}},
		Spec: etcdv1.EtcdClusterSpec{
			Replicas: &replicas, Version: etcdVersion,
			Storage:      etcdv1.StorageSpec{Medium: etcdv1.StorageMediumMemory},
			NodeSelector: selector, Tolerations: tolerations,
		},
	}
}

// sweepSettled fails while any of the sweep's clusters is not settled, naming one and how
// many.
func (b *bench) sweepSettled(ctx context.Context) error {
	list := &etcdv1.EtcdClusterList{}
	if err := b.k8s.List(ctx, list, client.MatchingLabels{sweepLabel: "true"}); err != nil {
		return err
	}
	unsettled, example := 0, ""
	for i := range list.Items {
		if err := settledStatus(&list.Items[i], 1); err != nil {
			if unsettled == 0 {
				example = fmt.Sprintf("%s/%s: %v", list.Items[i].Namespace, list.Items[i].Name, err)
			}
			unsettled++
		}
	}
	if unsettled > 0 {
		return fmt.Errorf("%d of %d not settled, e.g. %s", unsettled, len(list.Items), example)
	}
	return nil
}

// deleteSome deletes the namespaces that hold the first n of the sweep's clusters at once
// and times until those clusters, their members and namespaces are gone.
func (b *bench) deleteSome(ctx context.Context, n int) (*teardown, error) {
	namespaces := &corev1.NamespaceList{}
	if err := b.k8s.List(ctx, namespaces, client.MatchingLabels{benchLabel: "true"}); err != nil {
		return nil, err
	}
	chosen, clusters := map[string]bool{}, 0
	for i := range namespaces.Items {
		if clusters >= n {
			break
		}
		ns := namespaces.Items[i].Name
		list := &etcdv1.EtcdClusterList{}
		if err := b.k8s.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{sweepLabel: "true"}); err != nil {
			return nil, err
		}
		if len(list.Items) > 0 {
			chosen[ns] = true
			clusters += len(list.Items)
		}
	}
	deleteChosen := func(ctx context.Context) error {
		for ns := range chosen {
			if err := b.k8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); client.IgnoreNotFound(err) != nil {
				return err
			}
		}
		return nil
	}
	return timeDeletion(ctx, clusters, deleteChosen, sweepPoll, func(ctx context.Context) (leftover, error) {
		return b.namespacesLeft(ctx, chosen)
	})
}

// namespacesLeft counts the namespaces, and the EtcdClusters and EtcdMembers in them, that
// are still there.
func (b *bench) namespacesLeft(ctx context.Context, chosen map[string]bool) (leftover, error) {
	var l leftover
	for ns := range chosen {
		err := b.k8s.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})
		if client.IgnoreNotFound(err) != nil {
			return l, err
		}
		if err == nil {
			l.namespaces++
		}
		c, m := &etcdv1.EtcdClusterList{}, &etcdv1.EtcdMemberList{}
		if err := b.k8s.List(ctx, c, client.InNamespace(ns)); err != nil {
			return l, err
		}
		if err := b.k8s.List(ctx, m, client.InNamespace(ns)); err != nil {
			return l, err
		}
		l.clusters, l.members = l.clusters+len(c.Items), l.members+len(m.Items)
	}
	return l, nil
}

// sweepPoll is how often the sweep's waits look: each look lists thousands of objects.
const sweepPoll = 2 * time.Second

// waitForEvery is waitFor at the sweep's pace.
func waitForEvery(ctx context.Context, timeout time.Duration, what string, check func(context.Context) error) error {
	return poll(ctx, pacing{timeout: timeout, every: sweepPoll, attempt: time.Minute}, what, check)
}

// runSweep is the bench in -sweep mode: the sweep, its report, and the teardown of what is
// left, which must not stall either.
func (b *bench) runSweep(ctx context.Context, started time.Time) error {
	r, err := b.sweep(ctx)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	if _, werr := io.WriteString(tw, formatSweep(r, time.Since(started))); werr != nil {
		return errors.Join(err, werr)
	}
	return errors.Join(err, tw.Flush())
}

// parseCounts reads "500,1000": rising positive counts.
func parseCounts(s string) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	var out []int
	for part := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%q is not a positive count", part)
		}
		if len(out) > 0 && n <= out[len(out)-1] {
			return nil, fmt.Errorf("counts must rise: %d after %d", n, out[len(out)-1])
		}
		out = append(out, n)
	}
	return out, nil
}

// defaultMemoryLimit is the operator's memory limit in config/manager and the chart.
const defaultMemoryLimit = 256 << 20

// formatSweep is the sweep's report; r may be partial (a step failed).
func formatSweep(r *sweepResult, took time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\nscale sweep: one-member clusters on a simulated node (etcd answered by test/etcdsim; operator, apiserver, scheduler, controller-manager and DNS real), %d CPUs\n", runtime.NumCPU())
	if r == nil {
		return b.String()
	}
	fmt.Fprintf(&b, "operator resident memory before: %.1f MiB\n\n", r.baseRSS/(1<<20))
	fmt.Fprintln(&b, "clusters\tcreated at once\tall Available\treconcile p99 meanwhile\treconcile p50/p99 at rest\treconciles/min at rest\tqueued at rest\toperator writes/min at rest\tRSS\theap\tRSS per cluster (since the last point)")
	prevClusters, prevRSS := 0, r.baseRSS
	for _, p := range r.points {
		perMinute := func(n float64) float64 { return n / p.rest.window.Minutes() }
		perCluster := (p.rest.rssBytes - prevRSS) / float64(p.clusters-prevClusters)
		fmt.Fprintf(&b, "%d\t%d\t%.1fs\t%s\t%s / %s\t%.0f\t%.0f\t%.1f\t%.1f MiB\t%.1f MiB\t%.0f KiB\n", p.clusters, p.added, p.created.Seconds(),
			ms(p.burst.p99), ms(p.rest.reconcile.p50), ms(p.rest.reconcile.p99), perMinute(p.rest.reconcile.count), p.queued,
			perMinute(total(p.rest.operatorWrites)), p.rest.rssBytes/(1<<20), p.rest.heapBytes/(1<<20), perCluster/(1<<10))
		prevClusters, prevRSS = p.clusters, p.rest.rssBytes
	}
	if n := len(r.points); n > 0 {
		last := r.points[n-1]
		perCluster := (last.rest.rssBytes - r.baseRSS) / float64(last.clusters)
		fmt.Fprintf(&b, "\nmemory: %.0f KiB per cluster over %.1f MiB before; the default limit (%d MiB) holds about %.0f clusters\n",
			perCluster/(1<<10), r.baseRSS/(1<<20), defaultMemoryLimit>>20, (defaultMemoryLimit-r.baseRSS)/perCluster)
	}
	for _, t := range []*teardown{r.deleted, r.rest} {
		if t != nil {
			writeTeardown(&b, t)
		}
	}
	fmt.Fprintf(&b, "\nbench took %s\n", took.Round(time.Second))
	return b.String()
}
