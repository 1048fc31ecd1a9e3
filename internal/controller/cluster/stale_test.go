package cluster

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

// A reconcile right after the one that started a scale-in's removal sees a cache without it:
// the member still there, unmarked. It must not remove a second member (here db-2, unhealthy
// by then, which a scale-in takes first): one removal was asked for.
func TestScaleInWaitsForACacheThatMissesTheRemovalItStarted(t *testing.T) {
	ctx := context.Background()
	h := runningHarness(t)
	h.setReplicas(2)
	before := &etcdv1.EtcdMemberList{}
	if err := h.api.List(ctx, before); err != nil {
		t.Fatal(err)
	}
	h.reconcile() // removes db-3, the newest follower
	if got := names(h.liveMembers()); !slices.Equal(got, []string{"db-1", "db-2"}) {
		t.Fatalf("members %v after the scale-in, want db-3 removed", got)
	}
	for _, em := range h.etcd.Members() {
		if em.Name == "db-2" {
			h.etcd.SetUnhealthy(em.ID, true)
		}
	}
	h.r.APIReader = h.api
	h.r.Client = interceptor.NewClient(h.api.(client.WithWatch), interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if members, ok := list.(*etcdv1.EtcdMemberList); ok {
				before.DeepCopyInto(members) // the members as they were before the removal
				return nil
			}
			return c.List(ctx, list, opts...)
		},
	})
	h.reconcile()
	if got := names(h.liveMembers()); !slices.Equal(got, []string{"db-1", "db-2"}) {
		t.Fatalf("members %v after a reconcile with a stale cache, want db-3 alone removed", got)
	}
	if cond := h.condition(etcdv1.ConditionProgressing); !strings.Contains(cond.Message, "db-3 is being removed") {
		t.Fatalf("Progressing %+v, want the wait for the cache", cond)
	}
}

// liveMembers are the cluster's EtcdMembers as the API has them, whatever the reconciler's
// client.
func (h *harness) liveMembers() []*etcdv1.EtcdMember {
	h.t.Helper()
	live, err := listMembersFrom(context.Background(), h.api, h.clusterObj())
	if err != nil {
		h.t.Fatal(err)
	}
	return live
}

func TestViewBehindNamesTheChangeTheCacheHasNotSeen(t *testing.T) {
	member := func(name string, edit ...func(*etcdv1.EtcdMember)) *etcdv1.EtcdMember {
		m := &etcdv1.EtcdMember{ObjectMeta: metav1.ObjectMeta{Name: name}}
		for _, e := range edit {
			e(m)
		}
		return m
	}
	deleting := func(m *etcdv1.EtcdMember) { m.DeletionTimestamp = &metav1.Time{Time: time.Now()} }
	marked := func(m *etcdv1.EtcdMember) { m.Annotations = map[string]string{etcdv1.AnnotationRemove: "true"} }
	for _, tc := range []struct {
		name       string
		view, live []*etcdv1.EtcdMember
		want       string // a part of the answer; "" for none
	}{
		{"the same", []*etcdv1.EtcdMember{member("db-1"), member("db-2")}, []*etcdv1.EtcdMember{member("db-1"), member("db-2")}, ""},
		{"created, not seen", []*etcdv1.EtcdMember{member("db-1")}, []*etcdv1.EtcdMember{member("db-1"), member("db-2")}, "db-2 exists"},
		{"gone, not seen", []*etcdv1.EtcdMember{member("db-1"), member("db-2")}, []*etcdv1.EtcdMember{member("db-1")}, "db-2 is being removed"},
		{"being deleted, not seen", []*etcdv1.EtcdMember{member("db-1"), member("db-2")}, []*etcdv1.EtcdMember{member("db-1"), member("db-2", deleting)}, "db-2 is being removed"},
		{"marked, not seen", []*etcdv1.EtcdMember{member("db-1"), member("db-2")}, []*etcdv1.EtcdMember{member("db-1"), member("db-2", marked)}, "db-2 is being removed"},
		{"being deleted, seen", []*etcdv1.EtcdMember{member("db-1"), member("db-2", deleting)}, []*etcdv1.EtcdMember{member("db-1"), member("db-2", deleting)}, ""},
		{"gone, seen going", []*etcdv1.EtcdMember{member("db-1"), member("db-2", deleting)}, []*etcdv1.EtcdMember{member("db-1")}, ""},
	} {
		got := viewBehind(tc.view, tc.live)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: viewBehind = %q, want %q", tc.name, got, tc.want)
		}
	}
}
