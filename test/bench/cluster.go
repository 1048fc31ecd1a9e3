package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
	"github.com/quorumkeeper/etcd-operator/test/robustness"
)

const (
	etcdVersion = "3.6.16"
	// previousPatch is what the upgrade step starts from (the e2e upgrade tests' too).
	previousPatch = "3.6.15"
	// nextMinor is what the last upgrade step moves to from etcdVersion (the e2e test
	// TestUpgradeFrom36To37's too).
	nextMinor = "3.7.3"
	// pollInterval bounds how late a measurement can see a state: both sides are polled alike.
	pollInterval = 200 * time.Millisecond
	// benchLabel marks the bench's namespaces, so that all of them are found and deleted.
	benchLabel = "etcd-operator.cozystack.io/bench"
)

type bench struct {
	k8s  client.WithWatch
	kube kubernetes.Interface // for the apiserver's own /metrics
	opts options
	// operatorStarted identifies the operator process measured: its start time.
	operatorStarted float64
	// metricsToken is a metrics reader's token for the operator's secure metrics endpoint.
	metricsToken string
}

func newBench(o options) (*bench, error) {
	path := os.Getenv("KUBECONFIG")
	if path == "" {
		return nil, errors.New("KUBECONFIG is not set: run through 'make bench', which starts the local cluster")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, err
	}
	// The bench polls several objects five times a second; client-go's default of 5 QPS would
	// make the measurement wait on the client instead of the cluster.
	cfg.QPS, cfg.Burst = 200, 400
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := etcdv1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	b := &bench{opts: o}
	if b.k8s, err = client.NewWithWatch(cfg, client.Options{Scheme: scheme}); err != nil {
		return nil, err
	}
	if b.kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, err
	}
	return b, nil
}

// namespace makes a labelled namespace, one per cluster, so that listing a namespace's Pods
// lists one cluster's members.
func (b *bench) namespace(ctx context.Context, prefix string) (string, error) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "bench-" + prefix + "-", Labels: map[string]string{benchLabel: "true"}}}
	if err := b.k8s.Create(ctx, ns); err != nil {
		return "", err
	}
	return ns.Name, nil
}

// deleteNamespaces starts deleting every namespace the bench made (a previous bench's
// too) and says how many are still there, being deleted.
func (b *bench) deleteNamespaces(ctx context.Context) (int, error) {
	list := &corev1.NamespaceList{}
	if err := b.k8s.List(ctx, list, client.MatchingLabels{benchLabel: "true"}); err != nil {
		return 0, err
	}
	for i := range list.Items {
		if ns := &list.Items[i]; ns.DeletionTimestamp.IsZero() {
			if err := b.k8s.Delete(ctx, ns); client.IgnoreNotFound(err) != nil {
				return 0, err
			}
		}
	}
	return len(list.Items), nil
}

// clearNamespaces deletes the bench's namespaces and waits until they are gone, so that a
// measurement does not measure an earlier one's teardown.
func (b *bench) clearNamespaces(ctx context.Context) {
	err := waitFor(ctx, 10*time.Minute, "the bench's namespaces deleted", func(ctx context.Context) error {
		left, err := b.deleteNamespaces(ctx)
		if err == nil && left > 0 {
			err = fmt.Errorf("%d left", left)
		}
		return err
	})
	if err != nil {
		logf("%v", err)
	}
}

// attemptTimeout bounds one look of a wait: a call in flight to a Pod IP that went away with
// its Pod (a member restarted by a roll) may never answer, and must not take the whole wait's
// time with it. A variable so that its test need not wait as long.
var attemptTimeout = 10 * time.Second

// waitFor polls check until it passes; the error says what did not happen and why.
func waitFor(ctx context.Context, timeout time.Duration, what string, check func(context.Context) error) error {
	return poll(ctx, pacing{timeout: timeout, every: pollInterval, attempt: attemptTimeout}, what, check)
}

// pacing is how a wait polls: for how long in all, how often, each look for how long.
type pacing struct {
	timeout, every, attempt time.Duration
}

func poll(ctx context.Context, p pacing, what string, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	for {
		attempt, stop := context.WithTimeout(ctx, p.attempt)
		err := check(attempt)
		stop()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w (last: %w)", what, ctx.Err(), err)
		case <-time.After(p.every):
		}
	}
}

// member is one running etcd member as the host reaches it: by Pod IP, since the host does
// not resolve cluster names.
type member struct {
	pod, url string
}

// readyMembers lists the namespace's Pods and fails unless exactly n are there, none going
// away, all Ready.
func (b *bench) readyMembers(ctx context.Context, ns string, n int) ([]member, error) {
	ready, unready, err := b.members(ctx, ns)
	switch {
	case err != nil:
		return nil, err
	case len(unready) > 0:
		return nil, fmt.Errorf("pod %s is not ready", unready[0])
	case len(ready) != n:
		return nil, fmt.Errorf("%d Pods ready, want %d", len(ready), n)
	}
	return ready, nil
}

// someReadyMembers are the namespace's Ready members, at least one: enough to reach etcd
// while another member is down.
func (b *bench) someReadyMembers(ctx context.Context, ns string) ([]member, error) {
	ready, _, err := b.members(ctx, ns)
	if err == nil && len(ready) == 0 {
		err = errors.New("no Pod ready")
	}
	return ready, err
}

// members lists the namespace's Pods that are not going away: the Ready ones as members, the
// others by name.
func (b *bench) members(ctx context.Context, ns string) (ready []member, unready []string, err error) {
	pods := &corev1.PodList{}
	if err := b.k8s.List(ctx, pods, client.InNamespace(ns)); err != nil {
		return nil, nil, err
	}
	for _, p := range pods.Items {
		switch {
		case !p.DeletionTimestamp.IsZero():
		case !robustness.PodReady(&p) || p.Status.PodIP == "":
			unready = append(unready, p.Name)
		default:
			ready = append(ready, member{pod: p.Name, url: "http://" + net.JoinHostPort(p.Status.PodIP, strconv.Itoa(specs.ClientPort))})
		}
	}
	return ready, unready, nil
}

// withEtcd runs fn with a client for the given members.
func withEtcd(members []member, fn func(etcd.Client) error) error {
	urls := make([]string, 0, len(members))
	for _, m := range members {
		urls = append(urls, m.url)
	}
	cli, err := etcd.New(etcd.Config{Endpoints: urls})
	if err != nil {
		return err
	}
	defer func() { _ = cli.Close() }()
	return fn(cli)
}

// serving is nil once n members run in the namespace, their Pods Ready (what a client
// Service needs) and each answering a quorum read (etcdctl endpoint health).
func (b *bench) serving(ctx context.Context, ns string, n int) error {
	return b.servingAnd(ctx, ns, n, nil)
}

// servingAnd is serving with one more check, given a client for the members, before their
// health; none when check is nil.
func (b *bench) servingAnd(ctx context.Context, ns string, n int, check func(etcd.Client) error) error {
	members, err := b.readyMembers(ctx, ns, n)
	if err != nil {
		return err
	}
	return withEtcd(members, func(cli etcd.Client) error {
		if check != nil {
			if err := check(cli); err != nil {
				return err
			}
		}
		for _, m := range members {
			if err := cli.Healthy(ctx, m.url); err != nil {
				return err
			}
		}
		return nil
	})
}

// memberStatus is one member and what its etcd says about itself.
type memberStatus struct {
	member
	etcd.Status
}

// statuses asks each of the n ready members' etcd about itself.
func (b *bench) statuses(ctx context.Context, ns string, n int) ([]memberStatus, error) {
	members, err := b.readyMembers(ctx, ns, n)
	if err != nil {
		return nil, err
	}
	out := make([]memberStatus, 0, len(members))
	err = withEtcd(members, func(cli etcd.Client) error {
		for _, m := range members {
			st, err := cli.Status(ctx, m.url)
			if err != nil {
				return err
			}
			out = append(out, memberStatus{m, st})
		}
		return nil
	})
	return out, err
}

// follower is a member that does not lead, of n: losing it costs no election, so the time
// measured is that of bringing the member back, on both sides alike.
func (b *bench) follower(ctx context.Context, ns string, n int) (memberStatus, error) {
	sts, err := b.statuses(ctx, ns, n)
	if err != nil {
		return memberStatus{}, err
	}
	for _, st := range sts {
		if st.Leader != 0 && st.Leader != st.MemberID {
			return st, nil
		}
	}
	return memberStatus{}, errors.New("no member follows a leader")
}

// allOn is nil once n members are ready and each one's etcd answers with version.
func (b *bench) allOn(ctx context.Context, ns string, n int, version string) error {
	sts, err := b.statuses(ctx, ns, n)
	if err != nil {
		return err
	}
	for _, st := range sts {
		if st.Version != version {
			return fmt.Errorf("%s runs etcd %s", st.pod, st.Version)
		}
	}
	return nil
}

// wipe empties the member's volume (the local cluster's provisioner made it a directory of
// this machine) and deletes its Pod at once, as a lost disk under a running member.
func (b *bench) wipe(ctx context.Context, ns, member string) error {
	pvc := &corev1.PersistentVolumeClaim{}
	if err := b.k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: member}, pvc); err != nil {
		return err
	}
	if err := robustness.EmptyVolume(ctx, b.k8s, pvc); err != nil {
		return err
	}
	return b.k8s.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: member}}, lost)
}

// idGone is nil once etcd, asked through the ready members, no longer lists id.
func (b *bench) idGone(ctx context.Context, ns string, id uint64) error {
	members, err := b.someReadyMembers(ctx, ns)
	if err != nil {
		return err
	}
	return withEtcd(members, func(cli etcd.Client) error {
		_, list, err := cli.MemberList(ctx)
		if err != nil {
			return err
		}
		for _, m := range list {
			if m.ID == id {
				return fmt.Errorf("member %x still listed", id)
			}
		}
		return nil
	})
}
