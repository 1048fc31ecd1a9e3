package cluster

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller/children/retention"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

func TestDecideDiscardedData(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	availableSince := func(at time.Time) *metav1.Condition {
		return &metav1.Condition{Type: etcdv1.ConditionAvailable, Status: metav1.ConditionTrue, LastTransitionTime: metav1.Time{Time: at}}
	}
	lost := &metav1.Condition{Type: etcdv1.ConditionAvailable, Status: metav1.ConditionFalse, Reason: etcdv1.ReasonQuorumLost, LastTransitionTime: metav1.Time{Time: t0}}
	twenty := int32(20)
	kept := func(names ...string) []keptPVC {
		out := make([]keptPVC, 0, len(names))
		for _, n := range names {
			out = append(out, keptPVC{name: n, keptAt: t0})
		}
		return out
	}
	for _, tc := range []struct {
		name       string
		keepFor    *int32
		available  *metav1.Condition
		recovering bool
		kept       []keptPVC
		now        time.Time
		release    []string
		retryIn    time.Duration
		reason     string // "" when no condition
		says       string
	}{
		{name: "nothing kept", keepFor: &twenty, available: availableSince(t0), kept: nil, now: t0.Add(time.Hour)},
		{name: "no policy: kept until a person deletes them, however long the cluster serves", available: availableSince(t0), kept: kept("db-3", "db-2"),
			now: t0.Add(1000 * time.Hour), reason: etcdv1.ReasonKeptUntilDeleted, says: "PVCs db-2, db-3 hold the data"},
		{name: "the cluster has not served yet: kept, no time stated", keepFor: &twenty, available: lost, kept: kept("db-2"),
			now: t0.Add(time.Hour), reason: etcdv1.ReasonKeptUntilServed, says: "db-2 once the cluster has been Available for 20s"},
		{name: "no Available condition at all: kept", keepFor: &twenty, kept: kept("db-2"), now: t0.Add(time.Hour), reason: etcdv1.ReasonKeptUntilServed},
		{name: "served, but not long enough", keepFor: &twenty, available: availableSince(t0.Add(5 * time.Second)), kept: kept("db-2"),
			now: t0.Add(15 * time.Second), retryIn: 10 * time.Second, reason: etcdv1.ReasonKeptUntilServed, says: "db-2 at 2026-01-01T12:00:25Z"},
		{name: "served long enough: released, and no condition left", keepFor: &twenty, available: availableSince(t0.Add(5 * time.Second)), kept: kept("db-2", "db-3"),
			now: t0.Add(25 * time.Second), release: []string{"db-2", "db-3"}},
		{name: "Available since before the data was kept counts from the keeping", keepFor: &twenty, available: availableSince(t0.Add(-time.Hour)),
			kept: kept("db-2"), now: t0.Add(10 * time.Second), retryIn: 10 * time.Second, reason: etcdv1.ReasonKeptUntilServed, says: "db-2 at 2026-01-01T12:00:20Z"},
		{name: "the quorum lost again after the keeping: the clock starts over", keepFor: &twenty, available: availableSince(t0.Add(time.Hour)),
			kept: kept("db-2"), now: t0.Add(time.Hour + 19*time.Second), retryIn: time.Second, reason: etcdv1.ReasonKeptUntilServed},
		{name: "a recovery asked for or under way: nothing goes", keepFor: &twenty, available: availableSince(t0), recovering: true, kept: kept("db-2"),
			now: t0.Add(time.Hour), reason: etcdv1.ReasonKeptUntilServed},
		{name: "one due, one kept later", keepFor: &twenty, available: availableSince(t0),
			kept: []keptPVC{{name: "db-2", keptAt: t0}, {name: "db-5", keptAt: t0.Add(time.Minute)}}, now: t0.Add(30 * time.Second),
			release: []string{"db-2"}, retryIn: 50 * time.Second, reason: etcdv1.ReasonKeptUntilServed, says: "db-5 at 2026-01-01T12:01:20Z"},
		{name: "a kept time that does not parse counts from the serving alone", keepFor: &twenty, available: availableSince(t0),
			kept: []keptPVC{{name: "db-2"}}, now: t0.Add(20 * time.Second), release: []string{"db-2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := decideDiscardedData(tc.keepFor, tc.available, tc.recovering, tc.kept, tc.now)
			if !slices.Equal(d.release, tc.release) || d.retryIn != tc.retryIn {
				t.Fatalf("release %v, retry in %v; want %v, %v", d.release, d.retryIn, tc.release, tc.retryIn)
			}
			if tc.reason == "" {
				if d.condition != nil {
					t.Fatalf("condition %+v, want none", d.condition)
				}
				return
			}
			if d.condition == nil || d.condition.Type != etcdv1.ConditionDiscardedDataKept || d.condition.Status != metav1.ConditionTrue ||
				d.condition.Reason != tc.reason || !strings.Contains(d.condition.Message, tc.says) {
				t.Fatalf("condition %+v, want %s saying %q", d.condition, tc.reason, tc.says)
			}
		})
	}
}

// discard marks the PVCs of the named members as a recovery keeps them, and deletes the
// members, as their finalizers let them go.
func (h *harness) discard(names ...string) {
	h.t.Helper()
	for _, name := range names {
		pvc := h.pvc(name)
		retention.MarkDiscarded(h.clusterObj(), pvc, time.Now())
		if err := h.api.Update(context.Background(), pvc); err != nil {
			h.t.Fatal(err)
		}
		for _, m := range h.members() {
			if m.Name == name {
				if err := h.api.Delete(context.Background(), m); err != nil {
					h.t.Fatal(err)
				}
			}
		}
	}
}

// The data a recovery discarded is never a member's again: with the quorum lost, no
// EtcdMember is rebuilt from it (a recovery from a member keeps the cluster ID, so it would
// rejoin under its old ID); with the cluster back, scaling gives the new members new names,
// not those of the kept PVCs; and no kept PVC is taken into the cluster's view (owners set per
// the retention policy, counted as a member's data).
func TestDiscardedDataIsNeverRebuiltNorItsNameTaken(t *testing.T) {
	h := runningHarness(t)
	h.memberPVCs()
	h.startPodOf("db-1")
	survivor := h.etcdID("db-1")
	h.discard("db-2", "db-3")
	h.etcd.SetDown(h.etcdID("db-2"), true)
	h.etcd.SetDown(h.etcdID("db-3"), true)
	for range 3 {
		h.reconcile()
	}
	if got := names(h.members()); !slices.Equal(got, []string{"db-1"}) {
		t.Fatalf("members %v with the quorum lost: an EtcdMember was rebuilt from discarded data", got)
	}
	h.etcd.ForceNewCluster(survivor)
	for range 4 {
		h.reconcile()
	}
	got := names(h.members())
	if len(got) < 2 || slices.Contains(got, "db-2") || slices.Contains(got, "db-3") {
		t.Fatalf("members %v after the recovered cluster answered: want new members under new names", got)
	}
	for _, name := range []string{"db-2", "db-3"} {
		if pvc := h.pvc(name); !retention.DiscardedData(pvc) || len(pvc.OwnerReferences) != 0 {
			t.Fatalf("kept PVC %s changed: %+v", name, pvc.ObjectMeta)
		}
	}
	cond := h.condition(etcdv1.ConditionDiscardedDataKept)
	if cond.Reason != etcdv1.ReasonKeptUntilDeleted || !strings.Contains(cond.Message, "db-2, db-3") {
		t.Fatalf("DiscardedDataKept %+v", cond)
	}
}

// A new cluster whose name finds only discarded data (kept from a recovery of an earlier
// cluster of that name) does not bring it back as members: it founds a new cluster under
// names the kept PVCs do not have.
func TestDiscardedDataIsNotAdoptedByANewClusterOfItsName(t *testing.T) {
	h := newHarness(t)
	for _, name := range []string{"db-1", "db-2", "db-3"} {
		pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: specs.MemberLabels("db", name),
			Annotations: map[string]string{etcdv1.AnnotationMemberID: "1" + name[3:], etcdv1.AnnotationClusterID: "abc",
				etcdv1.AnnotationDiscardedByRecovery: "2026-01-01T12:00:00Z"}}}
		if err := h.api.Create(context.Background(), pvc); err != nil {
			t.Fatal(err)
		}
	}
	h.reconcile()
	if got := names(h.members()); !slices.Equal(got, []string{"db-4", "db-5", "db-6"}) {
		t.Fatalf("founding members %v: want new ones under names no kept PVC has", got)
	}
	for _, m := range h.members() {
		if m.Spec.Bootstrap.InitialClusterState != etcdv1.InitialClusterStateNew || m.Status.MemberID != "" {
			t.Fatalf("member %s made from kept data: %+v, status %+v", m.Name, m.Spec.Bootstrap, m.Status)
		}
	}
}

// With spec.quorumLoss.keepDiscardedDataSeconds, a kept PVC goes once the recovered cluster
// has been Available that long; another application's PVC that carries the annotation and the
// cluster's label, but not the operator's, is never deleted.
func TestDiscardedDataIsReleasedAfterTheClusterServed(t *testing.T) {
	h := runningHarness(t)
	h.memberPVCs()
	c := h.clusterObj()
	c.Spec.QuorumLoss = &etcdv1.QuorumLossPolicy{KeepDiscardedDataSeconds: ptrTo(int32(20))}
	if err := h.api.Update(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	foreign := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "db-cache", Namespace: "ns",
		Labels:      map[string]string{etcdv1.LabelCluster: "db", etcdv1.LabelMember: "db-cache", etcdv1.LabelManagedBy: "helm"},
		Annotations: map[string]string{etcdv1.AnnotationDiscardedByRecovery: "2020-01-01T00:00:00Z"}}}
	if err := h.api.Create(context.Background(), foreign); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	h.r.Now = func() time.Time { return start }
	h.discard("db-3")
	h.reconcile()
	if av := h.condition(etcdv1.ConditionAvailable); av.Status != metav1.ConditionTrue {
		t.Fatalf("Available %+v", av)
	}
	h.reconcile()
	cond := h.condition(etcdv1.ConditionDiscardedDataKept)
	if h.pvc("db-3") == nil || cond.Reason != etcdv1.ReasonKeptUntilServed || !strings.Contains(cond.Message, "db-3 at ") {
		t.Fatalf("before its time: DiscardedDataKept %+v", cond)
	}
	h.r.Now = func() time.Time { return start.Add(time.Minute) }
	h.reconcile()
	if h.exists("db-3") {
		t.Fatal("the kept PVC outlived keepDiscardedDataSeconds of a cluster that served")
	}
	if pvc := h.pvc("db-cache"); pvc.UID != foreign.UID {
		t.Fatal("another application's PVC was deleted")
	}
	h.reconcile()
	if cond := meta.FindStatusCondition(h.clusterObj().Status.Conditions, etcdv1.ConditionDiscardedDataKept); cond != nil {
		t.Fatalf("DiscardedDataKept after the release: %+v (the foreign PVC is not the cluster's kept data)", cond)
	}
}

func (h *harness) exists(pvc string) bool {
	h.t.Helper()
	list := &corev1.PersistentVolumeClaimList{}
	if err := h.api.List(context.Background(), list); err != nil {
		h.t.Fatal(err)
	}
	return slices.ContainsFunc(list.Items, func(p corev1.PersistentVolumeClaim) bool { return p.Name == pvc })
}
