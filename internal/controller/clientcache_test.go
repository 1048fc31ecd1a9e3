package controller

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
	"github.com/quorumkeeper/etcd-operator/internal/etcd/etcdfake"
)

// countedClient is a fake client that records whether it was closed.
type countedClient struct {
	*etcdfake.Cluster
	id     int
	closed bool
}

func (c *countedClient) Close() error { c.closed = true; return nil }

type cacheBed struct {
	t      *testing.T
	api    client.Client
	cache  *ClientCache
	opened []*countedClient
}

func newCacheBed(t *testing.T) *cacheBed {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = etcdv1.AddToScheme(scheme)
	b := &cacheBed{t: t, api: fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		secret("server", map[string][]byte{"tls.crt": []byte("a")}),
		secret("operator", map[string][]byte{"tls.crt": []byte("a")}),
		secret("unrelated", map[string][]byte{"x": []byte("a")}),
	).Build()}
	b.cache = NewClientCache(b.api, func(context.Context, *etcdv1.EtcdCluster, []string) (etcd.Client, error) {
		cli := &countedClient{Cluster: etcdfake.New(), id: len(b.opened) + 1}
		b.opened = append(b.opened, cli)
		return cli, nil
	})
	return b
}

func cacheCluster(name, uid string) *etcdv1.EtcdCluster {
	c := &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(uid)}}
	userSecretsSpec(c)
	return c
}

// get returns which opened client (1, 2, ...) the cache lent.
func (b *cacheBed) get(c *etcdv1.EtcdCluster, endpoints ...string) int {
	b.t.Helper()
	cli, err := b.cache.Client(context.Background(), c, endpoints)
	if err != nil {
		b.t.Fatal(err)
	}
	if err := cli.Close(); err != nil { // a reconcile closes what it got; the cache keeps it
		b.t.Fatal(err)
	}
	return len(b.opened)
}

func (b *cacheBed) touch(name string) {
	b.t.Helper()
	s := &corev1.Secret{}
	if err := b.api.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: name}, s); err != nil {
		b.t.Fatal(err)
	}
	s.Data["tls.crt"] = []byte(time.Now().String())
	if err := b.api.Update(context.Background(), s); err != nil {
		b.t.Fatal(err)
	}
}

func TestClientCacheReusesTheClientWhileNothingChanged(t *testing.T) {
	b := newCacheBed(t)
	c := cacheCluster("db", "uid-1")
	for range 3 {
		b.get(c, "https://a:2379", "https://b:2379")
	}
	b.get(c, "https://b:2379", "https://a:2379") // the same endpoints in another order
	b.touch("unrelated")
	b.get(c, "https://a:2379", "https://b:2379")
	if len(b.opened) != 1 || b.opened[0].closed {
		t.Fatalf("%d clients opened (first closed: %v), want one kept open", len(b.opened), b.opened[0].closed)
	}
}

func TestClientCacheRebuildsWhenASecretChanges(t *testing.T) {
	for _, name := range []string{"server", "operator"} {
		t.Run(name, func(t *testing.T) {
			b := newCacheBed(t)
			c := cacheCluster("db", "uid-1")
			b.get(c, "https://a:2379")
			b.touch(name)
			if n := b.get(c, "https://a:2379"); n != 2 {
				t.Fatalf("%d clients after Secret %s changed, want a second", n, name)
			}
			if !b.opened[0].closed || b.opened[1].closed {
				t.Fatalf("old closed %v, new closed %v: want the old one closed, the new one open", b.opened[0].closed, b.opened[1].closed)
			}
			b.get(c, "https://a:2379")
			if len(b.opened) != 2 {
				t.Fatalf("%d clients: the new one was not reused", len(b.opened))
			}
		})
	}
}

func TestClientCacheRebuildsForNewEndpointsOrANewCluster(t *testing.T) {
	b := newCacheBed(t)
	b.get(cacheCluster("db", "uid-1"), "https://a:2379")
	if n := b.get(cacheCluster("db", "uid-1"), "https://a:2379", "https://c:2379"); n != 2 {
		t.Fatalf("%d clients after a member was added, want 2", n)
	}
	if n := b.get(cacheCluster("db", "uid-2"), "https://a:2379", "https://c:2379"); n != 3 {
		t.Fatalf("%d clients for a cluster re-created under the same name, want 3", n)
	}
	if n := b.get(cacheCluster("other", "uid-3"), "https://x:2379"); n != 4 || b.opened[2].closed {
		t.Fatalf("another cluster: %d clients, db's closed %v; want its own client and db's kept", n, b.opened[2].closed)
	}
	if b.cache.Len() != 2 {
		t.Fatalf("%d clients kept, want one per cluster", b.cache.Len())
	}
}

// cacheClients gives the harness's reconciler a client cache; what it returns lists the
// clients the cache opened, in order.
func cacheClients(h *harness) *[]*countedClient {
	var opened []*countedClient
	h.r.Clients = NewClientCache(h.api, func(context.Context, *etcdv1.EtcdCluster, []string) (etcd.Client, error) {
		cli := &countedClient{Cluster: h.etcd}
		opened = append(opened, cli)
		return cli, nil
	})
	return &opened
}

func TestClientCacheClosesTheClientOfADeletedCluster(t *testing.T) {
	h := newHarness(t)
	opened := cacheClients(h)
	h.reconcile()
	h.running()
	h.reconcile()
	if len(*opened) != 1 || h.r.Clients.Len() != 1 {
		t.Fatalf("%d clients opened over three reconciles, %d kept; want one", len(*opened), h.r.Clients.Len())
	}
	if err := h.api.Delete(context.Background(), h.clusterObj()); err != nil {
		t.Fatal(err)
	}
	h.reconcile()
	if !(*opened)[0].closed || h.r.Clients.Len() != 0 {
		t.Fatalf("client closed %v, %d kept after the cluster was deleted", (*opened)[0].closed, h.r.Clients.Len())
	}
}

func TestRepeatedFailuresBackOffAndProgressResetsThem(t *testing.T) {
	r := &ClusterReconciler{}
	key := types.NamespacedName{Namespace: "ns", Name: "db"}
	unreachable := waitFor("Unreachable", "etcd does not answer")
	var got []time.Duration
	for range 8 {
		got = append(got, r.retryAfter(key, unreachable))
	}
	want := []time.Duration{1, 2, 4, 8, 16, 32, 60, 60}
	for i := range want {
		if got[i] != want[i]*time.Second {
			t.Fatalf("retries %v, want %v seconds", got, want)
		}
	}
	if d := r.retryAfter(key, waitFor("Scaling", "learner db-4 is catching up")); d != time.Second {
		t.Fatalf("a learner catching up is looked at after %v, want 1s", d)
	}
	if d := r.retryAfter(key, unreachable); d != time.Second {
		t.Fatalf("after progress the next failure waits %v, want the backoff to start again at 1s", d)
	}
	if d := r.retryAfter(types.NamespacedName{Namespace: "ns", Name: "other"}, unreachable); d != time.Second {
		t.Fatalf("another cluster waits %v: backoff must be per cluster", d)
	}
}

// A cached client whose members did not answer is not lent again: its connections would wait
// out gRPC's reconnect backoff, and the look that follows etcd's first answer would miss it.
func TestAClientThatFoundNoMemberServingIsOpenedAgain(t *testing.T) {
	h := newHarness(t)
	opened := cacheClients(h)
	h.reconcile() // creates the founding members: nothing to ask yet
	h.reconcile() // the members' Pods are not running: the member list fails
	if len(*opened) != 1 || !(*opened)[0].closed || h.r.Clients.Len() != 0 {
		t.Fatalf("%d clients opened, first closed %v, %d kept; want the one that found nothing closed and dropped", len(*opened), len(*opened) > 0 && (*opened)[0].closed, h.r.Clients.Len())
	}
	h.running()
	h.reconcile()
	h.reconcile()
	if len(*opened) != 2 || (*opened)[1].closed || h.r.Clients.Len() != 1 {
		t.Fatalf("%d clients opened, the second closed %v: want a new client once etcd answers, then kept", len(*opened), len(*opened) > 1 && (*opened)[1].closed)
	}
}
