package cluster

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller/kit"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
	"github.com/quorumkeeper/etcd-operator/internal/specs/specstest"
)

// startPods creates, for every member without one, the Pod the member controller would
// build now, Ready.
func (h *harness) startPods() {
	h.t.Helper()
	c := h.clusterObj()
	for _, m := range h.members() {
		pod := specs.Pod(c, m, h.r.PodOptions)
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		if err := h.api.Create(context.Background(), pod); client.IgnoreAlreadyExists(err) != nil {
			h.t.Fatal(err)
		}
	}
}

func (h *harness) podNames() []string {
	h.t.Helper()
	list := &corev1.PodList{}
	if err := h.api.List(context.Background(), list, client.InNamespace("ns")); err != nil {
		h.t.Fatal(err)
	}
	var out []string
	for _, p := range list.Items {
		out = append(out, p.Name)
	}
	slices.Sort(out)
	return out
}

func (h *harness) setMemoryRequest(q string) {
	h.t.Helper()
	h.editSpec(func(s *etcdv1.EtcdClusterSpec) {
		s.Resources = corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(q)}}
	})
}

// A change that reaches the members' Pods (a spec field, or a restart asked for with
// AnnotationRestartedAt, as kubectl etcd restart does) restarts them one at a time, the
// followers first, the leader last after leadership moved away.
func TestChangedPodSpecRestartsOneMemberAtATimeLeaderLast(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(h *harness)
	}{
		{"a spec field", func(h *harness) { h.setMemoryRequest("512Mi") }},
		{"a restart asked for", func(h *harness) {
			c := h.clusterObj()
			c.Annotations = map[string]string{etcdv1.AnnotationRestartedAt: "2026-12-05T04:00:00Z"}
			if err := h.api.Update(context.Background(), c); err != nil {
				h.t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { restartsOneAtATimeLeaderLast(t, tc.change) })
	}
}

func restartsOneAtATimeLeaderLast(t *testing.T, change func(h *harness)) {
	h := runningHarness(t)
	h.startPods()
	h.reconcile()
	if got := h.podNames(); len(got) != 3 {
		t.Fatalf("an unchanged spec restarted Pods: %v", got)
	}
	_, list, _ := h.etcd.MemberList(context.Background())
	leader := list[0] // db-1
	h.etcd.SetLeader(leader.ID)
	change(h)

	var restarted []string
	for range 3 {
		before := h.podNames()
		h.reconcile()
		after := h.podNames()
		if len(after) != 2 {
			t.Fatalf("one Pod at a time: before %v, after %v", before, after)
		}
		h.reconcile() // the restarted member is not back: nothing more happens
		if got := h.podNames(); !slices.Equal(got, after) {
			t.Fatalf("a second member went while one was down: %v", got)
		}
		for _, name := range before {
			if !slices.Contains(after, name) {
				restarted = append(restarted, name)
			}
		}
		h.startPods()
		if restarted[len(restarted)-1] == "db-1" {
			break
		}
		if len(restarted) == 2 {
			h.reconcile() // db-1 leads: leadership moves first, no Pod goes
			if moves := h.etcd.CallsTo("MoveLeader"); len(moves) != 1 || len(h.podNames()) != 3 {
				t.Fatalf("leadership moves before the leader restarts: calls %v, Pods %v", moves, h.podNames())
			}
		}
	}
	if !slices.Equal(restarted, []string{"db-2", "db-3", "db-1"}) {
		t.Fatalf("restart order %v, want followers first, the leader last", restarted)
	}
	h.reconcile()
	if got := h.podNames(); len(got) != 3 {
		t.Fatalf("every Pod up to date, yet one was restarted: %v", got)
	}
}

func TestChangedPodSpecWaitsForUnhealthyVoters(t *testing.T) {
	h := runningHarness(t)
	h.startPods()
	_, list, _ := h.etcd.MemberList(context.Background())
	h.etcd.SetDown(list[1].ID, true)
	h.setMemoryRequest("512Mi")
	h.reconcile()
	if got := h.podNames(); len(got) != 3 {
		t.Fatalf("a Pod was restarted while a voter was down: %v", got)
	}
	assertProgressingReason(t, h, "MembersUnhealthy")
}

func TestChangedPodSpecOfASingleTmpfsMemberIsNotApplied(t *testing.T) {
	h := newHarness(t)
	one := int32(1)
	h.editSpec(func(s *etcdv1.EtcdClusterSpec) { s.Replicas, s.Storage.Medium = &one, etcdv1.StorageMediumMemory })
	h.reconcile()
	h.running()
	h.startPods()
	h.setMemoryRequest("512Mi")
	h.reconcile()
	if got := h.podNames(); len(got) != 1 {
		t.Fatalf("the only tmpfs member was restarted, losing the data: %v", got)
	}
	assertProgressingReason(t, h, "PodSpecChangeBlocked")
}

func assertProgressingReason(t *testing.T, h *harness, reason string) {
	t.Helper()
	for _, cond := range h.clusterObj().Status.Conditions {
		if cond.Type == etcdv1.ConditionProgressing && cond.Reason == reason {
			return
		}
	}
	t.Fatalf("Progressing reason is not %s: %+v", reason, h.clusterObj().Status.Conditions)
}

// db2JoinedByScaleOut makes db-2 a member added by scale-out, as far as its Pod goes.
func (h *harness) db2JoinedByScaleOut() {
	h.t.Helper()
	for _, m := range h.members() {
		if m.Name != "db-2" {
			continue
		}
		m.Spec.Bootstrap.InitialClusterState = etcdv1.InitialClusterStateExisting
		if err := h.api.Update(context.Background(), m); err != nil {
			h.t.Fatal(err)
		}
	}
}

// A voter added by scale-out by an earlier operator release runs in the Pod it joined with,
// whose --initial-cluster flag names its peers: it is restarted once (followers first, as any
// roll), into a Pod that refuses an empty data directory, and then left alone.
func TestAVoterAddedByScaleOutRestartsOnceToRefuseEmptyData(t *testing.T) {
	h := runningHarness(t)
	h.db2JoinedByScaleOut()
	c := h.clusterObj()
	old := specstest.BuiltByAnEarlierRelease(specs.Pod(c, h.member("db-2"), h.r.PodOptions))
	old.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	if err := h.api.Create(context.Background(), old); err != nil {
		t.Fatal(err)
	}
	h.startPods()
	h.reconcile()
	if got := h.podNames(); !slices.Equal(got, []string{"db-1", "db-3"}) {
		t.Fatalf("Pods %v, want db-2's restarted", got)
	}
	// The reconcile that restarted it saw every Pod up: its status must not read as settled.
	assertProgressingReason(t, h, etcdv1.ReasonChanging)
	// The member controller starts a joined member with only itself named.
	for _, m := range h.members() {
		if m.Name == "db-2" {
			pod := specs.Pod(c, m, h.r.PodOptions)
			specs.RequireData(pod, c, m)
			pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
			if err := h.api.Create(context.Background(), pod); err != nil {
				t.Fatal(err)
			}
		}
	}
	h.reconcile()
	if got := h.podNames(); len(got) != 3 {
		t.Fatalf("restarted again: %v", got)
	}
}

// A voter whose Pod, of this release, names its peers all the same (promoted by an earlier
// release, or its Pod recreated while etcd could not say whether it had joined) is not
// restarted: its Pod's annotation is changed to name only itself, once.
func TestAVoterWhosePodNamesItsPeersIsPatchedNotRestarted(t *testing.T) {
	h := runningHarness(t)
	h.db2JoinedByScaleOut()
	h.startPods()
	before := h.pod("db-2")
	h.reconcile()
	after := h.pod("db-2")
	if got := h.podNames(); len(got) != 3 || after.UID != before.UID {
		t.Fatalf("Pods %v: db-2's was restarted", got)
	}
	if got, want := specs.InitialClusterOf(after), specs.InitialCluster(h.clusterObj(), []string{"db-2"}); got != want {
		t.Fatalf("db-2's Pod gives etcd the initial cluster %q, want %q", got, want)
	}
	h.reconcile()
	if again := h.pod("db-2"); again.ResourceVersion != after.ResourceVersion || len(h.podNames()) != 3 {
		t.Fatal("db-2's Pod was changed again")
	}
}

// With every roll slot taken by other clusters, a changed Pod spec waits (RollQueued) and no
// Pod goes; once a slot frees, the roll begins, and the cluster gives its slot back when no
// Pod is outdated any more.
func TestChangedPodSpecWaitsForARollSlot(t *testing.T) {
	h := runningHarness(t)
	h.startPods()
	h.r.RollSlots = kit.NewRollSlots(1)
	other := types.NamespacedName{Namespace: "elsewhere", Name: "rolling"}
	if ok, _ := h.r.RollSlots.Take(other); !ok {
		t.Fatal("the first slot was refused")
	}
	h.setMemoryRequest("768Mi")
	h.reconcile()
	if got := h.podNames(); len(got) != 3 {
		t.Fatalf("a member restarted while every slot was taken: Pods %v", got)
	}
	if cond := h.condition(etcdv1.ConditionProgressing); cond.Reason != etcdv1.ReasonRollQueued {
		t.Fatalf("Progressing %+v, want %s", cond, etcdv1.ReasonRollQueued)
	}
	h.r.RollSlots.Release(other)
	h.reconcile()
	if got := h.podNames(); len(got) != 2 {
		t.Fatalf("the roll did not begin once a slot was free: Pods %v", got)
	}
	if ok, _ := h.r.RollSlots.Take(other); ok {
		t.Fatal("the rolling cluster did not hold the slot")
	}
	for range 4 {
		h.startPods()
		h.reconcile()
	}
	h.startPods()
	h.reconcile()
	if ok, _ := h.r.RollSlots.Take(other); !ok {
		t.Fatalf("the slot was kept after the roll ended: Pods %v", h.podNames())
	}
}

// A roll stuck on a member whose Pod cannot start (its image cannot be pulled) gives its
// roll slot back, so that other clusters' rolls do not wait for a person to fix this one;
// a member whose Pod is only starting keeps it.
func TestARollStuckOnAPodThatCannotStartGivesItsSlotBack(t *testing.T) {
	h := runningHarness(t)
	h.startPods()
	h.r.RollSlots = kit.NewRollSlots(1)
	other := types.NamespacedName{Namespace: "elsewhere", Name: "rolling"}
	h.setMemoryRequest("768Mi")
	h.reconcile()
	if got := h.podNames(); len(got) != 2 {
		t.Fatalf("the roll did not begin: Pods %v", got)
	}
	gone := ""
	for _, m := range h.members() {
		if !slices.Contains(h.podNames(), m.Name) {
			gone = m.Name
		}
	}
	setPod := func(state corev1.ContainerState) {
		t.Helper()
		pod := &corev1.Pod{}
		err := h.api.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: gone}, pod)
		if err != nil {
			c := h.clusterObj()
			for _, m := range h.members() {
				if m.Name == gone {
					pod = specs.Pod(c, m, h.r.PodOptions)
				}
			}
		}
		pod.Spec.NodeName = "node-1"
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "etcd", State: state}}
		status := pod.Status
		if err != nil {
			err = h.api.Create(context.Background(), pod)
		} else {
			err = h.api.Update(context.Background(), pod)
		}
		if err != nil {
			t.Fatal(err)
		}
		pod.Status = status
		if err := h.api.Status().Update(context.Background(), pod); err != nil {
			t.Fatal(err)
		}
	}
	setPod(corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}})
	h.reconcile()
	if ok, _ := h.r.RollSlots.Take(other); ok {
		t.Fatal("the slot was given back while the restarted member's Pod was only starting")
	}
	assertProgressingReason(t, h, "RollingUpdate")
	setPod(corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"}})
	h.reconcile()
	assertProgressingReason(t, h, etcdv1.ReasonRollStuck)
	if ok, _ := h.r.RollSlots.Take(other); !ok {
		t.Fatal("the slot is held by a roll stuck on a Pod that cannot start")
	}
}
