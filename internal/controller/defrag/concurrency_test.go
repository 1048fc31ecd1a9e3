package defrag

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
	"github.com/quorumkeeper/etcd-operator/internal/etcdfake"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// hangingDefrag holds every Defragment until release closes; entered says one began.
type hangingDefrag struct {
	etcd.Client
	entered chan<- string
	release <-chan struct{}
}

func (h hangingDefrag) Defragment(ctx context.Context, endpoint string) error {
	h.entered <- endpoint
	select {
	case <-h.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return h.Client.Defragment(ctx, endpoint)
}

func (hangingDefrag) Close() error { return nil }

// staleDefrags lists the EtcdDefrags as they were when it was made, as a cache behind the
// API server does; everything else is live.
type staleDefrags struct {
	client.Client
	list etcdv1.EtcdDefragList
}

func (s staleDefrags) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if l, ok := list.(*etcdv1.EtcdDefragList); ok {
		s.list.DeepCopyInto(l)
		return nil
	}
	return s.Client.List(ctx, list, opts...)
}

func (h *passHarness) reconcileAsync(name string, times int) <-chan error {
	done := make(chan error, 1)
	go func() {
		for range times {
			if _, err := h.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: name}}); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	return done
}

func (h *passHarness) create(objs ...client.Object) {
	h.t.Helper()
	for _, o := range objs {
		if err := h.api.Create(context.Background(), o); err != nil {
			h.t.Fatal(err)
		}
	}
}

func passOf(name, cluster string) *etcdv1.EtcdDefrag {
	return &etcdv1.EtcdDefrag{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
		Spec: etcdv1.EtcdDefragSpec{ClusterRef: corev1.LocalObjectReference{Name: cluster}, Rule: &etcdv1.DefragRule{All: true}}}
}

// bounded waits for done; only a hang takes the bound.
func bounded(t *testing.T, done <-chan error, what string) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not return", what)
	}
}

// A member of cluster db defragmenting for minutes holds up db's pass only: a pass of another
// cluster runs to its end meanwhile.
func TestALongDefragmentationHoldsUpNoOtherCluster(t *testing.T) {
	h := newPassHarness(t, &etcdv1.DefragRule{All: true})
	other := &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: "ns"}, Spec: etcdv1.EtcdClusterSpec{Version: "3.6.16"}}
	otherEtcd := etcdfake.New()
	h.create(other, passOf("other-pass", "other"))
	for _, name := range []string{"other-1", "other-2", "other-3"} {
		h.create(&etcdv1.EtcdMember{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: specs.MemberLabels("other", name)},
			Spec: etcdv1.EtcdMemberSpec{ClusterName: "other", Version: "3.6.16"}})
		m := otherEtcd.SeedMember(name, specs.PeerURL(other, name), specs.ClientURL(other, name))
		otherEtcd.SetDBSize(m.ID, 30<<20, 20<<20)
	}
	entered, release := make(chan string, 4), make(chan struct{})
	h.r.NewClient = func(_ context.Context, c *etcdv1.EtcdCluster, _ []string) (etcd.Client, error) {
		if c.Name == "other" {
			return etcdfake.KeepOpen(otherEtcd), nil
		}
		return hangingDefrag{Client: h.etcd, entered: entered, release: release}, nil
	}
	dbPass := h.reconcileAsync("pass", 2) // starts, then defragments its first member: hangs
	<-entered
	bounded(t, h.reconcileAsync("other-pass", 20), "cluster other's pass, while a member of db defragments")
	d := &etcdv1.EtcdDefrag{}
	if err := h.api.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "other-pass"}, d); err != nil {
		t.Fatal(err)
	}
	if d.Status.Phase != etcdv1.EtcdDefragPhaseComplete || d.Status.Defragmented != 3 {
		t.Fatalf("cluster other's pass: %+v, want Complete with 3 defragmented while db's member defragments", d.Status)
	}
	close(release)
	bounded(t, dbPass, "db's pass once its member's defragmentation ended")
}

// Two passes of one cluster, with several workers: while one defragments a member, the other
// neither defragments another nor starts, though the cache does not show the first running.
func TestTwoPassesOfOneClusterNeverDefragmentTwoMembersAtOnce(t *testing.T) {
	h := newPassHarness(t, &etcdv1.DefragRule{All: true})
	h.create(passOf("second", "db"))
	stale := staleDefrags{Client: h.api}
	if err := h.api.List(context.Background(), &stale.list); err != nil {
		t.Fatal(err)
	}
	h.r.Client, h.r.APIReader = stale, h.api
	entered, release := make(chan string, 4), make(chan struct{})
	h.r.NewClient = func(context.Context, *etcdv1.EtcdCluster, []string) (etcd.Client, error) {
		return hangingDefrag{Client: h.etcd, entered: entered, release: release}, nil
	}
	first := h.reconcileAsync("pass", 2)
	<-entered
	second := h.reconcileAsync("second", 3)
	select {
	case err := <-second:
		if err != nil {
			t.Fatal(err)
		}
	case ep := <-entered:
		close(release)
		t.Fatalf("the second pass defragments %s while the first defragments another member", ep)
	case <-time.After(10 * time.Second):
		t.Fatal("the second pass's reconciles did not return")
	}
	close(release)
	bounded(t, first, "the first pass")
	// The first pass is Running between two members; the cache still shows it Pending.
	bounded(t, h.reconcileAsync("second", 1), "the second pass")
	d := &etcdv1.EtcdDefrag{}
	if err := h.api.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "second"}, d); err != nil {
		t.Fatal(err)
	}
	if w := meta.FindStatusCondition(d.Status.Conditions, "Waiting"); d.Status.Phase == etcdv1.EtcdDefragPhaseRunning || w == nil || w.Reason != "AnotherPassRunning" {
		t.Fatalf("the second pass: phase %s, Waiting %+v; want it waiting for the first (AnotherPassRunning)", d.Status.Phase, w)
	}
	if n := len(h.etcd.CallsTo("Defragment")); n != 1 {
		t.Fatalf("%d Defragment calls, want the first pass's one", n)
	}
}
