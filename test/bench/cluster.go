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

// waitFor polls check until it passes; the error says what did not happen and why.
func waitFor(ctx context.Context, timeout time.Duration, what string, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		err := check(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w (last: %w)", what, ctx.Err(), err)
		case <-time.After(pollInterval):
		}
	}
}

// member is one running etcd member as the host reaches it: by Pod IP, since the host does
// not resolve cluster names.
type member struct {
	pod, url string
}

// readyMembers lists the namespace's Pods and fails unless exactly n are there, none going
// away, all Ready; with n < 0, the Ready ones, at least one.
func (b *bench) readyMembers(ctx context.Context, ns string, n int) ([]member, error) {
	pods := &corev1.PodList{}
	if err := b.k8s.List(ctx, pods, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	var out []member
	for _, p := range pods.Items {
		if !p.DeletionTimestamp.IsZero() {
			continue
		}
		if !podReady(&p) || p.Status.PodIP == "" {
			if n < 0 {
				continue // any ready ones will do
			}
			return nil, fmt.Errorf("pod %s is not ready", p.Name)
		}
		out = append(out, member{pod: p.Name, url: "http://" + net.JoinHostPort(p.Status.PodIP, strconv.Itoa(specs.ClientPort))})
	}
	if (n >= 0 && len(out) != n) || len(out) == 0 {
		return nil, fmt.Errorf("%d Pods ready, want %d", len(out), n)
	}
	return out, nil
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
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
	members, err := b.readyMembers(ctx, ns, n)
	if err != nil {
		return err
	}
	return withEtcd(members, func(cli etcd.Client) error {
		for _, m := range members {
			if err := cli.Healthy(ctx, m.url); err != nil {
				return err
			}
		}
		return nil
	})
}

// follower is the Pod of a member that does not lead: losing it costs no election, so the
// time measured is that of bringing the member back, on both sides alike.
func (b *bench) follower(ctx context.Context, ns string, n int) (string, error) {
	members, err := b.readyMembers(ctx, ns, n)
	if err != nil {
		return "", err
	}
	var pod string
	err = withEtcd(members, func(cli etcd.Client) error {
		for _, m := range members {
			st, err := cli.Status(ctx, m.url)
			if err != nil {
				return err
			}
			if st.Leader != 0 && st.Leader != st.MemberID {
				pod = m.pod
				return nil
			}
		}
		return errors.New("no member follows a leader")
	})
	return pod, err
}

// allOn is nil once n members are ready and each one's etcd answers with version.
func (b *bench) allOn(ctx context.Context, ns string, n int, version string) error {
	members, err := b.readyMembers(ctx, ns, n)
	if err != nil {
		return err
	}
	return withEtcd(members, func(cli etcd.Client) error {
		for _, m := range members {
			st, err := cli.Status(ctx, m.url)
			if err != nil {
				return err
			}
			if st.Version != version {
				return fmt.Errorf("%s runs etcd %s", m.pod, st.Version)
			}
		}
		return nil
	})
}

// memberID is the etcd member ID of the member in Pod pod.
func (b *bench) memberID(ctx context.Context, ns, pod string) (uint64, error) {
	members, err := b.readyMembers(ctx, ns, -1)
	if err != nil {
		return 0, err
	}
	var id uint64
	err = withEtcd(members, func(cli etcd.Client) error {
		for _, m := range members {
			if m.pod == pod {
				st, err := cli.Status(ctx, m.url)
				id = st.MemberID
				return err
			}
		}
		return fmt.Errorf("no ready Pod %s", pod)
	})
	return id, err
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
	members, err := b.readyMembers(ctx, ns, -1)
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
