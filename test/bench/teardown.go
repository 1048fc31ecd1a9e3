package main

import (
	"context"
	"fmt"
	"strings"
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

// teardownTimeout bounds the wait: far longer than a deletion that does not stall takes.
const teardownTimeout = 10 * time.Minute

// tearDown deletes the bench's namespaces at once and times until no EtcdCluster, EtcdMember
// or namespace of the bench is left. A deletion that does not finish within
// teardownTimeout is an error: it stalled.
func (b *bench) tearDown(ctx context.Context) (*teardown, error) {
	clusters := &etcdv1.EtcdClusterList{}
	if err := b.k8s.List(ctx, clusters); err != nil {
		return nil, err
	}
	deleteAll := func(ctx context.Context) error {
		_, err := b.deleteNamespaces(ctx)
		return err
	}
	return timeDeletion(ctx, len(clusters.Items), deleteAll, waitFor, b.benchObjectsGone)
}

// timeDeletion starts a deletion of n clusters and times until gone passes, as wait polls:
// a deletion that has not finished after teardownTimeout stalled, and says what was left.
func timeDeletion(ctx context.Context, n int, start func(context.Context) error,
	wait func(context.Context, time.Duration, string, func(context.Context) error) error, gone func(context.Context) error) (*teardown, error) {
	r := &teardown{clusters: n}
	began := time.Now()
	if err := start(ctx); err != nil {
		return nil, err
	}
	err := wait(ctx, teardownTimeout, fmt.Sprintf("%d clusters deleted with their namespaces", n), gone)
	r.took = time.Since(began)
	if err != nil {
		r.stalled = err.Error()
		return r, err
	}
	logf("%d clusters deleted at once: gone in %.1fs", n, r.took.Seconds())
	return r, nil
}

// benchObjectsGone fails while any namespace of the bench, or any EtcdCluster or EtcdMember
// in one, is left, saying how many of each.
func (b *bench) benchObjectsGone(ctx context.Context) error {
	namespaces := &corev1.NamespaceList{}
	if err := b.k8s.List(ctx, namespaces, client.MatchingLabels{benchLabel: "true"}); err != nil {
		return err
	}
	clusters, members := &etcdv1.EtcdClusterList{}, &etcdv1.EtcdMemberList{}
	if err := b.k8s.List(ctx, clusters); err != nil {
		return err
	}
	if err := b.k8s.List(ctx, members); err != nil {
		return err
	}
	left := []string{}
	for what, n := range map[string]int{"namespaces": len(namespaces.Items), "EtcdClusters": len(clusters.Items), "EtcdMembers": len(members.Items)} {
		if n > 0 {
			left = append(left, fmt.Sprintf("%d %s", n, what))
		}
	}
	if len(left) > 0 {
		return fmt.Errorf("left: %s", strings.Join(left, ", "))
	}
	return nil
}
