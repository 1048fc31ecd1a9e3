package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
	"github.com/quorumkeeper/etcd-operator/test/clusterenv"
	"github.com/quorumkeeper/etcd-operator/test/robustness"
)

const etcdVersion = "3.6.16"

// env is the cluster the scenarios run on.
type env struct {
	k8s      client.Client
	resolver *net.Resolver
	// deleting are the namespaces of scenarios done, whose deletion runs while the next
	// scenario does (waitDeleted waits for them at the end).
	deleting []string
}

func newEnv() (*env, error) {
	path := os.Getenv("KUBECONFIG")
	if path == "" {
		return nil, errors.New("KUBECONFIG is not set: run through 'make robustness', which starts the local cluster")
	}
	k8s, _, err := clusterenv.Client(path, clusterenv.RateLimit(50, 100))
	if err != nil {
		return nil, err
	}
	// Service names resolve through the cluster's DNS server (the local cluster's by
	// default), as for an application in it.
	resolver := clusterenv.Resolver(os.Getenv("ROBUSTNESS_CLUSTER_DNS"))
	return &env{k8s: k8s, resolver: resolver}, nil
}

// cluster is one scenario's EtcdCluster.
type cluster struct {
	e        *env
	ns, name string
	tls      *tls.Config // the workload's client TLS; nil without TLS
}

// newCluster makes a namespace and an EtcdCluster of n members in it, and waits until it
// has settled. The cluster is returned with an error too once its namespace exists, so
// that it can be deleted.
func (e *env) newCluster(ctx context.Context, s scenario, n int32) (*cluster, error) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "robustness-" + s.name + "-"}}
	if err := e.k8s.Create(ctx, ns); err != nil {
		return nil, err
	}
	c := &cluster{e: e, ns: ns.Name, name: "rb"}
	ec := &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: c.ns, Name: c.name},
		Spec: etcdv1.EtcdClusterSpec{Replicas: &n, Version: cmp.Or(s.version, etcdVersion), QuorumLoss: s.quorumLoss}}
	if s.tls {
		if err := c.setUpCA(ctx); err != nil {
			return c, err
		}
		ec.Spec.TLS = tlsSpec()
	}
	if err := e.k8s.Create(ctx, ec); err != nil {
		return c, err
	}
	return c, c.waitSettled(ctx, n, time.Time{})
}

// deleteNamespace starts the deletion of the cluster's namespace, and with it everything of
// the scenario, without waiting for it: a namespace takes about 40 s to go (its Pods' ends,
// the namespace controller's passes), which, waited for after each of 16 scenarios, was
// half of the short form's time. The next scenario's cluster lives in a namespace of its own
// and its faults (a node's crash or shutdown, the operator's restart) only slow a teardown
// down, never change what the next scenario checks: its history and its own cluster's IDs.
func (c *cluster) deleteNamespace(ctx context.Context) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: c.ns}}
	if err := c.e.k8s.Delete(ctx, ns); client.IgnoreNotFound(err) != nil {
		logf("deleting namespace %s: %v", c.ns, err)
		return
	}
	c.e.deleting = append(c.e.deleting, c.ns)
}

// waitDeleted waits until every namespace whose deletion deleteNamespace started is gone, so
// that a run leaves the local cluster as it found it.
func (e *env) waitDeleted(ctx context.Context) {
	for _, name := range e.deleting {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		err := poll(ctx, 3*time.Minute, "namespace "+name+" gone", func(ctx context.Context) error {
			err := e.k8s.Get(ctx, client.ObjectKeyFromObject(ns), ns)
			if apierrors.IsNotFound(err) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("not known to be gone: %w", err)
			}
			return fmt.Errorf("still there, %s", ns.Status.Phase)
		})
		if err != nil {
			logf("%v", err)
		}
	}
	e.deleting = nil
}

func (c *cluster) get(ctx context.Context) (*etcdv1.EtcdCluster, error) {
	ec := &etcdv1.EtcdCluster{}
	return ec, c.e.k8s.Get(ctx, client.ObjectKey{Namespace: c.ns, Name: c.name}, ec)
}

func (c *cluster) setReplicas(ctx context.Context, n int32) error {
	ec, err := c.get(ctx)
	if err != nil {
		return err
	}
	patch := client.MergeFrom(ec.DeepCopy())
	ec.Spec.Replicas = &n
	return c.e.k8s.Patch(ctx, ec, patch)
}

// waitSettled waits until the status, written for the current spec, shows n healthy voters
// (or, for 0, the cluster paused), nothing in motion, and, after a disruption at since, a
// condition that changed after it: the status from before the disruption does not count.
// That a condition changed may also be the tail of an earlier disruption; a trial that knows
// what its own fault must leave behind passes that as also, checked on the same status.
func (c *cluster) waitSettled(ctx context.Context, n int32, since time.Time, also ...func(*etcdv1.EtcdCluster) error) error {
	return poll(ctx, 6*time.Minute, fmt.Sprintf("%s/%s settled at %d", c.ns, c.name, n), func(ctx context.Context) error {
		ec, err := c.get(ctx)
		if err != nil {
			return err
		}
		for _, check := range also {
			if err := check(ec); err != nil {
				return err
			}
		}
		s := ec.Status
		pods, err := c.pods(ctx)
		if err != nil {
			return err
		}
		if err := robustness.SeenSince(s.Conditions, pods, int(n), since); err != nil {
			return err
		}
		if n > 0 {
			return robustness.Settled(ec, n)
		}
		if s.ObservedGeneration != ec.Generation {
			return fmt.Errorf("status of generation %d, spec is %d", s.ObservedGeneration, ec.Generation)
		}
		if cond := meta.FindStatusCondition(s.Conditions, etcdv1.ConditionAvailable); cond == nil || cond.Reason != "Paused" {
			return fmt.Errorf("not paused: %+v", cond)
		}
		return c.noPods(ctx)
	})
}

func (c *cluster) noPods(ctx context.Context) error {
	pods, err := c.pods(ctx)
	if err != nil {
		return err
	}
	if len(pods) > 0 {
		return fmt.Errorf("%d Pods still there", len(pods))
	}
	return nil
}

// pods are the cluster's member Pods.
func (c *cluster) pods(ctx context.Context) ([]corev1.Pod, error) {
	list := &corev1.PodList{}
	err := c.e.k8s.List(ctx, list, client.InNamespace(c.ns), client.MatchingLabels{etcdv1.LabelCluster: c.name})
	return list.Items, err
}

// endpoints are the client Service's addresses as the cluster's DNS gives them.
func (c *cluster) endpoints(ctx context.Context) ([]string, error) {
	ips, err := c.e.resolver.LookupHost(ctx, fmt.Sprintf("%s.%s.svc.cluster.local", specs.ClientServiceName(c.name), c.ns))
	if err != nil {
		return nil, err
	}
	scheme := "http"
	if c.tls != nil {
		scheme = "https"
	}
	out := make([]string, 0, len(ips))
	for _, ip := range ips {
		out = append(out, scheme+"://"+net.JoinHostPort(ip, fmt.Sprint(specs.ClientPort)))
	}
	return out, nil
}

// dial makes n etcd clients through the client Service.
func (c *cluster) dial(ctx context.Context, n int) ([]*clientv3.Client, error) {
	var eps []string
	if err := poll(ctx, time.Minute, "the client Service resolving", func(ctx context.Context) (err error) {
		eps, err = c.endpoints(ctx)
		return err
	}); err != nil {
		return nil, err
	}
	var out []*clientv3.Client
	for range n {
		cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, TLS: c.tls, Logger: quietLogger()})
		if err != nil {
			return nil, err
		}
		out = append(out, cli)
	}
	return out, nil
}

// refresh points a client at the members the Service routes to now, as a Service would
// route new connections.
func (c *cluster) refresh(ctx context.Context, cli *clientv3.Client) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if eps, err := c.endpoints(ctx); err == nil && len(eps) > 0 {
		cli.SetEndpoints(eps...)
	}
}

// poll runs check every second until it passes; the error says what did not happen and
// the last reason.
func poll(ctx context.Context, timeout time.Duration, what string, check func(context.Context) error) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		err := check(ctx)
		if err != nil && ctx.Err() != nil && last != nil {
			return false, nil // cut off by the deadline: the check before says more
		}
		last = err
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("%s: %w (last: %w)", what, err, last)
	}
	return nil
}

// quietLogger keeps the etcd client's retries out of the output: the history records them.
func quietLogger() *zap.Logger { return zap.NewNop() }
