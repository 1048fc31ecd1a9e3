// Package clusterenv is what the programs that run against the local cluster (test/e2e,
// test/legacy, the robustness runner test/cmd/robustness) set up alike: a client of the
// cluster in KUBECONFIG that knows our kinds, and a resolver that asks the cluster's DNS
// server, so that a writer reaches a Service by its name as an application in the cluster
// does.
package clusterenv

import (
	"context"
	"net"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

// DefaultDNS is the local cluster's DNS server.
const DefaultDNS = "10.213.0.1:53"

// Option changes the config a client is made from.
type Option func(*rest.Config)

// RateLimit lets the client make qps requests a second, in bursts of up to burst, in place of
// client-go's default (5 a second, bursts of 10).
func RateLimit(qps float32, burst int) Option {
	return func(cfg *rest.Config) { cfg.QPS, cfg.Burst = qps, burst }
}

// Client is a client of the cluster the kubeconfig at path names, with client-go's kinds and
// ours in its scheme, and the config it was made from (watches need one: the client cannot
// watch), opts applied to it.
func Client(path string, opts ...Option) (client.Client, *rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, nil, err
	}
	for _, opt := range opts {
		opt(cfg)
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, nil, err
	}
	if err := etcdv1.AddToScheme(scheme); err != nil {
		return nil, nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, nil, err
	}
	return c, cfg, nil
}

// Resolver resolves names through the DNS server at addr (host:port), DefaultDNS when addr
// is empty.
func Resolver(addr string) *net.Resolver {
	if addr == "" {
		addr = DefaultDNS
	}
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}}
}

// EventCount is how many times the events of namespace ns said reason, the repeats of a
// series included.
func EventCount(ctx context.Context, c client.Client, ns, reason string) (int, error) {
	list := &eventsv1.EventList{}
	if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
		return 0, err
	}
	n := 0
	for _, e := range list.Items {
		if e.Reason != reason {
			continue
		}
		n++
		if e.Series != nil {
			n = n - 1 + max(1, int(e.Series.Count)) // a series counts every occurrence
		}
	}
	return n, nil
}
