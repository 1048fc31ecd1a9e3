package kit

import (
	"context"
	"errors"
	"sync"
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
	"github.com/quorumkeeper/etcd-operator/internal/etcdfake"
)

// countedClient is a fake client that records whether it was closed.
type countedClient struct {
	*etcdfake.Cluster
	id     int
	closed bool
	// authOff: the client logged in with root's password while etcd had auth off.
	authOff bool
}

func (c *countedClient) Close() error { c.closed = true; return nil }

func (c *countedClient) LoggedInWhileAuthOff() bool { return c.authOff }

type cacheBed struct {
	t      *testing.T
	api    client.Client
	cache  *ClientCache
	opened []*countedClient
	// authOff: the clients opened now log in while etcd has auth off.
	authOff bool
}

func newCacheBed(t *testing.T) *cacheBed {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = etcdv1.AddToScheme(scheme)
	b := &cacheBed{t: t, api: fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		cacheSecret("server", map[string][]byte{"tls.crt": []byte("a")}),
		cacheSecret("operator", map[string][]byte{"tls.crt": []byte("a")}),
		cacheSecret("unrelated", map[string][]byte{"x": []byte("a")}),
	).Build()}
	b.cache = NewClientCache(b.api, func(context.Context, *etcdv1.EtcdCluster, []string) (etcd.Client, error) {
		cli := &countedClient{Cluster: etcdfake.New(), id: len(b.opened) + 1, authOff: b.authOff}
		b.opened = append(b.opened, cli)
		return cli, nil
	})
	return b
}

func cacheCluster(name, uid string) *etcdv1.EtcdCluster {
	c := &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(uid)}}
	c.Spec.TLS = &etcdv1.EtcdClusterTLS{Client: &etcdv1.ClientTLS{
		ServerSecretRef:         &corev1.LocalObjectReference{Name: "server"},
		OperatorClientSecretRef: &corev1.LocalObjectReference{Name: "operator"},
	}}
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

// A client that logged in with root's password while etcd had auth off holds no token, and
// once a legacy operator turns auth on it is refused root for good: it is not kept, and a kept
// client whose login later found auth off is dropped.
func TestClientCacheKeepsNoClientThatLoggedInWhileAuthWasOff(t *testing.T) {
	b := newCacheBed(t)
	c := cacheCluster("db", "uid-1")
	b.authOff = true
	for want := 1; want <= 2; want++ {
		if n := b.get(c, "https://a:2379"); n != want || !b.opened[want-1].closed {
			t.Fatalf("look %d: client %d of %d, closed %v; want each look to dial anew and the client closed by its reconcile", want, n, len(b.opened), b.opened[n-1].closed)
		}
	}
	b.authOff = false // auth is on now: the next login gets a token
	b.get(c, "https://a:2379")
	if n := b.get(c, "https://a:2379"); n != 3 || b.opened[2].closed {
		t.Fatalf("%d clients, third closed %v: want the client that logged in with auth on kept", n, b.opened[2].closed)
	}
	b.opened[2].authOff = true // auth turned off by hand, and the client logged in again
	if n := b.get(c, "https://a:2379"); n != 4 || !b.opened[2].closed {
		t.Fatalf("%d clients, third closed %v: want the kept client dropped once its login found auth off", n, b.opened[2].closed)
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

// dialBed is a client cache whose dials a test holds and fails at will, per cluster.
type dialBed struct {
	*cacheBed
	mu      sync.Mutex
	dials   map[string]int
	entered chan string              // a dial started, for the cluster named
	hold    map[string]chan struct{} // a dial of the cluster named waits for this to close
	fail    map[string]error         // a dial of the cluster named fails so
	now     time.Time
}

func newDialBed(t *testing.T) *dialBed {
	b := &dialBed{cacheBed: newCacheBed(t), dials: map[string]int{}, entered: make(chan string, 16),
		hold: map[string]chan struct{}{}, fail: map[string]error{}, now: time.Unix(1_800_000_000, 0)}
	b.cache.Now = func() time.Time { b.mu.Lock(); defer b.mu.Unlock(); return b.now }
	b.cache.Open = func(_ context.Context, c *etcdv1.EtcdCluster, _ []string) (etcd.Client, error) {
		b.mu.Lock()
		b.dials[c.Name]++
		hold, fail := b.hold[c.Name], b.fail[c.Name]
		b.mu.Unlock()
		b.entered <- c.Name
		if hold != nil {
			<-hold
		}
		if fail != nil {
			return nil, fail
		}
		return &countedClient{Cluster: etcdfake.New()}, nil
	}
	return b
}

func (b *dialBed) dialsOf(name string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.dials[name]
}

func (b *dialBed) advance(d time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.now = b.now.Add(d)
}

// getAsync asks for the cluster's client in the background; the channel has the error.
func (b *dialBed) getAsync(c *etcdv1.EtcdCluster) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := b.cache.Client(context.Background(), c, []string{"https://" + c.Name + ":2379"})
		done <- err
	}()
	return done
}

// within fails the test unless done reports within a bound that only a hang exceeds.
func within(t *testing.T, done <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not return", what)
		return nil
	}
}

func TestClientCacheADialThatHangsHoldsUpNoOtherCluster(t *testing.T) {
	b := newDialBed(t)
	release := make(chan struct{})
	b.hold["a"] = release
	defer close(release)
	hung := b.getAsync(cacheCluster("a", "uid-a"))
	if name := <-b.entered; name != "a" {
		t.Fatalf("dial of %s, want a", name)
	}
	if err := within(t, b.getAsync(cacheCluster("b", "uid-b")), "a client of cluster b while a's dial hangs"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-hung:
		t.Fatalf("a's client came (%v) before its dial was let go", err)
	default:
	}
}

func TestClientCacheConcurrentLooksAtOneClusterDialOnce(t *testing.T) {
	b := newDialBed(t)
	release := make(chan struct{})
	b.hold["a"] = release
	c := cacheCluster("a", "uid-a")
	first := b.getAsync(c)
	<-b.entered
	var others []<-chan error
	for range 4 {
		others = append(others, b.getAsync(c))
	}
	// Every other look is waiting for the first one's dial before it is let go.
	for deadline := time.Now().Add(10 * time.Second); b.cache.waiting.Load() < 4 && b.dialsOf("a") == 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d looks wait for the dial, want 4", b.cache.waiting.Load())
		}
	}
	close(release)
	for _, done := range append(others, first) {
		if err := within(t, done, "a client of cluster a"); err != nil {
			t.Fatal(err)
		}
	}
	if n := b.dialsOf("a"); n != 1 || b.cache.Len() != 1 {
		t.Fatalf("%d dials for five looks at one cluster, %d clients kept; want one of each", n, b.cache.Len())
	}
}

func TestClientCacheAFailedDialIsRetriedAfterABackoffPerCluster(t *testing.T) {
	b := newDialBed(t)
	a, other := cacheCluster("a", "uid-a"), cacheCluster("b", "uid-b")
	refused := errors.New("etcd client for [https://a:2379]: context deadline exceeded")
	b.fail["a"], b.fail["b"] = refused, refused
	look := func() {
		t.Helper()
		if err := within(t, b.getAsync(a), "a look at cluster a"); !errors.Is(err, refused) {
			t.Fatalf("a look at a failing cluster returned %v, want the dial's error", err)
		}
	}
	look()
	look()
	if n := b.dialsOf("a"); n != 1 {
		t.Fatalf("%d dials for two looks within a second of a failed one, want 1", n)
	}
	if err := within(t, b.getAsync(other), "a look at cluster b"); !errors.Is(err, refused) || b.dialsOf("b") != 1 {
		t.Fatalf("cluster b: %v after %d dials; want its own first dial, a's backoff is a's", err, b.dialsOf("b"))
	}
	// The waits double from clientRetryBase to clientRetryMax: a look just before each
	// wait ends dials nothing, one at its end dials.
	for wait := clientRetryBase; wait <= 4*clientRetryMax; wait *= 2 {
		want := min(wait, clientRetryMax)
		dials := b.dialsOf("a")
		b.advance(want - time.Millisecond)
		look()
		b.advance(time.Millisecond)
		look()
		if n := b.dialsOf("a") - dials; n != 1 {
			t.Fatalf("%d dials within a wait of %v, want one at its end", n, want)
		}
	}
	// A Secret the client depends on changed (a password fixed): dialled at once.
	dials := b.dialsOf("a")
	b.touch("server")
	look()
	if n := b.dialsOf("a") - dials; n != 1 {
		t.Fatalf("%d dials after a Secret changed, want one at once", n)
	}
	b.mu.Lock()
	b.fail["a"] = nil
	b.mu.Unlock()
	b.touch("server")
	if err := within(t, b.getAsync(a), "a look at cluster a"); err != nil {
		t.Fatal(err)
	}
	// A success starts the backoff again from its base.
	dials = b.dialsOf("a")
	b.mu.Lock()
	b.fail["a"] = refused
	b.mu.Unlock()
	b.touch("server")
	look()
	b.advance(clientRetryBase)
	look()
	if n := b.dialsOf("a") - dials; n != 2 {
		t.Fatalf("%d dials: after a success, a failed dial must be retried after %v again", n, clientRetryBase)
	}
}

// Forget while a dial is in flight: the client dialled is handed to the look that asked for
// it, not kept by a cache that no longer knows the cluster.
func TestClientCacheForgetDuringADialKeepsNothing(t *testing.T) {
	b := newDialBed(t)
	release := make(chan struct{})
	b.hold["a"] = release
	c := cacheCluster("a", "uid-a")
	var cli etcd.Client
	done := make(chan error, 1)
	go func() {
		var err error
		cli, err = b.cache.Client(context.Background(), c, []string{"https://a:2379"})
		done <- err
	}()
	<-b.entered
	forgotten := make(chan error, 1)
	go func() { b.cache.Forget(client.ObjectKeyFromObject(c)); forgotten <- nil }()
	// Forget drops the entry at once, then waits for the dial to end.
	dropped := func() bool {
		b.cache.mu.Lock()
		defer b.cache.mu.Unlock()
		return b.cache.entries[client.ObjectKeyFromObject(c)] == nil
	}
	for deadline := time.Now().Add(10 * time.Second); !dropped(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("Forget did not drop the entry")
		}
	}
	close(release)
	if err := within(t, done, "the dial"); err != nil {
		t.Fatal(err)
	}
	_ = within(t, forgotten, "Forget")
	if _, ok := cli.(kept); ok {
		t.Fatal("a client dialled for a forgotten cluster was lent as the cache's own: nobody would close it")
	}
}

func cacheSecret(name string, data map[string][]byte) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Data: data}
}
