package cluster

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
	"github.com/quorumkeeper/etcd-operator/internal/specs/specstest"
)

// learnerOfScaleOut scales the cluster to 4 and has db-4 join as a learner that has started
// and caught up, in the Pod the member controller built for it to join with, which names its
// peers; it returns that Pod.
func (h *harness) learnerOfScaleOut() *corev1.Pod {
	h.t.Helper()
	h.setReplicas(4)
	h.reconcile() // creates db-4
	h.reconcile() // adds it as a learner
	pod := h.startPodOf("db-4")
	if !specs.RefillsEmptyData(pod, h.clusterObj(), h.member("db-4")) {
		h.t.Fatalf("db-4's Pod names only itself before it joined: %q", specs.InitialClusterOf(pod))
	}
	id, err := etcd.ParseID(h.member("db-4").Status.MemberID)
	if err != nil {
		h.t.Fatal(err)
	}
	h.etcd.StartMember(id, "db-4", specs.ClientURL(h.clusterObj(), "db-4"))
	h.etcd.SetCaughtUp(id, true)
	h.etcd.ResetCalls()
	return pod
}

// The look that promotes a learner first makes its Pod name only itself, in place: the
// member becomes a voter with no restart, and with a Pod that refuses an empty data directory.
func TestPromotionMakesTheLearnersPodRefuseEmptyDataWithoutARestart(t *testing.T) {
	h := runningHarness(t)
	h.startPods()
	joined := h.learnerOfScaleOut()
	h.reconcile()
	if promotes := h.etcd.CallsTo("Promote"); len(promotes) != 1 {
		t.Fatalf("Promote calls %v, want db-4's in the look that patched its Pod", promotes)
	}
	pod := h.pod("db-4")
	if pod.UID != joined.UID {
		t.Fatal("db-4's Pod was replaced")
	}
	if got, want := specs.InitialClusterOf(pod), specs.InitialCluster(h.clusterObj(), []string{"db-4"}); got != want {
		t.Fatalf("db-4's Pod gives etcd the initial cluster %q, want %q", got, want)
	}
	for range 3 {
		h.reconcile()
	}
	if got := h.podNames(); !slices.Equal(got, []string{"db-1", "db-2", "db-3", "db-4"}) || h.pod("db-4").UID != joined.UID {
		t.Fatalf("Pods %v after the promotion: the new voter was restarted", got)
	}
}

// requireDataInPlace patches a copy: the Pod it was given, the view's, which the look's later
// steps read, stays as listed.
func TestRequireDataInPlaceLeavesTheViewsPodAsListed(t *testing.T) {
	h := runningHarness(t)
	h.startPods()
	listed := h.learnerOfScaleOut()
	before := listed.DeepCopy()
	if done, err := h.r.requireDataInPlace(context.Background(), h.clusterObj(), h.member("db-4"), listed); !done || err != nil {
		t.Fatalf("requireDataInPlace = %v, %v; want db-4's Pod patched", done, err)
	}
	if !reflect.DeepEqual(listed, before) {
		t.Fatalf("the view's Pod changed: initial cluster %q, was %q", specs.InitialClusterOf(listed), specs.InitialClusterOf(before))
	}
	if got, want := specs.InitialClusterOf(h.pod("db-4")), specs.InitialCluster(h.clusterObj(), []string{"db-4"}); got != want {
		t.Fatalf("db-4's stored Pod gives etcd the initial cluster %q, want %q", got, want)
	}
}

// A learner whose Pod could not be patched is not promoted: as a voter its Pod would let it
// rejoin on an empty data directory under its ID.
func TestALearnerWhosePodCannotBePatchedIsNotPromoted(t *testing.T) {
	refuse := true
	h := harnessWith(t, interceptor.Funcs{Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
		if _, ok := obj.(*corev1.Pod); ok && refuse {
			return errors.New("the API server is unavailable")
		}
		return c.Patch(ctx, obj, patch, opts...)
	}})
	h.reconcile()
	h.running()
	h.startPods()
	h.learnerOfScaleOut()
	h.reconcile()
	if promotes := h.etcd.CallsTo("Promote"); len(promotes) != 0 {
		t.Fatalf("Promote calls %v with db-4's Pod still naming its peers", promotes)
	}
	if cond := h.condition(etcdv1.ConditionProgressing); !strings.Contains(cond.Message, "not promoting db-4") {
		t.Fatalf("Progressing %+v, want why db-4 is not promoted", cond)
	}
	refuse = false
	h.reconcile()
	if promotes := h.etcd.CallsTo("Promote"); len(promotes) != 1 {
		t.Fatalf("Promote calls %v once the patch went through", promotes)
	}
}

// Only a voter's Pod of an earlier release, whose flag only a new Pod changes, is rolled for
// naming its peers; a Pod of this release is patched instead (requireDataOfVoters).
func TestJoinedWithPeerFlags(t *testing.T) {
	h := newHarness(t)
	c := h.cluster
	peers := specs.InitialCluster(c, []string{"db-1", "db-2", "db-3", "db-4"})
	for _, tc := range []struct {
		name    string
		role    etcdv1.MemberRole
		medium  etcdv1.StorageMedium
		initial string
		old     bool
		want    bool
	}{
		{name: "voter, flag naming its peers", role: etcdv1.RoleVoter, initial: peers, old: true, want: true},
		{name: "voter, annotation naming its peers", role: etcdv1.RoleVoter, initial: peers},
		{name: "voter, flag naming itself", role: etcdv1.RoleVoter, initial: specs.InitialCluster(c, []string{"db-4"}), old: true},
		{name: "learner, flag naming its peers", role: etcdv1.RoleLearner, initial: peers, old: true},
		{name: "tmpfs voter, flag naming its peers", role: etcdv1.RoleVoter, medium: etcdv1.StorageMediumMemory, initial: peers, old: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := h.r.newMember(c, "db-4", etcdv1.MemberBootstrap{InitialCluster: tc.initial, InitialClusterState: etcdv1.InitialClusterStateExisting})
			m.Spec.Storage.Medium = tc.medium
			m.Status.Role, m.Status.MemberID = tc.role, "4"
			pod := specs.Pod(c, m, h.r.PodOptions)
			if tc.old {
				pod = specstest.BuiltByAnEarlierRelease(pod)
			}
			if got := joinedWithPeerFlags(c, m, pod); got != tc.want {
				t.Fatalf("joinedWithPeerFlags = %v, want %v", got, tc.want)
			}
		})
	}
}
