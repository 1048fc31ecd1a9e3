package main

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

// teardown is how long the deletion of every cluster the bench left takes: their namespaces
// deleted at once, as a tenant's teardown or a CI run's cleanup does.
type teardown struct {
	clusters int
	took     time.Duration
	// stalled is what was left when the wait gave up; "" when everything went.
	stalled string
}

// stallAfter is how long a deletion may go without anything more gone before it counts as
// stalled: thousands of clusters take minutes to go (4,500 took 9 minutes on the 2-core
// machine), and what is wrong is a deletion that stops, not one that takes its time.
const stallAfter = 3 * time.Minute

// tearDown deletes the bench's namespaces at once and times until no EtcdCluster, EtcdMember
// or namespace of the bench is left. A deletion during which nothing more goes for
// stallAfter is an error: it stalled.
func (b *bench) tearDown(ctx context.Context) (*teardown, error) {
	clusters := &etcdv1.EtcdClusterList{}
	if err := b.k8s.List(ctx, clusters); err != nil {
		return nil, err
	}
	deleteAll := func(ctx context.Context) error {
		_, err := b.deleteNamespaces(ctx)
		return err
	}
	return timeDeletion(ctx, len(clusters.Items), deleteAll, pollInterval, b.benchObjectsLeft)
}

// leftover is what a deletion still has to remove.
type leftover struct {
	namespaces, clusters, members int
}

func (l leftover) total() int { return l.namespaces + l.clusters + l.members }

func (l leftover) String() string {
	return fmt.Sprintf("left: %d namespaces, %d EtcdClusters, %d EtcdMembers", l.namespaces, l.clusters, l.members)
}

// progress tells a deletion that goes on from one that stalled.
type progress struct {
	least int
	since time.Time // when least was first seen
}

// stalled is true once the number left has not fallen for stallAfter.
func (p *progress) stalled(left int, now time.Time) bool {
	if p.since.IsZero() || left < p.least {
		p.least, p.since = left, now
		return false
	}
	return now.Sub(p.since) >= stallAfter
}

// timeDeletion starts a deletion of n clusters and times until nothing is left, looking every
// so often; a look that fails counts as no progress.
func timeDeletion(ctx context.Context, n int, start func(context.Context) error, every time.Duration,
	left func(context.Context) (leftover, error)) (*teardown, error) {
	r := &teardown{clusters: n}
	began := time.Now()
	if err := start(ctx); err != nil {
		return nil, err
	}
	var p progress
	for {
		attempt, cancel := context.WithTimeout(ctx, time.Minute)
		l, err := left(attempt)
		cancel()
		if err == nil && l.total() == 0 {
			break
		}
		if err == nil && p.stalled(l.total(), time.Now()) {
			r.took, r.stalled = time.Since(began), fmt.Sprintf("nothing more gone for %s; %s", stallAfter, l)
			return r, fmt.Errorf("%d clusters deleted with their namespaces: %s", n, r.stalled)
		}
		select {
		case <-ctx.Done():
			r.took, r.stalled = time.Since(began), ctx.Err().Error()
			return r, ctx.Err()
		case <-time.After(every):
		}
	}
	r.took = time.Since(began)
	logf("%d clusters deleted at once: gone in %.1fs", n, r.took.Seconds())
	return r, nil
}

// benchObjectsLeft counts the bench's namespaces and every EtcdCluster and EtcdMember.
func (b *bench) benchObjectsLeft(ctx context.Context) (leftover, error) {
	namespaces := &corev1.NamespaceList{}
	if err := b.k8s.List(ctx, namespaces, client.MatchingLabels{benchLabel: "true"}); err != nil {
		return leftover{}, err
	}
	clusters, members := &etcdv1.EtcdClusterList{}, &etcdv1.EtcdMemberList{}
	if err := b.k8s.List(ctx, clusters); err != nil {
		return leftover{}, err
	}
	if err := b.k8s.List(ctx, members); err != nil {
		return leftover{}, err
	}
	return leftover{namespaces: len(namespaces.Items), clusters: len(clusters.Items), members: len(members.Items)}, nil
}
