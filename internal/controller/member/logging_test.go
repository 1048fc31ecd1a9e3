package member

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller/kit/kittest"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
)

func memberLog(t *testing.T, name string) *kittest.Log {
	return kittest.NewLog(t, "etcdmember", "EtcdMember", types.NamespacedName{Namespace: "ns", Name: name})
}

// expectLine fails unless the step line holds each key of want with its value, and its why
// (of a step that waits) says each of words.
func expectLine(t *testing.T, what string, line, want map[string]any, words ...string) {
	t.Helper()
	for key, value := range want {
		if line[key] != value {
			t.Errorf("%s: %s is %v, want %v: %v", what, key, line[key], value, line)
		}
	}
	for _, w := range words {
		if !strings.Contains(fmt.Sprint(line["why"]), w) {
			t.Errorf("%s: why lacks %q: %v", what, w, line)
		}
	}
}

func TestEachReconcileOfAMemberLogsItsStepAtV1(t *testing.T) {
	h := newMemberHarness(t, "")
	logged := memberLog(t, "db-1")
	line := logged.Reconcile(h.r)
	expectLine(t, "the Pod of db-1, a voter that joined, created on its PVC", line, map[string]any{
		"msg": "step taken", "step": "createPod", "changed": true, "pod": "db-1", "requireData": true,
		"pvc": "db-1", "pvcFate": string(pvcUpdated), "role": string(etcdv1.RoleVoter), "memberID": etcd.FormatID(h.ids["db-1"]),
	})
	if line["EtcdCluster"] == nil {
		t.Errorf("the line lacks the cluster the member serves: %v", line)
	}
	expectLine(t, "the Pod's state put into the member", logged.Reconcile(h.r), map[string]any{
		"msg": "step taken", "step": podStateMirrored, "changed": true, "readyReason": etcdv1.ReasonPodNotReady, "podPhase": "",
	})
	expectLine(t, "nothing to do once the member says what its Pod does", logged.Reconcile(h.r), map[string]any{
		"msg": "no step applies", "changed": false, "pod": "db-1",
	})
}

func TestAMemberBlockedBySomeoneElsesPVCLogsWhyAtV1(t *testing.T) {
	foreign := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "db-1", Namespace: "ns",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "postgres", UID: "pg", Controller: ptrTo(true)}}}}
	r, _ := memberBed(t, interceptor.Funcs{}, foreign)
	expectLine(t, "the member blocked by the StatefulSet's PVC", memberLog(t, "db-1").Reconcile(r), map[string]any{
		"msg": "step waits", "step": "blocked", "attempted": "ensurePVC", "waitReason": etcdv1.ReasonNameConflict, "pvc": "db-1", "requeueAfter": "10s",
	}, "PersistentVolumeClaim db-1", "StatefulSet postgres")
}

func TestAMemberBlockedBySomeoneElsesPodLogsWhyAtV1(t *testing.T) {
	h := newMemberHarness(t, "")
	if err := h.api.Create(context.Background(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "db-1", Namespace: "ns"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}); err != nil {
		t.Fatal(err)
	}
	expectLine(t, "the member blocked by a Pod of its name that is not its", memberLog(t, "db-1").Reconcile(h.r), map[string]any{
		"msg": "step waits", "step": "blocked", "attempted": "ensurePod", "waitReason": etcdv1.ReasonNameConflict, "pod": "db-1", "podPhase": string(corev1.PodRunning),
	}, "Pod db-1 already exists")
}

func TestEachFinalizerOfAMemberLogsWhatBecameOfItsDataAtV1(t *testing.T) {
	h := newMemberHarness(t, "")
	h.delete("db-2", true)
	expectLine(t, "db-2 out of etcd, then its PVC deleted", memberLog(t, "db-2").Reconcile(h.r), map[string]any{
		"msg": "step taken", "step": "finalizeRemoval", "changed": true, "removedFromEtcd": true, "pvc": "db-2", "pvcFate": string(pvcDeleted),
		"deleting": true, "memberID": etcd.FormatID(h.ids["db-2"]),
	})
	h.delete("db-3", false)
	expectLine(t, "the PVC of db-3, deleted by hand, kept", memberLog(t, "db-3").Reconcile(h.r), map[string]any{
		"msg": "step taken", "step": "finalizeDeletionByHand", "changed": true, "pvc": "db-3", "pvcFate": string(pvcOwnedPerPolicy),
	})
	// db-1 deleted, its finalizer gone already (someone else's holds it): nothing to do.
	m := h.member("db-1")
	m.Finalizers = []string{"example.com/backup"}
	if err := h.api.Update(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	h.delete("db-1", true)
	pvc := h.pvc("db-1")
	expectLine(t, "db-1 deleted without its finalizer", memberLog(t, "db-1").Reconcile(h.r), map[string]any{
		"msg": "no step applies", "step": "", "changed": false, "deleting": true,
	})
	if len(h.etcd.CallsTo("Remove")) != 1 || !equality.Semantic.DeepEqual(h.pvc("db-1"), pvc) {
		t.Fatalf("a member without its finalizer was removed from etcd or had its PVC changed: %v", h.etcd.Calls())
	}
}

// A finalizer whose release conflicts failed, and changed only what it wrote before: the PVC
// deleted after a removal, nothing when the PVC was as it should be.
func TestAFinalizerWhoseReleaseConflictsLogsWhatItChangedAtV1(t *testing.T) {
	h := newMemberHarness(t, "")
	h.reconcile("db-3") // its PVC owned per policy: a deletion by hand changes nothing of it
	h.delete("db-2", true)
	h.delete("db-3", false)
	h.intercept(interceptor.Funcs{Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
		return apierrors.NewConflict(etcdv1.GroupVersion.WithResource("etcdmembers").GroupResource(), obj.GetName(), errors.New("the object has been modified"))
	}})
	expectLine(t, "db-2 out of etcd, its PVC deleted, its finalizer in conflict", memberLog(t, "db-2").Reconcile(h.r), map[string]any{
		"msg": "step failed", "step": "finalizeRemoval", "changed": true, "removedFromEtcd": true, "pvcFate": string(pvcDeleted),
	})
	expectLine(t, "db-3 deleted by hand, its finalizer in conflict", memberLog(t, "db-3").Reconcile(h.r), map[string]any{
		"msg": "step failed", "step": "finalizeDeletionByHand", "changed": false, "pvcFate": string(pvcUnchanged),
	})
	if h.member("db-2") == nil || h.member("db-3") == nil {
		t.Fatal("a finalizer in conflict was released")
	}
}

func TestARemovalTheQuorumCannotTakeLogsWhyItWaitsAtV1(t *testing.T) {
	h := newMemberHarness(t, "")
	h.etcd.SetDown(h.ids["db-3"], true)
	h.delete("db-1", true)
	expectLine(t, "the removal of db-1 waiting for a quorum that can take it", memberLog(t, "db-1").Reconcile(h.r), map[string]any{
		"msg": "step waits", "step": "finalizeRemoval", "waitReason": etcdv1.ReasonRemoveRefused, "requeueAfter": "2s",
	}, "removing db-1 from etcd")
}

// A paused member's step says whether this look deleted its Pod: not when the Pod was gone by
// the time of the delete (the cache was behind).
func TestAPausedMemberLogsWhetherItDeletedItsPodAtV1(t *testing.T) {
	for _, goneFirst := range []bool{false, true} {
		funcs := interceptor.Funcs{Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			if _, ok := obj.(*corev1.Pod); ok && goneFirst {
				if err := c.Delete(ctx, obj, opts...); err != nil {
					return err
				}
				return apierrors.NewNotFound(corev1.Resource("pods"), obj.GetName())
			}
			return c.Delete(ctx, obj, opts...)
		}}
		r, api := memberBed(t, funcs, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "db-1", Namespace: "ns"}})
		m := &etcdv1.EtcdMember{}
		if err := api.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "db-1"}, m); err != nil {
			t.Fatal(err)
		}
		m.Spec.Dormant = true
		if err := api.Update(context.Background(), m); err != nil {
			t.Fatal(err)
		}
		expectLine(t, fmt.Sprintf("the Pod of paused db-1, gone before the delete: %v", goneFirst), memberLog(t, "db-1").Reconcile(r), map[string]any{
			"msg": "step waits", "step": "paused", "waitReason": etcdv1.ReasonPaused, "podDeleted": !goneFirst,
		})
	}
}

// The finalizer a member gets is a change of its step, also when nothing else is; an update
// that conflicts says so, though the reconcile drops the conflict for the next look.
func TestAddingTheFinalizerOfAMemberIsLoggedAtV1(t *testing.T) {
	h := newMemberHarness(t, "")
	logged := memberLog(t, "db-1")
	for range 3 {
		logged.Reconcile(h.r) // the Pod, then its state: nothing left to do
	}
	m := h.member("db-1")
	m.Finalizers = nil
	if err := h.api.Update(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	h.intercept(interceptor.Funcs{Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
		return apierrors.NewConflict(etcdv1.GroupVersion.WithResource("etcdmembers").GroupResource(), obj.GetName(), errors.New("the object has been modified"))
	}})
	expectLine(t, "the finalizer's update of db-1 in conflict", logged.Reconcile(h.r), map[string]any{
		"msg": "step failed", "step": "addFinalizer", "changed": false, "conflict": true,
	})
	h.r.Client = h.api
	expectLine(t, "the finalizer put on db-1, all else as it should be", logged.Reconcile(h.r), map[string]any{
		"msg": "step taken", "step": "addFinalizer", "changed": true, "finalizerAdded": true,
	})
	if h.member("db-1").Finalizers == nil {
		t.Fatal("no finalizer")
	}
}

// A removal that took the member out of etcd and then could not delete its PVC failed, and
// its line says what it changed before.
func TestARemovalWhosePVCDeleteFailsLogsWhatItChangedAtV1(t *testing.T) {
	h := newMemberHarness(t, "")
	h.delete("db-2", true)
	h.intercept(interceptor.Funcs{Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
		if _, ok := obj.(*corev1.PersistentVolumeClaim); ok {
			return apierrors.NewServiceUnavailable("the API server is busy")
		}
		return c.Delete(ctx, obj, opts...)
	}})
	logged := memberLog(t, "db-2")
	if _, err := h.r.Reconcile(logged.Context(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "db-2"}}); err == nil {
		t.Fatal("the reconcile hid the failed delete of the PVC")
	}
	expectLine(t, "db-2 out of etcd, its PVC not deleted", logged.Step(), map[string]any{
		"msg": "step failed", "step": "finalizeRemoval", "changed": true, "removedFromEtcd": true, "pvcFate": string(pvcUnchanged),
	})
}

// A member etcd counts on whose PVC is gone waits as dataLost, says why its data counts as
// lost, and is looked at again soon: also when etcd cannot say whether it joined.
func TestAMemberWhosePVCIsGoneLogsItsDataLostAtV1(t *testing.T) {
	h := newMemberHarness(t, "")
	if err := h.api.Delete(context.Background(), h.pvc("db-2")); err != nil {
		t.Fatal(err)
	}
	logged := memberLog(t, "db-2")
	want := map[string]any{
		"msg": "step waits", "step": "dataLost", "waitReason": etcdv1.ReasonDataLost, "pvc": "db-2", "pvcFate": string(pvcAbsent), "requeueAfter": "5s",
	}
	line := logged.Reconcile(h.r)
	expectLine(t, "db-2, joined, without its PVC", line, want, "its PVC is gone")
	expectLine(t, "db-2, joined, without its PVC", line, map[string]any{"cause": errDataLost.Error(), "changed": true})
	h.etcd.FailNext("MemberList", errors.New("no quorum"))
	line = logged.Reconcile(h.r)
	expectLine(t, "db-2 without its PVC, etcd unreachable", line, want)
	if cause := fmt.Sprint(line["cause"]); !strings.Contains(cause, "etcd cannot say whether the member joined") || !strings.Contains(cause, "no quorum") {
		t.Errorf("the cause %q does not say that etcd could not be asked, and why", cause)
	}
}
