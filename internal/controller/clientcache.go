package controller

import (
	"context"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// ClientCache keeps one etcd client per cluster between reconciles. A fresh client costs a
// TLS handshake per member and, with auth, a login that etcd commits through raft; a
// cluster looked at every second would pay both every second. A client is reused while
// what it was built from is unchanged: the cluster (by UID), its endpoints, and the
// resourceVersion of every Secret the factory reads (certificates, root's password and the
// applied one). Any change, a renewal by cert-manager included, builds a new client and
// closes the old one; Forget closes it when the cluster is gone.
//
// The cluster controller never reconciles one cluster in two workers at once, so a client
// is not closed while another reconcile of the same cluster uses it.
type ClientCache struct {
	Reader client.Reader
	Open   ClientFactory

	mu      sync.Mutex
	entries map[types.NamespacedName]*cachedClient
}

type cachedClient struct {
	fingerprint string
	client      etcd.Client
}

// NewClientCache caches the clients open builds; reader reads the metadata of the Secrets
// they depend on. In the operator it is the manager's cache, not its client: the client
// reads every Secret live (cmd/etcd-operator's clientOptions), metadata included, which
// would cost an API request per Secret on every reconcile of every cluster.
func NewClientCache(reader client.Reader, open ClientFactory) *ClientCache {
	return &ClientCache{Reader: reader, Open: open}
}

// Client returns the cluster's client for these endpoints, built anew only when something it
// depends on changed. Closing what it returns does nothing: the cache owns the client.
func (cc *ClientCache) Client(ctx context.Context, c *etcdv1.EtcdCluster, endpoints []string) (etcd.Client, error) {
	fp, err := cc.fingerprint(ctx, c, endpoints)
	if err != nil {
		return nil, err
	}
	key := client.ObjectKeyFromObject(c)
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if e := cc.entries[key]; e != nil {
		if e.fingerprint == fp {
			return kept{e.client}, nil
		}
		_ = e.client.Close()
		delete(cc.entries, key)
	}
	cli, err := cc.Open(ctx, c, endpoints)
	if err != nil {
		return nil, err
	}
	if cc.entries == nil {
		cc.entries = map[types.NamespacedName]*cachedClient{}
	}
	cc.entries[key] = &cachedClient{fingerprint: fp, client: cli}
	return kept{cli}, nil
}

// Forget closes and drops the client of a cluster that is gone or going.
func (cc *ClientCache) Forget(key types.NamespacedName) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if e := cc.entries[key]; e != nil {
		_ = e.client.Close()
		delete(cc.entries, key)
	}
}

// Len is the number of clients kept.
func (cc *ClientCache) Len() int {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return len(cc.entries)
}

// fingerprint names everything a client of c depends on. Only the Secrets' metadata is read
// (their resourceVersion): the manager's cache serves it from the metadata informer the
// cluster controller's Secret watch keeps, so this costs no API request, while whole Secrets
// are never cached. A renewal the informer has not seen yet is picked up at the reconcile its
// event starts.
func (cc *ClientCache) fingerprint(ctx context.Context, c *etcdv1.EtcdCluster, endpoints []string) (string, error) {
	sorted := slices.Clone(endpoints)
	slices.Sort(sorted)
	parts := []string{string(c.UID), strings.Join(sorted, ",")}
	for _, name := range clientSecretNames(c) {
		s := &metav1.PartialObjectMetadata{}
		s.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
		err := cc.Reader.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: name}, s)
		switch {
		case apierrors.IsNotFound(err):
			parts = append(parts, name+"=absent")
		case err != nil:
			return "", err
		default:
			parts = append(parts, name+"="+s.ResourceVersion)
		}
	}
	return strings.Join(parts, " "), nil
}

// clientSecretNames are the Secrets the client factory reads for cluster c.
func clientSecretNames(c *etcdv1.EtcdCluster) []string {
	var names []string
	if specs.ClientTLS(c) {
		names = append(names, specs.ServerSecretName(c))
		if n := specs.OperatorClientSecretName(c); n != "" {
			names = append(names, n)
		}
	}
	if authWanted(c) {
		names = append(names, c.Spec.Auth.RootCredentialsSecretRef.Name, specs.RootAppliedSecretName(c.Name))
	}
	return names
}

// kept is a cached client lent to one reconcile: its Close leaves the connection open.
type kept struct{ etcd.Client }

func (kept) Close() error { return nil }
