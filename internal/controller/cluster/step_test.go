package cluster

import (
	"context"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

// recordIdentities writes a member's status only when its identity changed, and then only
// the fields that did: a look that finds every identity as recorded writes nothing, and so
// does one in which the members did not answer (no version reported).
func TestRecordIdentitiesWritesOnlyWhatChanged(t *testing.T) {
	var writes []string // "member patch" of each status write to an EtcdMember
	h := harnessWith(t, interceptor.Funcs{SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
		if _, ok := obj.(*etcdv1.EtcdMember); ok {
			data, err := patch.Data(obj)
			if err != nil {
				return err
			}
			writes = append(writes, obj.GetName()+" "+string(data))
		}
		return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
	}})
	h.reconcile()
	h.running()
	if v := h.member("db-2").Status.Version; v == "" {
		t.Fatal("no version recorded for db-2 once it runs")
	}
	ctx, c := context.Background(), h.clusterObj()
	look := func(edit func(*clusterView)) []string {
		t.Helper()
		v, err := h.r.observe(ctx, c, h.members())
		if err != nil {
			t.Fatal(err)
		}
		defer v.close()
		edit(v)
		writes = nil
		if _, err := h.r.recordIdentities(ctx, c, v); err != nil {
			t.Fatal(err)
		}
		return writes
	}
	if got := look(func(*clusterView) {}); len(got) != 0 {
		t.Fatalf("a look that found every identity as recorded wrote %q", got)
	}
	if got := look(func(v *clusterView) { clear(v.versions) }); len(got) != 0 {
		t.Fatalf("a look in which no member reported its version wrote %q", got)
	}
	if got := look(func(v *clusterView) { v.versions[h.etcdID("db-2")] = "3.6.17" }); len(got) != 1 || got[0] != `db-2 {"status":{"version":"3.6.17"}}` {
		t.Fatalf("db-2 reporting another version wrote %q, want its version alone", got)
	}
}
