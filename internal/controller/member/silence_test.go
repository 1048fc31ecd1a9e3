package member

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
)

// A silence is held for silenceHeld, per cluster, and an answer forgets it.
func TestSilencesAreHeldPerClusterUntilAnAnswer(t *testing.T) {
	a, b := types.NamespacedName{Namespace: "ns", Name: "a"}, types.NamespacedName{Namespace: "ns", Name: "b"}
	t0 := time.Date(2026, 12, 5, 4, 0, 0, 0, time.UTC)
	down := errors.New("context deadline exceeded")
	s := &silences{}
	s.note(a, t0, down)
	for _, tc := range []struct {
		name    string
		cluster types.NamespacedName
		at      time.Time
		silent  bool
	}{
		{"at once", a, t0, true},
		{"just within", a, t0.Add(silenceHeld - time.Millisecond), true},
		{"once held long enough", a, t0.Add(silenceHeld), false},
		{"another cluster", b, t0, false},
	} {
		if err := s.recent(tc.cluster, tc.at); (err != nil) != tc.silent || (err != nil && !errors.Is(err, down)) {
			t.Errorf("%s: recent = %v, want silent %v wrapping the failure", tc.name, err, tc.silent)
		}
	}
	s.note(a, t0.Add(time.Second), nil)
	if err := s.recent(a, t0.Add(time.Second)); err != nil {
		t.Errorf("an answer did not forget the silence: %v", err)
	}
}

// The members of a cluster whose etcd does not answer ask it once between them: the second
// member's question fails at once with the first one's failure, no client made.
func TestAClusterThatDoesNotAnswerIsAskedOnceForAllItsMembers(t *testing.T) {
	h := newMemberHarness(t, etcdv1.StorageMediumDefault)
	dials := 0
	h.r.NewClient = func(context.Context, *etcdv1.EtcdCluster, []string) (etcd.Client, error) {
		dials++
		return nil, errors.New("dial tcp: connect: no route to host")
	}
	c := &etcdv1.EtcdCluster{}
	if err := h.api.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "db"}, c); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"db-1", "db-2", "db-3"} {
		if _, err := h.r.joined(context.Background(), c, h.member(name)); err == nil {
			t.Fatalf("%s: joined answered without etcd", name)
		}
	}
	if dials != 1 {
		t.Fatalf("%d clients made for three questions within %s, want 1", dials, silenceHeld)
	}
}
