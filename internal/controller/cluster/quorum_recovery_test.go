package cluster

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

func answered(name string, applied uint64, learner bool) survivor {
	return survivor{name: name, answered: true, status: etcd.Status{MemberID: 7, Revision: 42, RaftTerm: 3, RaftAppliedIndex: applied, IsLearner: learner}}
}

func TestPlanRecovery(t *testing.T) {
	down := survivor{name: "db-2"}
	members := []string{"db-1", "db-2", "db-3"}
	for _, tc := range []struct {
		name      string
		requested string
		survivors []survivor
		tmpfs     bool
		refusal   string // part of the refusal; "" when it goes ahead
	}{
		{"the only survivor", "db-1", []survivor{answered("db-1", 100, false), down, {name: "db-3"}}, false, ""},
		{"the most advanced of two", "db-1", []survivor{answered("db-1", 100, false), answered("db-3", 90, false), down}, false, ""},
		{"equal survivors", "db-3", []survivor{answered("db-1", 100, false), answered("db-3", 100, false), down}, false, ""},
		{"a member that does not answer", "db-2", []survivor{answered("db-1", 100, false), down}, false, "member db-2 does not answer; members that answer: [db-1]"},
		{"a member nobody knows", "db-9", []survivor{answered("db-1", 100, false)}, false, "member db-9 does not answer"},
		{"a less advanced member", "db-3", []survivor{answered("db-1", 100, false), answered("db-3", 90, false)}, false, "member db-1 has applied more than db-3 (raft index 100 > 90)"},
		{"a learner", "db-1", []survivor{answered("db-1", 100, true)}, false, "is a learner"},
		{"tmpfs", "db-1", []survivor{answered("db-1", 100, false)}, true, "a tmpfs cluster cannot be recovered from a member"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan := planRecovery(tc.requested, tc.survivors, members, tc.tmpfs)
			if tc.refusal == "" {
				if plan.refusal != "" {
					t.Fatalf("refused: %s", plan.refusal)
				}
				want := "recovering from member " + tc.requested + " at revision 42 (raft term 3, applied index 100)"
				if !strings.Contains(plan.loss, want) || !strings.Contains(plan.loss, "are lost") {
					t.Errorf("loss %q does not say %q", plan.loss, want)
				}
				if got := strings.Join(plan.discard, ","); strings.Contains(got, tc.requested) || len(plan.discard) != 2 {
					t.Errorf("discard %q", got)
				}
				return
			}
			if !strings.Contains(plan.refusal, tc.refusal) {
				t.Fatalf("refusal %q, want %q", plan.refusal, tc.refusal)
			}
		})
	}
}

// requestRecoveryFrom sets the recover-from annotation as a person would.
func (h *harness) requestRecoveryFrom(source string) {
	h.t.Helper()
	c := h.clusterObj()
	patch := client.MergeFrom(c.DeepCopy())
	c.Annotations = map[string]string{etcdv1.AnnotationRecoverFrom: source}
	if err := h.api.Patch(context.Background(), c, patch); err != nil {
		h.t.Fatal(err)
	}
}

// startPodOf creates a member's Pod as the member controller would, Ready.
func (h *harness) startPodOf(name string) *corev1.Pod {
	h.t.Helper()
	m := h.member(name)
	pod := specs.Pod(h.clusterObj(), m, h.r.PodOptions)
	if m.Annotations[etcdv1.AnnotationForceNewCluster] == "true" {
		specs.ForceNewCluster(pod)
	}
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	if err := h.api.Create(context.Background(), pod); err != nil {
		h.t.Fatal(err)
	}
	return pod
}

// survivorPodGone: db-1's Pod, the survivor's in these tests, is deleted.
func (h *harness) survivorPodGone() bool {
	err := h.api.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "db-1"}, &corev1.Pod{})
	return apierrors.IsNotFound(err)
}

// A recovery from the survivor of 3: nothing happens without the annotation; with it, what
// is lost is stated first, then the other members are removed, the survivor restarts with
// --force-new-cluster, and once etcd answers the request and the flag are gone before any
// member is added.
func TestRecoveryFromTheSurvivor(t *testing.T) {
	h := runningHarness(t)
	h.startPodOf("db-1")
	survivorID := h.etcdID("db-1")
	h.etcd.SetDown(h.etcdID("db-2"), true)
	h.etcd.SetDown(h.etcdID("db-3"), true)
	h.reconcile()
	h.reconcile()
	if len(h.members()) != 3 || h.survivorPodGone() {
		t.Fatal("the operator acted on a lost quorum without being asked")
	}

	// The quorum was lost long ago: Progressing is past its deadline throughout.
	h.r.Now = func() time.Time { return time.Now().Add(time.Hour) }
	h.requestRecoveryFrom("db-1")
	h.reconcile()
	pr := h.condition(etcdv1.ConditionProgressing)
	if pr.Reason != etcdv1.ReasonProgressDeadlineExceeded || !strings.Contains(pr.Message, "recovering from member db-1") || !strings.Contains(pr.Message, "the data of [db-2, db-3] is discarded") {
		t.Fatalf("Progressing before any act: %+v", pr)
	}
	if len(h.members()) != 3 {
		t.Fatal("a member was removed before the loss was recorded in status")
	}

	h.checkRecoveryActs()
	pod := h.startPodOf("db-1")
	if !specs.ForcesNewCluster(pod) {
		t.Fatal("the survivor's new Pod does not force a new cluster")
	}
	h.etcd.ForceNewCluster(survivorID)

	h.checkRecoveryFinished()
	h.startPodOf("db-1")
	h.reconcile() // scaling adds a new member
	if got := len(h.members()); got != 2 {
		t.Fatalf("%d members after the recovery, want a new one added", got)
	}
}

// A recovery from a member that is not the most advanced is refused and reported; nothing
// is removed.
func TestRecoveryFromAMemberThatDoesNotAnswerIsRefused(t *testing.T) {
	h := runningHarness(t)
	h.etcd.SetDown(h.etcdID("db-2"), true)
	h.etcd.SetDown(h.etcdID("db-3"), true)
	h.requestRecoveryFrom("db-2")
	h.reconcile()
	h.reconcile()
	pr := h.condition(etcdv1.ConditionProgressing)
	if pr.Reason != etcdv1.ReasonRecoveryRefused || !strings.Contains(pr.Message, "member db-2 does not answer; members that answer: [db-1]") {
		t.Fatalf("Progressing %+v", pr)
	}
	if len(h.members()) != 3 {
		t.Fatal("a refused recovery removed members")
	}
}

// checkRecoveryActs reconciles through the acts: db-2 and db-3 removed, db-1 marked and its
// Pod restarted, Progressing on QuorumRecovery throughout.
func (h *harness) checkRecoveryActs() {
	t := h.t
	t.Helper()
	for range 4 { // db-2 removed, db-3 removed, db-1 marked, db-1's Pod restarted
		h.reconcile()
	}
	if got := len(h.members()); got != 1 || h.members()[0].Annotations[etcdv1.AnnotationForceNewCluster] != "true" || !h.survivorPodGone() {
		t.Fatalf("after the acts: %d members, %+v, Pod gone %v", got, h.members()[0].Annotations, h.survivorPodGone())
	}
	if pr := h.condition(etcdv1.ConditionProgressing); !strings.Contains(pr.Message, "recovering from member db-1") {
		t.Fatalf("Progressing during the acts: %+v", pr)
	}
}

// checkRecoveryFinished reconciles a recovered cluster: the request, the mark and the forced
// Pod go, and no member is added before.
func (h *harness) checkRecoveryFinished() {
	t := h.t
	t.Helper()
	h.reconcile() // the request goes
	if _, ok := h.clusterObj().Annotations[etcdv1.AnnotationRecoverFrom]; ok {
		t.Fatal("the recovery request is still there")
	}
	h.reconcile() // the mark goes
	h.reconcile() // the Pod with the flag goes
	if !h.survivorPodGone() || h.members()[0].Annotations[etcdv1.AnnotationForceNewCluster] != "" {
		t.Fatal("the forced Pod or the mark outlived the recovery")
	}
	if got := len(h.members()); got != 1 {
		t.Fatalf("%d members before the forced Pod was replaced", got)
	}
}

// The other members' Pods are stopped before the survivor is marked: were they to come back
// while it forces a new cluster, they could form the old cluster's quorum beside it.
// The other members' Pods stay Terminating while their kubelets have not confirmed that
// etcd stopped (a node cut off from the API server keeps serving): the survivor is not
// marked, and Progressing says what is waited for and how to fence the node. The survivor is
// marked only once one Pod is reported Failed (its containers stopped) and the other is gone.
func TestRecoveryStopsTheOthersBeforeForcing(t *testing.T) {
	h := runningHarness(t)
	h.startPodsUnconfirmed("db-1", "db-2", "db-3")
	h.etcd.SetDown(h.etcdID("db-2"), true)
	h.etcd.SetDown(h.etcdID("db-3"), true)
	h.requestRecoveryFrom("db-1")
	for range 10 {
		h.reconcile()
	}
	if h.survivorForceMarked() {
		t.Fatal("the survivor was marked while the others' Pods, deleted, were not confirmed stopped")
	}
	if pr := h.condition(etcdv1.ConditionProgressing); !strings.Contains(pr.Message, "waiting for member db-2 to stop") || !strings.Contains(pr.Message, "out-of-service") {
		t.Fatalf("Progressing %q does not say what the recovery waits for", pr.Message)
	}
	h.kubeletConfirms("db-2", func(pod *corev1.Pod) { pod.Status.Phase = corev1.PodFailed })
	h.reconcile()
	if h.survivorForceMarked() {
		t.Fatal("the survivor was marked while db-3's Pod was not confirmed stopped")
	}
	h.kubeletConfirms("db-3", func(pod *corev1.Pod) { pod.Finalizers = nil })
	for i := 0; i < 10 && !h.survivorForceMarked(); i++ {
		h.reconcile()
		if !h.survivorForceMarked() && !h.podExists("db-1") {
			t.Fatal("the survivor's Pod was deleted before it was marked")
		}
	}
	if !h.survivorForceMarked() {
		t.Fatal("the survivor was never marked to force a new cluster")
	}
	if h.podExists("db-3") {
		t.Fatal("the survivor was marked while db-3's Pod exists")
	}
	if !h.podExists("db-1") {
		t.Fatal("the survivor's Pod was deleted before it was marked")
	}
	h.reconcile()
	if !h.survivorPodGone() {
		t.Fatal("the survivor's Pod was not restarted after the others stopped")
	}
}

// startPodsUnconfirmed starts the members' Pods, Ready; all but the first are on a node cut
// off from the API server: not Ready (the node lifecycle controller marks them so) and held
// by a finalizer, as by a kubelet that has not confirmed their containers stopped: deleted,
// they stay Terminating.
func (h *harness) startPodsUnconfirmed(names ...string) {
	h.t.Helper()
	for i, name := range names {
		h.startPodOf(name)
		if i == 0 {
			continue
		}
		h.setPodNotReady(name)
		pod := h.pod(name)
		pod.Finalizers = []string{"test/kubelet-has-not-confirmed"}
		if err := h.api.Update(context.Background(), pod); err != nil {
			h.t.Fatal(err)
		}
	}
}

// getNamed reads the object of kind T and that name in the harness's namespace from the API.
func getNamed[T any, P interface {
	*T
	client.Object
}](h *harness, name string) P {
	h.t.Helper()
	obj := P(new(T))
	if err := h.api.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: name}, obj); err != nil {
		h.t.Fatal(err)
	}
	return obj
}

// pod is the member's Pod, read from the API.
func (h *harness) pod(name string) *corev1.Pod { return getNamed[corev1.Pod](h, name) }

// setPodNotReady has the member's Pod reported not Ready, as its kubelet does when etcd's
// /readyz fails (or the node lifecycle controller, for a node that stopped reporting).
func (h *harness) setPodNotReady(name string) {
	h.t.Helper()
	pod := h.pod(name)
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
	if err := h.api.Status().Update(context.Background(), pod); err != nil {
		h.t.Fatal(err)
	}
}

// A person's recovery request while the members the operator cannot reach have Ready Pods
// (the operator cut off from a quorum that serves) is refused and changes nothing: the
// recovery would delete their Pods, their kubelets would stop them, and what they
// acknowledged would be discarded. Once their Pods are not Ready (down after all), it goes on.
func TestRecoveryRefusedWhileTheMembersOutOfReachServe(t *testing.T) {
	h := runningHarness(t)
	for _, name := range []string{"db-1", "db-2", "db-3"} {
		h.startPodOf(name)
	}
	h.setPodNotReady("db-1") // no quorum on its side
	h.etcd.SetDown(h.etcdID("db-2"), true)
	h.etcd.SetDown(h.etcdID("db-3"), true)
	h.requestRecoveryFrom("db-1")
	for range 3 {
		h.reconcile()
	}
	pr := h.condition(etcdv1.ConditionProgressing)
	if pr.Reason != etcdv1.ReasonRecoveryRefused || !strings.Contains(pr.Message, "members [db-2, db-3] do not answer the operator, but their Pods are Ready") {
		t.Fatalf("Progressing %+v", pr)
	}
	if len(h.members()) != 3 || !h.podExists("db-2") || !h.podExists("db-3") {
		t.Fatal("a refused recovery removed members or stopped their Pods")
	}
	h.setPodNotReady("db-2")
	h.setPodNotReady("db-3")
	h.reconcile()
	if pr := h.condition(etcdv1.ConditionProgressing); pr.Reason != etcdv1.ReasonQuorumRecovery {
		t.Fatalf("the recovery did not go on once the others' Pods were not Ready: %+v", pr)
	}
}

// podExists: the member's Pod object is there.
func (h *harness) podExists(name string) bool {
	err := h.api.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: name}, &corev1.Pod{})
	return !apierrors.IsNotFound(err)
}

// survivorForceMarked: db-1, the survivor in these tests, is marked to start with
// --force-new-cluster.
func (h *harness) survivorForceMarked() bool {
	return h.member("db-1").Annotations[etcdv1.AnnotationForceNewCluster] == "true"
}

// kubeletConfirms changes a member's Pod as its kubelet does once etcd stopped in it: a
// terminal phase in status, or the object deleted (the test's finalizer let go).
func (h *harness) kubeletConfirms(name string, change func(*corev1.Pod)) {
	h.t.Helper()
	pod := h.pod(name)
	change(pod)
	var err error
	if pod.Status.Phase != "" {
		err = h.api.Status().Update(context.Background(), pod)
	} else {
		err = h.api.Update(context.Background(), pod)
	}
	if err != nil {
		h.t.Fatal(err)
	}
}

// holdMembers puts the member controller's finalizer on every member, as it does: a member
// deleted stays, going, until the finalizer lets go.
func (h *harness) holdMembers() {
	h.t.Helper()
	for _, m := range h.members() {
		m.Finalizers = []string{etcdv1.FinalizerMember}
		if err := h.api.Update(context.Background(), m); err != nil {
			h.t.Fatal(err)
		}
	}
}

// member is the EtcdMember of that name, read from the API.
func (h *harness) member(name string) *etcdv1.EtcdMember {
	return getNamed[etcdv1.EtcdMember](h, name)
}

// A request changed in the middle of a recovery to a member that recovery removes is
// refused: the member that was to force a new cluster is not removed, no second member is
// marked.
func TestRecoveryRequestChangedMidwayIsRefused(t *testing.T) {
	h := runningHarness(t)
	h.holdMembers() // removed members stay, going, as the finalizer holds them
	h.startPodOf("db-1")
	h.etcd.SetDown(h.etcdID("db-2"), true)
	h.etcd.SetDown(h.etcdID("db-3"), true)
	h.requestRecoveryFrom("db-1")
	for range 4 { // stated, db-2 removed, db-3 removed, db-1 marked
		h.reconcile()
	}
	if h.member("db-1").Annotations[etcdv1.AnnotationForceNewCluster] != "true" || h.member("db-2").DeletionTimestamp.IsZero() {
		t.Fatal("the recovery from db-1 did not get as far as marking it")
	}
	// db-1's forced start fails; db-2 answers again, alone; the request is changed to db-2.
	h.etcd.SetDown(h.etcdID("db-1"), true)
	h.etcd.SetDown(h.etcdID("db-2"), false)
	h.requestRecoveryFrom("db-2")
	h.reconcile()
	h.reconcile()
	if !h.member("db-1").DeletionTimestamp.IsZero() || h.member("db-2").Annotations[etcdv1.AnnotationForceNewCluster] == "true" {
		t.Fatal("a changed request removed the member being forced or marked a second one")
	}
	if pr := h.condition(etcdv1.ConditionProgressing); pr.Reason != etcdv1.ReasonRecoveryRefused || !strings.Contains(pr.Message, "member db-2 is being removed") {
		t.Fatalf("Progressing %+v", pr)
	}
}

// While the marked survivor restarts with --force-new-cluster it does not answer: the
// recovery is past its last check and goes on waiting, with the statement of what is lost in
// status, instead of refusing and telling the person to name a member that is gone.
func TestRecoveryWaitsForTheForcedSurvivorWithoutRefusing(t *testing.T) {
	h := runningHarness(t)
	h.startPodOf("db-1")
	h.etcd.SetDown(h.etcdID("db-2"), true)
	h.etcd.SetDown(h.etcdID("db-3"), true)
	h.requestRecoveryFrom("db-1")
	h.reconcile() // the loss stated
	h.checkRecoveryActs()
	h.etcd.SetDown(h.etcdID("db-1"), true) // its forced Pod is starting
	h.reconcile()
	h.reconcile()
	pr := h.condition(etcdv1.ConditionProgressing)
	if pr.Reason != etcdv1.ReasonQuorumRecovery || !strings.Contains(pr.Message, "waiting for member db-1 to start as a one-member cluster") ||
		!strings.Contains(pr.Message, "recovering from member db-1 at revision") || !strings.Contains(pr.Message, "the data of [db-2, db-3] is discarded") {
		t.Fatalf("Progressing while the forced survivor starts: %+v", pr)
	}
}
