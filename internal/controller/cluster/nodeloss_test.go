package cluster

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller/children/childtest"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
)

func TestDecideNodeLoss(t *testing.T) {
	three := []etcd.Member{voter(1), voter(2), voter(3)}
	othersHealthy := map[uint64]bool{1: true, 3: true}
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	grace := func(s int32) *etcdv1.NodeLossPolicy {
		return &etcdv1.NodeLossPolicy{Policy: etcdv1.NodeLossReplaceMember, GracePeriodSeconds: &s}
	}
	cases := []struct {
		name    string
		policy  *etcdv1.NodeLossPolicy
		since   time.Time
		healthy map[uint64]bool
		act     nodeLossAct
		due     time.Time
	}{
		{"first seen: the clock starts, default 600 s", nil, time.Time{}, othersHealthy, nodeLossStartClock, now.Add(600 * time.Second)},
		{"first seen, 20 s grace", grace(20), time.Time{}, othersHealthy, nodeLossStartClock, now.Add(20 * time.Second)},
		{"within the grace period", grace(20), now.Add(-19 * time.Second), othersHealthy, nodeLossWait, now.Add(time.Second)},
		{"within the default grace period", nil, now.Add(-300 * time.Second), othersHealthy, nodeLossWait, now.Add(300 * time.Second)},
		{"due: the quorum holds without it", grace(20), now.Add(-20 * time.Second), othersHealthy, nodeLossReplace, now},
		{"due long ago", nil, now.Add(-time.Hour), othersHealthy, nodeLossReplace, now.Add(-50 * time.Minute)},
		{"due, another voter down: refused", grace(20), now.Add(-time.Minute), map[uint64]bool{1: true}, nodeLossRefuse, now.Add(-40 * time.Second)},
		{"due, no voter healthy: refused", grace(20), now.Add(-time.Minute), map[uint64]bool{}, nodeLossRefuse, now.Add(-40 * time.Second)},
		{"policy Manual, due long ago: only reported", &etcdv1.NodeLossPolicy{Policy: etcdv1.NodeLossManual}, now.Add(-time.Hour), othersHealthy, nodeLossReport, time.Time{}},
		{"policy Manual, first seen: only reported", &etcdv1.NodeLossPolicy{Policy: etcdv1.NodeLossManual}, time.Time{}, othersHealthy, nodeLossReport, time.Time{}},
		{"policy absent, grace set (defaulted policy)", &etcdv1.NodeLossPolicy{GracePeriodSeconds: grace(30).GracePeriodSeconds}, now.Add(-31 * time.Second), othersHealthy, nodeLossReplace, now.Add(-time.Second)},
	}
	for _, tc := range cases {
		d := decideNodeLoss(tc.policy, 2, tc.since, three, tc.healthy, now)
		if d.act != tc.act || !d.due.Equal(tc.due) || (d.act == nodeLossRefuse) != (d.why != "") {
			t.Errorf("%s: %+v, want act %d due %s", tc.name, d, tc.act, tc.due)
		}
	}
}

func TestPinnedNode(t *testing.T) {
	term := func(reqs ...corev1.NodeSelectorRequirement) corev1.NodeSelectorTerm {
		return corev1.NodeSelectorTerm{MatchExpressions: reqs}
	}
	host := func(values ...string) corev1.NodeSelectorRequirement {
		return corev1.NodeSelectorRequirement{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: values}
	}
	zone := corev1.NodeSelectorRequirement{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"zone-a"}}
	pv := func(terms ...corev1.NodeSelectorTerm) *corev1.PersistentVolume {
		return &corev1.PersistentVolume{Spec: corev1.PersistentVolumeSpec{NodeAffinity: &corev1.VolumeNodeAffinity{
			Required: &corev1.NodeSelector{NodeSelectorTerms: terms}}}}
	}
	cases := []struct {
		name string
		pv   *corev1.PersistentVolume
		want string
	}{
		{"a network volume: no affinity", &corev1.PersistentVolume{}, ""},
		{"a local volume on one node", pv(term(host("node-2"))), "node-2"},
		{"by the Node's name", pv(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"node-2"}}}}), "node-2"},
		{"the node and its zone", pv(term(zone, host("node-2"))), "node-2"},
		{"a zonal volume", pv(term(zone)), ""},
		{"either of two nodes", pv(term(host("node-1", "node-2"))), ""},
		{"two terms, two nodes", pv(term(host("node-1")), term(host("node-2"))), ""},
		{"two terms, one node", pv(term(host("node-2")), term(zone, host("node-2"))), "node-2"},
		{"any node but one", pv(term(corev1.NodeSelectorRequirement{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpNotIn, Values: []string{"node-2"}})), ""},
		{"TopoLVM's node key", pv(term(label("topology.topolvm.io/node", "node-2"))), "node-2"},
		{"OpenEBS's node name key", pv(term(label("openebs.io/nodename", "node-2"))), "node-2"},
		{"a rack: a place, not a node", pv(term(label("example.com/rack", "r7"))), ""},
		{"a key named node without a prefix", pv(term(label("node", "node-2"))), ""},
		{"two keys naming two nodes", pv(term(label("topology.topolvm.io/node", "node-2")), term(host("node-3"))), ""},
	}
	for _, tc := range cases {
		if got := pinnedNode(tc.pv); got.value != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got.value, tc.want)
		}
	}
}

func label(key, value string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: key, Operator: corev1.NodeSelectorOpIn, Values: []string{value}}
}

// nodeLossHarness is a running cluster of 3 with spec.nodeLoss policy, whose members' PVCs
// are bound to local volumes on node-1, node-2 and node-3, with a clock the test moves. Node
// node-2 is gone, and db-2, whose data was there, is down.
func nodeLossHarness(t *testing.T, policy *etcdv1.NodeLossPolicy) (*harness, *time.Time, *events.FakeRecorder) {
	h := runningHarness(t)
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	h.r.Now = func() time.Time { return now }
	recorder := events.NewFakeRecorder(50)
	h.r.Recorder = recorder
	for i, m := range h.members() {
		node := "node-" + string(rune('1'+i))
		h.create(localVolume("pv-"+m.Name, node))
		pvc := &corev1.PersistentVolumeClaim{}
		if err := h.api.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: m.Name}, pvc); err != nil {
			t.Fatal(err)
		}
		pvc.Spec.VolumeName = "pv-" + m.Name
		if err := h.api.Update(context.Background(), pvc); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"node-1", "node-3"} {
		h.create(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{corev1.LabelHostname: n}}})
	}
	h.editSpec(func(s *etcdv1.EtcdClusterSpec) { s.NodeLoss = policy })
	h.etcd.SetDown(h.etcdID("db-2"), true)
	return h, &now, recorder
}

func localVolume(name, node string) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			PersistentVolumeSource: corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: "/data/" + name}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
			}}}},
		},
	}
}

func (h *harness) create(obj client.Object) {
	h.t.Helper()
	if err := h.api.Create(context.Background(), obj); err != nil {
		h.t.Fatal(err)
	}
}

// victimsClock is db-2's AnnotationNodeLostSince.
func (h *harness) victimsClock() string {
	h.t.Helper()
	m := memberNamed(h.members(), "db-2")
	if m == nil {
		h.t.Fatal("no member db-2")
	}
	return m.Annotations[etcdv1.AnnotationNodeLostSince]
}

// grace20s is spec.nodeLoss with a 20 s grace period.
func grace20s() *etcdv1.NodeLossPolicy {
	s := int32(20)
	return &etcdv1.NodeLossPolicy{Policy: etcdv1.NodeLossReplaceMember, GracePeriodSeconds: &s}
}

// A follower whose Node is deleted, with the local volume its data lives on: while the grace
// period runs the cluster says so (Degraded NodeLost naming the member, the node and when)
// and nothing is removed; once it is over the member is replaced as a damaged one is.
func TestMemberOfAGoneNodeIsReplacedAfterTheGracePeriod(t *testing.T) {
	h, now, recorder := nodeLossHarness(t, grace20s())
	h.reconcile()
	since := h.victimsClock()
	if since != now.Format(time.RFC3339) {
		t.Fatalf("db-2's clock %q, want %s", since, now.Format(time.RFC3339))
	}
	if got := childtest.Events(recorder); !slices.ContainsFunc(got, func(e string) bool {
		return strings.Contains(e, etcdv1.ReasonNodeLost) && strings.Contains(e, "node-2")
	}) {
		t.Fatalf("events %v, want a NodeLost event naming node-2", got)
	}
	*now = now.Add(5 * time.Second)
	after := h.reconcileAfter()
	dg := h.condition(etcdv1.ConditionDegraded)
	due := time.Date(2030, 1, 2, 3, 4, 25, 0, time.UTC).Format(time.RFC3339)
	if dg.Status != metav1.ConditionTrue || dg.Reason != etcdv1.ReasonNodeLost || !strings.Contains(dg.Message, "db-2") ||
		!strings.Contains(dg.Message, "node-2") || !strings.Contains(dg.Message, due) {
		t.Fatalf("Degraded %+v, want NodeLost naming db-2, node-2 and %s", dg, due)
	}
	if after > 15*time.Second {
		t.Errorf("looks again after %s, want by the time the grace period ends (15 s)", after)
	}
	if calls := h.etcd.CallsTo("Remove"); len(calls) > 0 || len(h.members()) != 3 {
		t.Fatalf("acted within the grace period: %v, members %v", calls, names(h.members()))
	}
	*now = now.Add(15 * time.Second)
	h.reconcile()
	if slices.Contains(names(h.members()), "db-2") {
		t.Fatalf("db-2 not replaced after the grace period: %v", names(h.members()))
	}
	if got := childtest.Events(recorder); !slices.ContainsFunc(got, func(e string) bool { return strings.Contains(e, "MemberReplacing") && strings.Contains(e, "node-2") }) {
		t.Fatalf("events %v, want MemberReplacing naming node-2", got)
	}
}

// The node comes back within the grace period (a Node deleted by mistake registers again):
// the clock is removed, and the member is not replaced.
func TestMemberWhoseNodeComesBackIsKept(t *testing.T) {
	h, now, _ := nodeLossHarness(t, grace20s())
	h.reconcile()
	if h.victimsClock() == "" {
		t.Fatal("no clock for db-2")
	}
	h.create(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-2", Labels: map[string]string{corev1.LabelHostname: "node-2"}}})
	*now = now.Add(time.Minute)
	h.reconcile()
	h.reconcile()
	if h.victimsClock() != "" || len(h.members()) != 3 {
		t.Fatalf("clock %q, members %v: want the clock gone and db-2 kept", h.victimsClock(), names(h.members()))
	}
	if dg := h.condition(etcdv1.ConditionDegraded); dg.Reason == etcdv1.ReasonNodeLost {
		t.Fatalf("Degraded %+v after the node came back", dg)
	}
}

// Never at the cost of the quorum: with another voter down too, the member whose node is gone
// stays, and both conditions say why.
func TestMemberOfAGoneNodeIsNotReplacedAtTheCostOfTheQuorum(t *testing.T) {
	h, now, _ := nodeLossHarness(t, grace20s())
	h.reconcile()
	h.etcd.SetUnhealthy(h.etcdID("db-3"), true) // it answers, but fails its health check
	*now = now.Add(time.Minute)
	h.reconcile()
	h.reconcile()
	if calls := h.etcd.CallsTo("Remove"); len(calls) > 0 || len(h.members()) != 3 {
		t.Fatalf("removed although the quorum needs it: %v, members %v", calls, names(h.members()))
	}
	if pr := h.condition(etcdv1.ConditionProgressing); pr.Reason != etcdv1.ReasonReplacementRefused || !strings.Contains(pr.Message, "node-2") {
		t.Fatalf("Progressing %+v, want ReplacementRefused naming node-2", pr)
	}
	if dg := h.condition(etcdv1.ConditionDegraded); dg.Reason != etcdv1.ReasonNodeLost || !strings.Contains(dg.Message, "cannot be removed now") {
		t.Fatalf("Degraded %+v, want NodeLost saying it cannot be removed now", dg)
	}
}

// Only a volume pinned to the gone node is lost: a member on a network volume (no node
// affinity) whose node is gone is rescheduled, not replaced; and with policy Manual nothing
// is replaced, only reported.
func TestNodeLossNeedsAPinnedVolumeAndPolicyReplaceMember(t *testing.T) {
	h, now, _ := nodeLossHarness(t, &etcdv1.NodeLossPolicy{Policy: etcdv1.NodeLossManual})
	h.reconcile()
	*now = now.Add(time.Hour)
	h.reconcile()
	if len(h.members()) != 3 || h.victimsClock() != "" {
		t.Fatalf("policy Manual: members %v, clock %q", names(h.members()), h.victimsClock())
	}
	if dg := h.condition(etcdv1.ConditionDegraded); dg.Reason != etcdv1.ReasonNodeLost || !strings.Contains(dg.Message, etcdv1.AnnotationReplace) {
		t.Fatalf("Degraded %+v, want NodeLost saying how to replace it", dg)
	}

	h, now, _ = nodeLossHarness(t, grace20s())
	pv := &corev1.PersistentVolume{}
	if err := h.api.Get(context.Background(), types.NamespacedName{Name: "pv-db-2"}, pv); err != nil {
		t.Fatal(err)
	}
	pv.Spec.NodeAffinity = nil
	if err := h.api.Update(context.Background(), pv); err != nil {
		t.Fatal(err)
	}
	h.reconcile()
	*now = now.Add(time.Hour)
	h.reconcile()
	if len(h.members()) != 3 || h.victimsClock() != "" {
		t.Fatalf("network volume: members %v, clock %q", names(h.members()), h.victimsClock())
	}
}

// A member whose PersistentVolume is gone itself (a cleanup that deletes the local volumes of
// a deleted Node): once the PV controller has marked its PVC Lost the member is lost, named
// by its volume and the node the scheduler had chosen; a PV missing while the PVC still says
// Bound (the PV controller has not looked yet) is not enough.
func TestMemberWhoseVolumeIsGoneIsReplacedOnceItsClaimIsLost(t *testing.T) {
	h, now, _ := nodeLossHarness(t, grace20s())
	h.create(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-2", Labels: map[string]string{corev1.LabelHostname: "node-2"}}})
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-db-2"}}
	if err := h.api.Delete(context.Background(), pv); err != nil {
		t.Fatal(err)
	}
	h.reconcile()
	if h.victimsClock() != "" {
		t.Fatal("a PV missing behind a Bound PVC started the clock")
	}
	pvc := &corev1.PersistentVolumeClaim{}
	if err := h.api.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "db-2"}, pvc); err != nil {
		t.Fatal(err)
	}
	metav1.SetMetaDataAnnotation(&pvc.ObjectMeta, annotationSelectedNode, "node-2")
	if err := h.api.Update(context.Background(), pvc); err != nil {
		t.Fatal(err)
	}
	pvc.Status.Phase = corev1.ClaimLost
	if err := h.api.Status().Update(context.Background(), pvc); err != nil {
		t.Fatal(err)
	}
	h.reconcile()
	if h.victimsClock() == "" {
		t.Fatal("no clock for db-2, whose PV is gone and PVC Lost")
	}
	*now = now.Add(5 * time.Second)
	h.reconcile()
	if dg := h.condition(etcdv1.ConditionDegraded); dg.Reason != etcdv1.ReasonNodeLost || !strings.Contains(dg.Message, "PersistentVolume pv-db-2 (on node node-2) is gone and its PVC is Lost") {
		t.Fatalf("Degraded %+v, want NodeLost naming the volume, the node and the Lost PVC", dg)
	}
	*now = now.Add(time.Minute)
	h.reconcile()
	if slices.Contains(names(h.members()), "db-2") {
		t.Fatalf("db-2 not replaced after the grace period: %v", names(h.members()))
	}
}

// A volume pinned by a CSI driver's node key (TopoLVM's) to a Node whose name differs from
// the key's value: while a Node carries that label the member is not lost; once none does, it
// is.
func TestVolumePinnedByADriversNodeKey(t *testing.T) {
	h, _, _ := nodeLossHarness(t, grace20s())
	pv := &corev1.PersistentVolume{}
	if err := h.api.Get(context.Background(), types.NamespacedName{Name: "pv-db-2"}, pv); err != nil {
		t.Fatal(err)
	}
	pv.Spec.NodeAffinity.Required.NodeSelectorTerms[0].MatchExpressions = []corev1.NodeSelectorRequirement{label("topology.topolvm.io/node", "lvm-host-2")}
	if err := h.api.Update(context.Background(), pv); err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-2", Labels: map[string]string{"topology.topolvm.io/node": "lvm-host-2"}}}
	h.create(node)
	h.reconcile()
	if h.victimsClock() != "" {
		t.Fatal("the clock started while a Node carries the volume's node label")
	}
	if err := h.api.Delete(context.Background(), node); err != nil {
		t.Fatal(err)
	}
	h.reconcile()
	if h.victimsClock() == "" {
		t.Fatal("no clock once no Node carries the volume's node label")
	}
}
