package main

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quorumkeeper/etcd-operator/test/bench/stats"
)

// atScale is what many clusters created at once cost the operator.
type atScale struct {
	clusters int
	// one is the time one one-member cluster takes to be Available when it is alone, each
	// run's; all is the time the clusters created at once take until every one is.
	one []time.Duration
	all time.Duration
	// burst is the cluster controller's reconcile latency while they came up.
	burst latency
}

// latency is the p50 and p99 of reconciles, in seconds, and how many there were.
type latency struct {
	p50, p99 float64
	count    float64
}

// scale measures one one-member cluster alone (once per run), then creates o.clusters of
// them at once and times until all are Available, with the reconcile latency of that burst.
// The clusters stay for the measurements at rest.
func (b *bench) scale(ctx context.Context) (*atScale, error) {
	r := &atScale{clusters: b.opts.clusters}
	for i := range b.opts.runs {
		d, err := b.createAndWait(ctx, fmt.Sprintf("alone-%d", i), 1)
		if err != nil {
			return nil, err
		}
		logf("one cluster alone Available in %.2fs", d.Seconds())
		r.one = append(r.one, d)
	}
	before, err := b.operatorMetrics(ctx)
	if err != nil {
		return nil, err
	}
	if r.all, err = b.createAndWait(ctx, "many", b.opts.clusters); err != nil {
		return nil, err
	}
	logf("%d clusters created at once all Available in %.2fs", b.opts.clusters, r.all.Seconds())
	after, err := b.operatorMetrics(ctx)
	if err != nil {
		return nil, err
	}
	r.burst = reconcileLatency(before, after)
	return r, nil
}

// createAndWait creates n one-member clusters in a new namespace and times until all are
// Available with nothing in motion.
func (b *bench) createAndWait(ctx context.Context, prefix string, n int) (time.Duration, error) {
	ns, err := b.namespace(ctx, prefix)
	if err != nil {
		return 0, err
	}
	began := time.Now()
	for i := range n {
		if err := b.createCluster(ctx, ns, fmt.Sprintf("c-%d", i), 1, etcdVersion); err != nil {
			return 0, err
		}
	}
	err = waitFor(ctx, b.opts.timeout+time.Duration(n)*5*time.Second, fmt.Sprintf("%d clusters in %s Available", n, ns), func(ctx context.Context) error {
		return b.allSettled(ctx, ns)
	})
	return time.Since(began), err
}

// reconcileLatency is the cluster controller's reconcile time between two scrapes of the
// operator's metrics, from controller-runtime's histogram.
func reconcileLatency(before, after families) latency {
	a, b := reconcileBuckets(after), reconcileBuckets(before)
	delta := make([]stats.Bucket, len(a))
	for i := range a {
		delta[i] = stats.Bucket{UpperBound: a[i].UpperBound, Count: a[i].Count}
		if j := slices.IndexFunc(b, func(x stats.Bucket) bool { return x.UpperBound == a[i].UpperBound }); j >= 0 {
			delta[i].Count -= b[j].Count
		}
	}
	l := latency{p50: stats.Quantile(0.5, delta), p99: stats.Quantile(0.99, delta)}
	if len(delta) > 0 {
		l.count = delta[len(delta)-1].Count
	}
	return l
}

// reconcileBuckets are the cumulative buckets of the EtcdCluster controller's reconcile
// time, +Inf last.
func reconcileBuckets(f families) []stats.Bucket {
	var out []stats.Bucket
	for _, m := range f[reconcileTime].GetMetric() {
		if labels(m)["controller"] != "etcdcluster" {
			continue
		}
		h := m.GetHistogram()
		for _, bk := range h.GetBucket() {
			out = append(out, stats.Bucket{UpperBound: bk.GetUpperBound(), Count: float64(bk.GetCumulativeCount())})
		}
		out = append(out, stats.Bucket{UpperBound: math.Inf(1), Count: float64(h.GetSampleCount())})
	}
	return out
}

// crowd is the operator's memory once many objects that are not its own exist (before
// them: atRest's).
type crowd struct {
	secrets, pods       int
	rssBytes, heapBytes float64
}

// unrelatedNamespaces spread the crowd the way tenants' namespaces would.
const unrelatedNamespaces = 10

// crowdIn creates Secrets and Pods the operator has no business with in namespaces of their
// own, and reads the operator's memory after (idle read it before). Its cache holds only what it made
// (and the metadata of Secrets, which clusters name): unrelated Pods must not grow it. The
// Pods name a scheduler that does not exist, so nothing runs them and nothing deletes them.
func (b *bench) crowdIn(ctx context.Context) (*crowd, error) {
	r := &crowd{secrets: b.opts.unrelated / 2, pods: b.opts.unrelated - b.opts.unrelated/2}
	namespaces := make([]string, unrelatedNamespaces)
	for i := range namespaces {
		var err error
		if namespaces[i], err = b.namespace(ctx, "unrelated"); err != nil {
			return nil, err
		}
	}
	for i := range r.secrets {
		if err := b.k8s.Create(ctx, unrelatedSecret(namespaces[i%len(namespaces)], i)); err != nil {
			return nil, err
		}
	}
	for i := range r.pods {
		if err := b.k8s.Create(ctx, unrelatedPod(namespaces[i%len(namespaces)], i)); err != nil {
			return nil, err
		}
	}
	logf("%d unrelated Secrets and %d unrelated Pods created; memory read after %s", r.secrets, r.pods, b.opts.idleWarmup)
	if err := sleep(ctx, b.opts.idleWarmup); err != nil {
		return nil, err
	}
	after, err := b.operatorMetrics(ctx)
	if err != nil {
		return nil, err
	}
	if err := b.sameOperator(after); err != nil {
		return nil, err
	}
	r.rssBytes, r.heapBytes = after.value(residentMemory), after.value(heapInUse)
	return r, nil
}

// unrelatedSecret is the size of a small TLS Secret, as tenants' namespaces are full of.
func unrelatedSecret(ns string, i int) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("tenant-%d", i), Labels: map[string]string{"app": "tenant"}},
		Data:       map[string][]byte{"tls.crt": make([]byte, 1500), "tls.key": make([]byte, 1700)},
	}
}

// unrelatedPod is shaped like an ordinary workload's Pod.
func unrelatedPod(ns string, i int) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("tenant-%d", i),
			Labels: map[string]string{"app": "tenant", "pod-template-hash": "5d8f7c9b4"}},
		Spec: corev1.PodSpec{
			SchedulerName: "bench-nobody",
			Containers: []corev1.Container{{
				Name: "app", Image: "registry.example/tenant/app:1.0",
				Args: []string{"--listen=:8080", "--log-level=info"},
				Env:  []corev1.EnvVar{{Name: "MODE", Value: "production"}, {Name: "REGION", Value: "eu-1"}},
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi"),
				}},
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
			}},
		},
	}
}
