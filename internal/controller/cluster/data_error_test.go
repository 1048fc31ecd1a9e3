package cluster

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// emptyDataExit is etcd's last words on an empty data directory in a Pod that names only its
// member (specs.RequireData).
const emptyDataExit = `{"level":"fatal","msg":"discovery failed","error":"cannot fetch cluster info from peer urls: could not retrieve cluster information from the given URLs"}`

// exitedOnItsData is a member's Pod as the kubelet reports it right after etcd's first exit on
// an empty data directory.
func exitedOnItsData() corev1.PodStatus {
	return corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
		Name:  specs.ContainerName,
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 1, Message: emptyDataExit}},
	}}}
}

// servingAgain is that Pod once the kubelet has started etcd again after the exit.
func servingAgain() corev1.PodStatus {
	return corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
		Name:                 specs.ContainerName,
		RestartCount:         1,
		State:                corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 1, Message: emptyDataExit}},
	}}}
}

// givePod creates member name's Pod, as the member controller builds it, with status.
func (h *harness) givePod(name string, status corev1.PodStatus) *corev1.Pod {
	h.t.Helper()
	pod := specs.Pod(h.clusterObj(), memberNamed(h.members(), name), h.r.PodOptions)
	pod.Status = status
	if err := h.api.Create(context.Background(), pod); err != nil {
		h.t.Fatal(err)
	}
	return pod
}

// The bench's "data wiped -> replaced": a follower's volume emptied and its Pod deleted; the
// new Pod's etcd exits at once on the empty directory. The look that sees that first exit
// replaces the member, and does not ask it first: nothing runs to answer, and against a real
// etcd the question waits out its timeout (3 s), once in the look before the exit and once in
// the look that sees it.
func TestAMemberThatExitsOnItsDataIsReplacedAtTheFirstExitWithoutBeingAsked(t *testing.T) {
	h := runningHarness(t)
	c := h.clusterObj()
	h.etcd.SetDown(h.etcdID("db-2"), true)
	h.givePod("db-2", corev1.PodStatus{Phase: corev1.PodPending})
	h.reconcile() // the Pod made again, its etcd not started yet
	if !slices.Contains(names(h.members()), "db-2") {
		t.Fatal("db-2 replaced before it exited on its data")
	}
	pod := &corev1.Pod{}
	if err := h.api.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "db-2"}, pod); err != nil {
		t.Fatal(err)
	}
	pod.Status = exitedOnItsData()
	if err := h.api.Status().Update(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	h.reconcile()
	if slices.Contains(names(h.members()), "db-2") {
		t.Fatalf("db-2 kept after its first exit on an empty data directory: %v", names(h.members()))
	}
	if asked := h.etcd.CallsTo("Status"); slices.Contains(asked, "Status("+specs.ClientURL(c, "db-2")+")") || len(asked) == 0 {
		t.Fatalf("Status calls %v: want the members that run asked, not db-2, whose Pod says etcd does not run", asked)
	}
}

// livePods reads the Pods of pods as they are now, ahead of the cache the reconciler's client
// stands for; everything else through the cache.
type livePods struct {
	client.Reader
	pods map[string]*corev1.Pod
}

func (l livePods) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if pod, ok := obj.(*corev1.Pod); ok && l.pods[key.Name] != nil {
		l.pods[key.Name].DeepCopyInto(pod)
		return nil
	}
	return l.Reader.Get(ctx, key, obj, opts...)
}

// A member whose cached Pod still shows an exit on its data is not asked; if its Pod read live
// says etcd runs again, it is not replaced on that look: whether it serves is for the next
// look to ask. A member that exited once and serves again has its data.
func TestAMemberStartedAgainSinceTheCachedExitIsNotReplacedUnasked(t *testing.T) {
	h := runningHarness(t)
	cached := h.givePod("db-2", exitedOnItsData())
	live := cached.DeepCopy()
	live.Status = servingAgain()
	h.r.APIReader = livePods{Reader: h.api, pods: map[string]*corev1.Pod{"db-2": live}}
	h.reconcile()
	if !slices.Contains(names(h.members()), "db-2") {
		t.Fatal("db-2 replaced on a cached exit although its Pod runs etcd again")
	}
	if removes := h.etcd.CallsTo("Remove"); len(removes) > 0 {
		t.Fatalf("removed from etcd: %v", removes)
	}
}

func TestEtcdStoppedIsWhatIsKnownOfTheMembersPod(t *testing.T) {
	member := func(podName string, adopted bool) *etcdv1.EtcdMember {
		m := &etcdv1.EtcdMember{}
		m.Spec.Bootstrap.InitialClusterState = etcdv1.InitialClusterStateExisting
		m.Status.PodName = podName
		if adopted {
			m.Spec.Adopted = &etcdv1.MemberAdoption{}
		}
		return m
	}
	backOff := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
		Name: specs.ContainerName, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
	}}}}
	runs := &corev1.Pod{Status: servingAgain()}
	cases := []struct {
		name string
		m    *etcdv1.EtcdMember
		pod  *corev1.Pod
		want bool
	}{
		{"its Pod gone since it ran", member("db-2", false), nil, true},
		{"no Pod ever recorded: unknown, asked", member("", false), nil, false},
		{"adopted: its Pod may lack our labels", member("db-2", true), nil, false},
		{"another operator's, not adopted yet", &etcdv1.EtcdMember{Status: etcdv1.EtcdMemberStatus{PodName: "db-2"}}, nil, false},
		{"in a back-off", member("db-2", false), backOff, true},
		{"just made, not started", member("db-2", false), &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending}}, true},
		{"runs again", member("db-2", false), runs, false},
		{"a Pod that says nothing of etcd", member("db-2", false), &corev1.Pod{}, false},
	}
	for _, tc := range cases {
		if got := etcdStopped(tc.m, tc.pod); got != tc.want {
			t.Errorf("%s: stopped %v, want %v", tc.name, got, tc.want)
		}
	}
}
