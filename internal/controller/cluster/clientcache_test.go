package cluster

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller/kit"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
)

// closeCountedClient is a fake client that records whether it was closed.
type closeCountedClient struct {
	etcd.Client
	closed bool
}

func (c *closeCountedClient) Close() error { c.closed = true; return nil }

// cacheClients gives the harness's reconciler a client cache; what it returns lists the
// clients the cache opened, in order.
func cacheClients(h *harness) *[]*closeCountedClient {
	var opened []*closeCountedClient
	h.r.Clients = kit.NewClientCache(h.api, func(context.Context, *etcdv1.EtcdCluster, []string) (etcd.Client, error) {
		cli := &closeCountedClient{Client: h.etcd}
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
	r := &Reconciler{}
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
	if d := r.retryAfter(key, waitFor("Scaling", "db-4 is being created")); d != time.Second {
		t.Fatalf("a scale-out under way is looked at after %v, want 1s", d)
	}
	if d := r.retryAfter(key, catchingUp("db-4")); d != catchUpPoll {
		t.Fatalf("a learner catching up is looked at after %v, want %v: each look it waits beyond its catch-up adds to the step", d, catchUpPoll)
	}
	if d := r.retryAfter(key, kit.Waiting{Reason: "QuorumLost", RetryIn: time.Millisecond}); d != retryFloor {
		t.Fatalf("a wait that ends in 1ms is looked at after %v, want no sooner than %v", d, retryFloor)
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

// etcd refusing a learner as unhealthy is asked again every addRefusedPoll while every voter
// answers (its 5-s connection window ends by itself), and backs off while one does not.
func TestARefusedAddRetriesSoonOnlyWhileEveryVoterIsHealthy(t *testing.T) {
	cases := []struct {
		name           string
		total, healthy int
		want           []time.Duration
	}{
		{"every voter healthy", 4, 4, []time.Duration{addRefusedPoll, addRefusedPoll, addRefusedPoll, addRefusedPoll}},
		{"a voter down", 4, 3, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := &Reconciler{}
			key := types.NamespacedName{Namespace: "ns", Name: "db"}
			var got []time.Duration
			for range tc.want {
				got = append(got, r.retryAfter(key, addRefused("db-5", tc.total, tc.healthy)))
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("retries after %v, want %v", got, tc.want)
			}
		})
	}
}

// Founding members whose Pods run are electing: looked at every second. One whose Pod has not
// started wakes the cluster when it does: no look before the resync.
func TestFoundingMembersArePolledOnlyWhileTheirPodsRun(t *testing.T) {
	running := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	pending := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending}}
	cases := []struct {
		name string
		pods map[string]*corev1.Pod
		want time.Duration
	}{
		{"all running", map[string]*corev1.Pod{"db-1": running, "db-2": running, "db-3": running}, time.Second},
		{"one pending", map[string]*corev1.Pod{"db-1": running, "db-2": pending, "db-3": running}, resyncPeriod},
		{"one without a Pod", map[string]*corev1.Pod{"db-1": running, "db-3": running}, resyncPeriod},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := &Reconciler{}
			key := types.NamespacedName{Namespace: "ns", Name: "db"}
			for range 3 {
				if d := r.retryAfter(key, foundingWait([]string{"db-1", "db-2", "db-3"}, tc.pods)); d != tc.want {
					t.Fatalf("looked at again after %v, want %v", d, tc.want)
				}
			}
		})
	}
}

func deleting(pod *corev1.Pod) *corev1.Pod {
	pod = pod.DeepCopy()
	pod.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	return pod
}

// A member whose Pod is not Ready, or is being deleted, is waited for a second at most; a
// Ready one, three.
func TestAskTimeoutFollowsThePodsReadiness(t *testing.T) {
	ready := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
	starting := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}}}
	cases := []struct {
		name string
		pod  *corev1.Pod
		want time.Duration
	}{
		{"Ready", ready, 3 * time.Second},
		{"not Ready", starting, time.Second},
		{"no Pod in the look", nil, time.Second},
		{"Ready but being deleted", deleting(ready), time.Second},
	}
	for _, tc := range cases {
		if got := askTimeout(tc.pod); got != tc.want {
			t.Errorf("%s: waited %v, want %v", tc.name, got, tc.want)
		}
	}
}
