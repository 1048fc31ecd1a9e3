package kit

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/carotation"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
	"github.com/quorumkeeper/etcd-operator/internal/etcdaccess"
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
// Each cluster has its own turn: a dial, which with auth logs in and may take the whole dial
// timeout against an unreachable cluster, holds up only the looks at that cluster, and a look
// that comes while another dials for the same cluster waits for that client instead of
// dialling a second one. A dial that failed is not tried again for the same cluster before a
// per-cluster backoff (clientRetryBase doubling to clientRetryMax) has passed, unless what
// the client depends on changed: an unreachable cluster with auth would otherwise spend a
// login timeout on every look.
//
// A client made with root's password while etcd had authentication off is not kept (nor one
// whose login found it off later): it holds no token, and clientv3 does not log in again once
// someone else turns authentication on (etcd.LoggedInWhileAuthOff). Such a cluster is dialled
// at every look until etcd takes the password; while auth is off, etcd answers the login
// without a raft proposal, so this costs a handshake per look, for as long as auth is off.
//
// The cluster controller never reconciles one cluster in two workers at once, so a client
// is not closed while another reconcile of the same cluster uses it.
type ClientCache struct {
	Reader client.Reader
	Open   ClientFactory
	// Now is the clock of the backoff; time.Now when nil.
	Now func() time.Time

	mu      sync.Mutex
	entries map[types.NamespacedName]*cachedClient
	// backoff spaces the dials of a cluster whose last dial failed.
	backoff Backoff
	// waiting counts the looks waiting for their cluster's turn (tests wait for them).
	waiting atomic.Int32
}

// The backoff of failed dials stays well under the cluster controller's own (retryMax): a
// quorum back after an outage is noticed within clientRetryMax of the look its Pods' events
// start, not a minute later.
const (
	clientRetryBase = time.Second
	clientRetryMax  = 16 * time.Second
)

// cachedClient is one cluster's client, or why none could be made. Its fields belong to
// whoever holds its turn.
type cachedClient struct {
	// turn is a one-slot lock that a waiter can give up on when its context ends.
	turn        chan struct{}
	fingerprint string
	client      etcd.Client
	// failed is the error of the last dial, made for failedFingerprint; no dial for that
	// fingerprint is made before retryAt.
	failed            error
	failedFingerprint string
	retryAt           time.Time
}

func (e *cachedClient) lock(ctx context.Context) error {
	select {
	case e.turn <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (e *cachedClient) unlock() { <-e.turn }

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
	e := cc.entry(key)
	cc.waiting.Add(1)
	err = e.lock(ctx)
	cc.waiting.Add(-1)
	if err != nil {
		return nil, err
	}
	defer e.unlock()
	if e.client != nil {
		if e.fingerprint == fp && !etcd.LoggedInWhileAuthOff(e.client) {
			return kept{e.client}, nil
		}
		_ = e.client.Close()
		e.client = nil
	}
	if e.failed != nil && e.failedFingerprint == fp && cc.now().Before(e.retryAt) {
		// The same error as the dial's, word for word: a status message that changed
		// between dialled and not would be written anew at every look.
		return nil, e.failed
	}
	cli, err := cc.Open(ctx, c, endpoints)
	if err != nil {
		e.failed, e.failedFingerprint = err, fp
		e.retryAt = cc.now().Add(cc.limiter().When(key))
		return nil, err
	}
	e.failed = nil
	cc.limiter().Forget(key)
	if !cc.holds(key, e) || etcd.LoggedInWhileAuthOff(cli) {
		// Forgotten while dialling (the cluster went): the caller closes this one. So too a
		// client that has root's password but logged in while etcd had auth off: it sends
		// no token, and once someone else turns auth on (a legacy operator before adoption)
		// etcd refuses it root for good; the next look dials anew and logs in.
		return cli, nil
	}
	e.client, e.fingerprint = cli, fp
	return kept{cli}, nil
}

// entry is the cluster's entry, made when there is none.
func (cc *ClientCache) entry(key types.NamespacedName) *cachedClient {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.entries == nil {
		cc.entries = map[types.NamespacedName]*cachedClient{}
	}
	e := cc.entries[key]
	if e == nil {
		e = &cachedClient{turn: make(chan struct{}, 1)}
		cc.entries[key] = e
	}
	return e
}

// holds says whether e is still the cluster's entry.
func (cc *ClientCache) holds(key types.NamespacedName, e *cachedClient) bool {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return cc.entries[key] == e
}

// Forget closes and drops the client of a cluster that is gone or going, and what the cache
// knows of its failed dials. It waits for a dial of that cluster in flight, if any.
func (cc *ClientCache) Forget(key types.NamespacedName) {
	cc.mu.Lock()
	e := cc.entries[key]
	delete(cc.entries, key)
	cc.mu.Unlock()
	if e != nil {
		// After the dial in flight, which would count a failure into the backoff.
		_ = e.lock(context.Background())
		defer e.unlock()
		if e.client != nil {
			_ = e.client.Close()
			e.client = nil
		}
	}
	cc.limiter().Forget(key)
}

// Len is the number of clients kept.
func (cc *ClientCache) Len() int {
	cc.mu.Lock()
	entries := make([]*cachedClient, 0, len(cc.entries))
	for _, e := range cc.entries {
		entries = append(entries, e)
	}
	cc.mu.Unlock()
	n := 0
	for _, e := range entries {
		_ = e.lock(context.Background())
		if e.client != nil {
			n++
		}
		e.unlock()
	}
	return n
}

func (cc *ClientCache) limiter() workqueue.TypedRateLimiter[types.NamespacedName] {
	return cc.backoff.Get(clientRetryBase, clientRetryMax)
}

func (cc *ClientCache) now() time.Time {
	if cc.Now != nil {
		return cc.Now()
	}
	return time.Now()
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
	for _, name := range ClientSecretNames(c) {
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

// ClientSecretNames are the Secrets the client factory reads for cluster c.
func ClientSecretNames(c *etcdv1.EtcdCluster) []string {
	var names []string
	if specs.ClientTLS(c) {
		names = append(names, specs.ServerSecretName(c))
		if n := specs.OperatorClientSecretName(c); n != "" {
			names = append(names, n)
		}
		if carotation.Active(c.Status.CARotation) {
			names = append(names, specs.CABundleSecretName(c.Name))
		}
	}
	if etcdaccess.AuthWanted(c) {
		names = append(names, c.Spec.Auth.RootCredentialsSecretRef.Name, specs.RootAppliedSecretName(c.Name))
	}
	return names
}

// kept is a cached client lent to one reconcile: its Close leaves the connection open.
type kept struct{ etcd.Client }

func (kept) Close() error { return nil }
