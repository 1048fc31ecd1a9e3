package defrag

import (
	"context"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

// checkEveryMemberDefragmentedOnce: three Defragment calls, one per member, each recorded
// with what it reclaimed.
func checkEveryMemberDefragmentedOnce(t *testing.T, h *passHarness, d *etcdv1.EtcdDefrag) {
	t.Helper()
	if n := len(h.etcd.CallsTo("Defragment")); n != 3 {
		t.Errorf("%d Defragment calls, want 3: %v", n, h.etcd.Calls())
	}
	if d.Status.Phase != etcdv1.EtcdDefragPhaseComplete || d.Status.Defragmented != 3 {
		t.Errorf("status %+v, want Complete with 3 defragmented", d.Status)
	}
	for _, row := range d.Status.Members {
		checkDefragmentedRow(t, row)
	}
}

// A cache that has not caught up with the pass's last step (a worker's next reconcile
// 100 ms later) must not make the pass take that step again: the pass is read around it.
func TestAPassActsOnThePassAsRecordedNotAsTheCacheLastSawIt(t *testing.T) {
	h := newPassHarness(t, &etcdv1.DefragRule{All: true})
	var behind *etcdv1.EtcdDefrag // the pass as it was before its last status write
	cached := interceptor.NewClient(h.api.(client.WithWatch), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if d, ok := obj.(*etcdv1.EtcdDefrag); ok && behind != nil {
				behind.DeepCopyInto(d)
				return nil
			}
			return c.Get(ctx, key, obj, opts...)
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			if _, ok := obj.(*etcdv1.EtcdDefrag); ok {
				was := &etcdv1.EtcdDefrag{}
				if err := c.Get(ctx, client.ObjectKeyFromObject(obj), was); err != nil {
					return err
				}
				behind = was
			}
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
	})
	h.r.Client, h.r.APIReader = cached, h.api
	checkEveryMemberDefragmentedOnce(t, h, h.run())
}

// A member's outcome, written after its defragmentation, survives a conflict with another
// change to the pass (here its labels): it is recorded, not looked at again.
func TestAnOutcomeRecordedAfterTheStepSurvivesAConflict(t *testing.T) {
	h := newPassHarness(t, &etcdv1.DefragRule{All: true})
	conflicted := false
	h.r.Client = interceptor.NewClient(h.api.(client.WithWatch), interceptor.Funcs{
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			if d, ok := obj.(*etcdv1.EtcdDefrag); ok && !conflicted && d.Status.Defragmented > 0 {
				conflicted = true
				other := &etcdv1.EtcdDefrag{}
				if err := c.Get(ctx, client.ObjectKeyFromObject(d), other); err != nil {
					return err
				}
				other.Labels = map[string]string{"touched": "meanwhile"}
				if err := c.Update(ctx, other); err != nil {
					return err
				}
			}
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
	})
	d := h.run()
	if !conflicted {
		t.Fatal("no status write met a conflict: the test tests nothing")
	}
	checkEveryMemberDefragmentedOnce(t, h, d)
}
