package cluster

import (
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller/children/childtest"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// annotatePVCs records each member's ID on its PVC, as the member controller does.
func (h *harness) annotatePVCs() {
	h.t.Helper()
	for _, m := range h.members() {
		pvc := &corev1.PersistentVolumeClaim{}
		if err := h.api.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: m.Name}, pvc); err != nil {
			h.t.Fatal(err)
		}
		pvc.Annotations = map[string]string{etcdv1.AnnotationMemberID: m.Status.MemberID, etcdv1.AnnotationClusterID: m.Status.ClusterID}
		if err := h.api.Update(context.Background(), pvc); err != nil {
			h.t.Fatal(err)
		}
	}
}

// memberIDs are the EtcdMembers' recorded member IDs, by name.
func (h *harness) memberIDs() map[string]string {
	ids := map[string]string{}
	for _, m := range h.members() {
		ids[m.Name] = m.Status.MemberID
	}
	return ids
}

func (h *harness) deleteMember(name string) {
	h.t.Helper()
	if err := h.api.Delete(context.Background(), &etcdv1.EtcdMember{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}); err != nil {
		h.t.Fatal(err)
	}
}

// deleteVictimObject deletes the PVC or the Pod of db-2, the member these tests damage.
func (h *harness) deleteVictimObject(kind string) {
	const victim = "db-2"
	h.t.Helper()
	var err error
	switch kind {
	case "pvc":
		err = h.api.Delete(context.Background(), &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: victim}})
	case "pod":
		err = h.api.Delete(context.Background(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: victim}})
	}
	if err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) etcdID(name string) uint64 {
	h.t.Helper()
	for _, m := range h.etcd.Members() {
		if m.Name == name {
			return m.ID
		}
	}
	h.t.Fatalf("no etcd member %s", name)
	return 0
}

func (h *harness) condition(condType string) metav1.Condition {
	h.t.Helper()
	cond := meta.FindStatusCondition(h.clusterObj().Status.Conditions, condType)
	if cond == nil {
		h.t.Fatalf("no condition %s", condType)
	}
	return *cond
}

func TestDeletedEtcdMembersAreRebuiltFromTheirPVCs(t *testing.T) {
	for _, tc := range []struct {
		name     string
		replicas int32
		deleted  []string
	}{
		{"all three", 3, []string{"db-1", "db-2", "db-3"}},
		{"two of three", 3, []string{"db-1", "db-2"}},
		{"the only one", 1, []string{"db-1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.setReplicas(tc.replicas)
			h.reconcile()
			h.running()
			h.annotatePVCs()
			want := h.memberIDs()
			for _, name := range tc.deleted {
				h.deleteMember(name) // the finalizer let go; the Pod went with the EtcdMember
				h.etcd.SetDown(h.etcdID(name), true)
			}
			h.reconcile()
			got := map[string]string{}
			for _, m := range h.members() {
				got[m.Name] = m.Status.MemberID
				if m.Spec.Bootstrap.InitialCluster != specs.InitialCluster(h.clusterObj(), []string{m.Name}) && slices.Contains(tc.deleted, m.Name) {
					t.Errorf("%s rebuilt with initial cluster %q, want only itself", m.Name, m.Spec.Bootstrap.InitialCluster)
				}
			}
			if len(got) != len(want) {
				t.Fatalf("members %v, want %v rebuilt", got, want)
			}
			for name, id := range want {
				if got[name] != id {
					t.Fatalf("%s rebuilt as %q, was %q", name, got[name], id)
				}
			}
			if removes := h.etcd.CallsTo("Remove"); len(removes) > 0 {
				t.Fatalf("membership changed: %v", removes)
			}
		})
	}
}

func TestQuorumLostSaysWhatEachMemberHas(t *testing.T) {
	h := runningHarness(t)
	h.etcd.SetDown(h.etcdID("db-2"), true)
	h.etcd.SetDown(h.etcdID("db-3"), true)
	h.reconcile()
	av := h.condition(etcdv1.ConditionAvailable)
	if av.Reason != etcdv1.ReasonQuorumLost || !strings.Contains(av.Message, "db-1 (1): revision 0, raft term 1") ||
		!strings.Contains(av.Message, "db-2: not answering") || !strings.Contains(av.Message, "1 of 3 members answer") {
		t.Fatalf("Available %+v", av)
	}
	if pr := h.condition(etcdv1.ConditionProgressing); pr.Reason != etcdv1.ReasonQuorumLost {
		t.Fatalf("Progressing %+v", pr)
	}
}

func TestJoinedMemberWhosePVCIsGoneIsReplacedUnderANewID(t *testing.T) {
	h := runningHarness(t)
	lost := h.etcdID("db-2")
	h.deleteVictimObject("pvc")
	h.reconcile() // db-2 marked and deleted (its finalizer would remove it from etcd)
	if slices.Contains(names(h.members()), "db-2") {
		t.Fatalf("db-2 kept: %v", names(h.members()))
	}
	h.reconcile() // no finalizer here: etcd still lists db-2, a voter without data
	if removes := h.etcd.CallsTo("Remove"); !slices.Equal(removes, []string{"Remove(" + etcd.FormatID(lost) + ")"}) {
		t.Fatalf("Remove calls %v, want db-2's ID once", removes)
	}
	h.reconcile() // scale out to 3 again: the name is free (no EtcdMember, PVC, Pod or etcd member)
	h.reconcile() // and add it as a learner
	fresh := memberNamed(h.members(), "db-2")
	if fresh == nil || fresh.Status.MemberID == "" || fresh.Status.MemberID == etcd.FormatID(lost) || fresh.Status.Role != etcdv1.RoleLearner {
		t.Fatalf("members %v, want a new learner with a new ID in db-2's place", names(h.members()))
	}
}

func TestReplacementRefusedWhileTheQuorumNeedsTheMember(t *testing.T) {
	h := runningHarness(t)
	recorder := events.NewFakeRecorder(20)
	h.r.Recorder = recorder
	h.etcd.SetDown(h.etcdID("db-3"), true)
	h.deleteVictimObject("pvc") // its Pod still serves, but the data is going
	h.reconcile()
	h.reconcile()
	if got := names(h.members()); len(got) != 3 {
		t.Fatalf("a member was removed although the quorum needs it: %v", got)
	}
	if pr := h.condition(etcdv1.ConditionProgressing); pr.Reason != etcdv1.ReasonReplacementRefused || !strings.Contains(pr.Message, "db-2") {
		t.Fatalf("Progressing %+v", pr)
	}
	if calls := h.etcd.CallsTo("Remove"); len(calls) > 0 {
		t.Fatalf("removed from etcd: %v", calls)
	}
	if got := childtest.Events(recorder); len(got) != 1 || !strings.Contains(got[0], etcdv1.ReasonReplacementRefused) {
		t.Fatalf("events %v, want one ReplacementRefused for the refusal", got)
	}
	h.etcd.SetDown(h.etcdID("db-3"), false)
	h.reconcile()
	if slices.Contains(names(h.members()), "db-2") {
		t.Fatal("db-2 not replaced once the quorum could lose it")
	}
}

func TestReplaceAnnotationAndCorruptAlarmReplaceTheMember(t *testing.T) {
	h := runningHarness(t)
	m := h.members()[0]
	m.Annotations = map[string]string{etcdv1.AnnotationReplace: "true"}
	if err := h.api.Update(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	h.reconcile()
	if slices.Contains(names(h.members()), "db-1") {
		t.Fatal("db-1 not replaced although asked")
	}
	h = runningHarness(t)
	h.etcd.RaiseAlarm(etcd.Alarm{MemberID: h.etcdID("db-3"), Type: etcd.AlarmCorrupt})
	h.reconcile()
	if slices.Contains(names(h.members()), "db-3") {
		t.Fatal("db-3 not replaced despite its CORRUPT alarm")
	}
}

func TestDeadVoterIsRemovedWhenScalingIn(t *testing.T) {
	h := runningHarness(t)
	h.etcd.SetDown(h.etcdID("db-1"), true)
	h.setReplicas(2)
	h.reconcile()
	if got := names(h.members()); !slices.Equal(got, []string{"db-2", "db-3"}) {
		t.Fatalf("members %v, want the dead db-1 removed", got)
	}
}

// joinLearners does what the Pods of the learners the operator added do: each starts (publishes
// its name) and catches up; then the operator looks again. It repeats, a bounded number of
// times, until etcd lists no learner, no member of ID gone (0: none), and the started voters
// are the names want, sorted.
func (h *harness) joinLearners(gone uint64, want ...string) {
	h.t.Helper()
	c := h.clusterObj()
	for look := 0; look < 10; look++ {
		var voters []string
		learners := 0
		for _, em := range h.etcd.Members() {
			switch {
			case em.ID == gone:
				learners++ // not done while it is listed
			case em.IsLearner || !em.IsStarted():
				learners++
			default:
				voters = append(voters, em.Name)
			}
		}
		slices.Sort(voters)
		if learners == 0 && slices.Equal(voters, want) {
			return
		}
		for _, m := range h.members() {
			if id, err := etcd.ParseID(m.Status.MemberID); err == nil && m.Status.Role == etcdv1.RoleLearner {
				h.etcd.StartMember(id, m.Name, specs.ClientURL(c, m.Name))
				h.etcd.SetCaughtUp(id, true)
			}
		}
		h.reconcile()
	}
	h.t.Fatalf("etcd never listed the voters %v, no learner and not %x: %+v", want, gone, h.etcd.Members())
}

func TestScaleOutWhileAVoterIsDead(t *testing.T) {
	h := runningHarness(t)
	h.etcd.SetDown(h.etcdID("db-1"), true)
	h.setReplicas(5)
	h.reconcile()
	if n := len(h.members()); n != 4 {
		t.Fatalf("%d members, want a fourth: 2 healthy voters of 3 keep the quorum of 4 with the new one", n)
	}
	h.reconcile()
	if adds := h.etcd.CallsTo("AddLearner"); len(adds) != 1 || !strings.Contains(adds[0], "db-4.db.ns.svc:2380") {
		t.Fatalf("AddLearner calls %v, want db-4 added as a learner once", adds)
	}
	h.joinLearners(0, "db-1", "db-2", "db-3", "db-4") // db-4 promoted; db-1 is listed, though down
	if promotes := h.etcd.CallsTo("Promote"); len(promotes) != 1 {
		t.Fatalf("Promote calls %v, want db-4's alone", promotes)
	}
}

func TestLeftoverRemovalMarkIsNotCarriedOutWithoutQuorum(t *testing.T) {
	h := runningHarness(t)
	h.etcd.SetDown(h.etcdID("db-3"), true)
	h.markForRemoval("db-1") // marked while all was well; then db-3 died
	h.setReplicas(2)
	h.reconcile()
	if got := names(h.members()); !slices.Contains(got, "db-1") {
		t.Fatalf("members %v: the marked db-1 was removed although only db-2 would stay healthy", got)
	}
	if pr := h.condition(etcdv1.ConditionProgressing); !strings.Contains(pr.Message, "below the quorum") {
		t.Fatalf("Progressing %+v", pr)
	}
}

func tmpfsHarness(t *testing.T) *harness {
	h := newHarness(t)
	c := h.clusterObj()
	c.Spec.Storage.Medium = etcdv1.StorageMediumMemory
	if err := h.api.Update(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	h.reconcile()
	h.running()
	return h
}

func TestTmpfsMemberWhosePodIsLostIsReplaced(t *testing.T) {
	h := tmpfsHarness(t)
	lost := h.etcdID("db-2")
	h.deleteVictimObject("pod")
	h.etcd.SetDown(lost, true) // its process went with the Pod
	h.reconcile()
	if slices.Contains(names(h.members()), "db-2") {
		t.Fatalf("db-2 kept its identity without its data: %v", names(h.members()))
	}
	h.checkReplacementJoined(lost, "db-1", "db-2", "db-3") // a tmpfs member keeps its name, not its ID
}

// checkReplacementJoined: the member of ID lost is out of etcd, and a new member has joined
// in its place as a voter under a new ID, so that etcd lists the voters want.
func (h *harness) checkReplacementJoined(lost uint64, want ...string) {
	h.t.Helper()
	h.joinLearners(lost, want...)
}

func TestTmpfsVoterDeletedByHandIsRemovedNotRecreated(t *testing.T) {
	h := tmpfsHarness(t)
	id := h.etcdID("db-2")
	h.deleteMember("db-2")
	h.deleteVictimObject("pod") // garbage collection takes it with its data
	h.reconcile()
	if slices.Contains(names(h.members()), "db-2") {
		t.Fatal("db-2 recreated under its old ID on empty tmpfs")
	}
	if removes := h.etcd.CallsTo("Remove"); !slices.Equal(removes, []string{"Remove(" + etcd.FormatID(id) + ")"}) {
		t.Fatalf("Remove calls %v", removes)
	}
}

func TestVoterDeletedByHandWithItsPVCIsRecreatedWithItsID(t *testing.T) {
	h := runningHarness(t)
	id := h.members()[1].Status.MemberID
	h.deleteMember("db-2")
	h.reconcile()
	m := h.members()[1]
	if m.Name != "db-2" || m.Status.MemberID != id {
		t.Fatalf("db-2 recreated as %s/%s, want its ID %s", m.Name, m.Status.MemberID, id)
	}
	if calls := h.etcd.CallsTo("Remove"); len(calls) > 0 {
		t.Fatalf("removed from etcd: %v", calls)
	}
}

func TestMemberRemovedFromEtcdByHandIsReplaced(t *testing.T) {
	h := runningHarness(t)
	removed := h.etcdID("db-2")
	if err := h.etcd.Remove(context.Background(), removed); err != nil {
		t.Fatal(err)
	}
	h.reconcile()
	if slices.Contains(names(h.members()), "db-2") {
		t.Fatal("db-2, removed from etcd by hand, is kept: its Pod can only crash")
	}
	h.checkReplacementJoined(removed, "db-1", "db-3", "db-4")
}

// The operator died between rebuilding an EtcdMember from its PVC and recording its member ID:
// the member would wait forever to be added to etcd. The next reconcile finishes it.
func TestRebuildFromPVCsResumesAfterACrash(t *testing.T) {
	h := newHarness(t)
	h.reconcile()
	h.running()
	h.annotatePVCs()
	want := h.memberIDs()
	for name := range want {
		h.deleteMember(name)
		h.etcd.SetDown(h.etcdID(name), true)
	}
	h.createUnfinishedMember("db-1")
	h.reconcile()
	for _, m := range h.members() {
		if m.Status.MemberID != want[m.Name] {
			t.Fatalf("%s has member ID %q, want %q from its PVC", m.Name, m.Status.MemberID, want[m.Name])
		}
	}
	if n := len(h.members()); n != 3 {
		t.Fatalf("%d members, want 3 rebuilt", n)
	}
}
