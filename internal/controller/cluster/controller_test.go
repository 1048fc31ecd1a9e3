package cluster

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/agent"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
	"github.com/quorumkeeper/etcd-operator/internal/etcdfake"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// harness is a cluster reconciler over a fake API and a fake etcd.
type harness struct {
	t       *testing.T
	api     client.Client
	etcd    *etcdfake.Cluster
	r       *Reconciler
	cluster *etcdv1.EtcdCluster
	// verifier, when set, plays the Job controller and the verify agent: every verify Job
	// still running finishes, before each reconcile, with the result it returns.
	verifier func(*batchv1.Job) agent.Result
}

func newHarness(t *testing.T) *harness {
	replicas := int32(3)
	t.Helper()
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = etcdv1.AddToScheme(scheme)
	size := resource.MustParse("1Gi")
	c := &etcdv1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns", UID: "0123456789abcdef"},
		Spec:       etcdv1.EtcdClusterSpec{Replicas: &replicas, Version: "3.6.16", Storage: etcdv1.StorageSpec{Size: &size}},
	}
	api := fake.NewClientBuilder().WithScheme(scheme).WithObjects(c).
		WithStatusSubresource(&etcdv1.EtcdCluster{}, &etcdv1.EtcdMember{}).Build()
	h := &harness{t: t, api: api, etcd: etcdfake.New(), cluster: c}
	h.r = &Reconciler{Client: api, NewClient: func(context.Context, *etcdv1.EtcdCluster, []string) (etcd.Client, error) {
		return etcdfake.KeepOpen(h.etcd), nil
	}}
	return h
}

func ptrTo[T any](v T) *T { return &v }

func (h *harness) reconcile() {
	h.t.Helper()
	h.realizeMembers()
	h.finishVerifyJobs()
	if _, err := h.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "db"}}); err != nil {
		h.t.Fatalf("reconcile: %v", err)
	}
}

// realizeMembers does what the member controller does before a member joins: a PVC (or, for
// tmpfs, a Pod) for every member etcd does not know yet. A member that has joined gets
// nothing new, as the member controller refuses to start a known ID on empty data.
func (h *harness) realizeMembers() {
	h.t.Helper()
	list := &etcdv1.EtcdMemberList{}
	if err := h.api.List(context.Background(), list); err != nil {
		h.t.Fatal(err)
	}
	c := &etcdv1.EtcdCluster{}
	if err := h.api.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "db"}, c); apierrors.IsNotFound(err) {
		return // deleted: the member controller creates nothing for a cluster that is gone
	} else if err != nil {
		h.t.Fatal(err)
	}
	for i := range list.Items {
		m := &list.Items[i]
		if m.Status.MemberID != "" || !m.DeletionTimestamp.IsZero() {
			continue
		}
		var obj client.Object = &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, Labels: specs.MemberLabels(m.Spec.ClusterName, m.Name)},
		}
		if m.Spec.Storage.Medium == etcdv1.StorageMediumMemory {
			pod := specs.Pod(c, m, h.r.PodOptions)
			pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
			obj = pod
		}
		if err := h.api.Create(context.Background(), obj); err != nil && !apierrors.IsAlreadyExists(err) {
			h.t.Fatal(err)
		}
	}
}

func (h *harness) members() []*etcdv1.EtcdMember {
	h.t.Helper()
	c := &etcdv1.EtcdCluster{}
	if err := h.api.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "db"}, c); err != nil {
		h.t.Fatal(err)
	}
	list, err := h.r.listMembers(context.Background(), c)
	if err != nil {
		h.t.Fatal(err)
	}
	return list
}

// editSpec changes the cluster's spec as a person would, with one update.
func (h *harness) editSpec(edit func(*etcdv1.EtcdClusterSpec)) {
	h.t.Helper()
	c := h.clusterObj()
	edit(&c.Spec)
	if err := h.api.Update(context.Background(), c); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) setReplicas(n int32) {
	h.t.Helper()
	h.editSpec(func(s *etcdv1.EtcdClusterSpec) { s.Replicas = &n })
}

func (h *harness) clusterObj() *etcdv1.EtcdCluster {
	c := &etcdv1.EtcdCluster{}
	if err := h.api.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "db"}, c); err != nil {
		h.t.Fatal(err)
	}
	return c
}

// running seeds etcd with the founding members as if their Pods had started, and records
// their IDs through a reconcile.
func (h *harness) running() {
	h.t.Helper()
	c := h.clusterObj()
	for _, m := range h.members() {
		h.etcd.SeedMember(m.Name, specs.PeerURL(c, m.Name), specs.ClientURL(c, m.Name))
	}
	h.reconcile()
	h.etcd.ResetCalls()
}

// runningHarness is a bootstrapped cluster of 3 whose members run in the fake etcd.
func runningHarness(t *testing.T) *harness {
	t.Helper()
	h := newHarness(t)
	h.reconcile()
	h.running()
	return h
}

func names(members []*etcdv1.EtcdMember) []string {
	out := make([]string, 0, len(members))
	for _, m := range members {
		out = append(out, m.Name)
	}
	return out
}

func TestBootstrapCreatesAllFoundingMembersWithOneInitialCluster(t *testing.T) {
	h := newHarness(t)
	h.reconcile()
	members := h.members()
	if got := names(members); !slices.Equal(got, []string{"db-1", "db-2", "db-3"}) {
		t.Fatalf("members %v", got)
	}
	for _, m := range members {
		if m.Spec.Bootstrap.InitialClusterState != etcdv1.InitialClusterStateNew ||
			m.Spec.Bootstrap.InitialCluster != members[0].Spec.Bootstrap.InitialCluster {
			t.Fatalf("%s bootstrap %+v", m.Name, m.Spec.Bootstrap)
		}
	}
	h.reconcile() // etcd not formed yet: nothing more to do
	if len(h.members()) != 3 {
		t.Fatalf("a second reconcile changed the founding set: %v", names(h.members()))
	}
}

func TestBootstrapInterruptedIsFinishedWithTheSameNames(t *testing.T) {
	h := newHarness(t)
	h.reconcile()
	// The operator died after creating only db-1: the others go, and the spec changes.
	for _, m := range h.members()[1:] {
		if err := h.api.Delete(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	h.setReplicas(5)
	h.reconcile()
	if got := names(h.members()); !slices.Equal(got, []string{"db-1", "db-2", "db-3"}) {
		t.Fatalf("finished bootstrap with %v, want the recorded founding set", got)
	}
}

func TestScaleOutAddsOneLearnerOnceThenPromotes(t *testing.T) {
	h := runningHarness(t)
	h.setReplicas(4)
	h.reconcile() // creates db-4
	h.reconcile() // adds it as a learner
	h.reconcile() // the learner has not started: nothing to do
	adds := h.etcd.CallsTo("AddLearner")
	if len(adds) != 1 || !strings.Contains(adds[0], "db-4.db.ns.svc:2380") {
		t.Fatalf("AddLearner calls %v, want exactly one for db-4", adds)
	}
	m4 := h.members()[3]
	id, err := etcd.ParseID(m4.Status.MemberID)
	if err != nil || m4.Status.Role != etcdv1.RoleLearner {
		t.Fatalf("db-4 status %+v", m4.Status)
	}
	h.etcd.StartMember(id, "db-4", specs.ClientURL(h.clusterObj(), "db-4"))
	h.etcd.SetCaughtUp(id, false)
	h.reconcile()
	if len(h.etcd.CallsTo("Promote")) != 1 {
		t.Fatalf("promote not tried: %v", h.etcd.Calls())
	}
	h.etcd.SetCaughtUp(id, true)
	h.reconcile()
	for _, m := range h.etcd.Members() {
		if m.IsLearner {
			t.Fatalf("%s still a learner", m.Name)
		}
	}
	h.reconcile()
	if n := len(h.members()); n != 4 {
		t.Fatalf("%d members after scaling to 4", n)
	}
}

// Just after a promotion etcd refuses the next learner for up to 5 s (its strict
// reconfiguration check): the add is tried again addRefusedPoll later, and then made once.
func TestAnAddEtcdRefusesAsUnhealthyIsRetriedSoon(t *testing.T) {
	h := runningHarness(t)
	h.setReplicas(4)
	h.reconcile()      // creates db-4
	const refusals = 3 // a failure's backoff would have doubled by the last
	for i := range refusals {
		h.etcd.FailNext("AddLearner", etcd.ErrUnhealthyCluster)
		if d := h.reconcileAfter(); d != addRefusedPoll {
			t.Fatalf("refused add %d is looked at again after %v, want %v", i+1, d, addRefusedPoll)
		}
	}
	h.reconcile()
	if adds := h.etcd.CallsTo("AddLearner"); len(adds) != refusals+1 {
		t.Fatalf("AddLearner calls %v, want %d refused and one that added db-4", adds, refusals)
	}
	if m4 := h.members()[3]; m4.Status.Role != etcdv1.RoleLearner || m4.Status.MemberID == "" {
		t.Fatalf("db-4 status %+v after the retry, want a learner with an ID", m4.Status)
	}
}

func TestAddInterruptedBeforeRecordingIsNotRepeated(t *testing.T) {
	h := runningHarness(t)
	h.setReplicas(4)
	h.reconcile() // creates db-4
	// The learner was added, but the operator died before writing db-4's status.
	if _, _, err := h.etcd.AddLearner(context.Background(), []string{specs.PeerURL(h.clusterObj(), "db-4")}); err != nil {
		t.Fatal(err)
	}
	h.etcd.ResetCalls()
	h.reconcile()
	if adds := h.etcd.CallsTo("AddLearner"); len(adds) != 0 {
		t.Fatalf("added again: %v", adds)
	}
	if m4 := h.members()[3]; m4.Status.MemberID == "" {
		t.Fatal("db-4's member ID was not recorded from etcd's member list")
	}
}

func TestOrphanLearnerIsRemoved(t *testing.T) {
	h := runningHarness(t)
	orphan, _, err := h.etcd.AddLearner(context.Background(), []string{"http://gone.db.ns.svc:2380"})
	if err != nil {
		t.Fatal(err)
	}
	h.reconcile()
	if removes := h.etcd.CallsTo("Remove"); len(removes) != 1 || !strings.Contains(removes[0], orphan.IDHex()) {
		t.Fatalf("Remove calls %v, want the orphan %s", removes, orphan.IDHex())
	}
}

func TestScaleInRemovesANewestFollowerNotTheLeader(t *testing.T) {
	h := runningHarness(t)
	for _, m := range h.etcd.Members() {
		if m.Name == "db-3" {
			h.etcd.SetLeader(m.ID)
		}
	}
	h.setReplicas(2)
	h.reconcile()
	members := h.members()
	if got := names(members); !slices.Equal(got, []string{"db-1", "db-3"}) {
		t.Fatalf("members after scale-in %v, want db-2 (newest follower) gone and leader db-3 kept", got)
	}
	if len(h.etcd.CallsTo("Remove")) != 0 {
		t.Fatal("the cluster controller must leave the etcd removal to the member's finalizer")
	}
}

// TestScaleInRefusedWhenQuorumWouldNotHold: raft has its quorum (every member is up and
// etcd answers), but quorum reads fail through db-1 and db-2. Removing db-2 (the unhealthy
// one a scale-in takes first) would leave db-1 unhealthy and db-3: 1 healthy of 2, below the
// quorum of 2. Only the projection refuses this; nothing else blocks a scale-in.
// scaleInWithoutQuorum asks a running cluster whose first two members are unhealthy for
// two replicas: removing one would leave no healthy quorum. It returns etcd's member list.
func scaleInWithoutQuorum(t *testing.T) (*harness, []etcd.Member) {
	h := runningHarness(t)
	list := h.etcd.Members()
	h.etcd.SetUnhealthy(list[0].ID, true)
	h.etcd.SetUnhealthy(list[1].ID, true)
	h.setReplicas(2)
	return h, list
}

func TestScaleInRefusedWhenQuorumWouldNotHold(t *testing.T) {
	h, list := scaleInWithoutQuorum(t)
	h.reconcile()
	if n := len(h.members()); n != 3 {
		t.Fatalf("a member was removed although the quorum would not hold: %v", names(h.members()))
	}
	cond := h.condition(etcdv1.ConditionProgressing)
	if !strings.Contains(cond.Message, "not removing db-2") || !strings.Contains(cond.Message, "1 healthy of 2 voters") {
		t.Fatalf("Progressing %+v, want the projection's refusal", cond)
	}
	h.etcd.SetUnhealthy(list[0].ID, false) // now removing db-2 leaves 2 healthy of 2
	h.reconcile()
	if got := names(h.members()); !slices.Equal(got, []string{"db-1", "db-3"}) {
		t.Fatalf("members %v, want the unhealthy db-2 removed once the quorum holds without it", got)
	}
}

func TestPauseMarksEveryMemberDormantWithoutTouchingEtcd(t *testing.T) {
	h := runningHarness(t)
	h.setReplicas(0)
	h.reconcile()
	for _, m := range h.members() {
		if !m.Spec.Dormant {
			t.Fatalf("%s not dormant", m.Name)
		}
	}
	for _, call := range h.etcd.Calls() {
		if strings.HasPrefix(call, "Remove") || strings.HasPrefix(call, "AddLearner") {
			t.Fatalf("pausing changed membership: %s", call)
		}
	}
	h.setReplicas(3)
	h.reconcile()
	for _, m := range h.members() {
		if m.Spec.Dormant {
			t.Fatalf("%s still dormant after resume", m.Name)
		}
	}
}

func TestStatusAtRestCausesNoWrites(t *testing.T) {
	h := runningHarness(t)
	h.reconcile()
	before := h.clusterObj().ResourceVersion
	h.reconcile()
	h.reconcile()
	if after := h.clusterObj().ResourceVersion; after != before {
		t.Fatalf("a cluster at rest was written: resourceVersion %s -> %s", before, after)
	}
	c := h.clusterObj()
	if c.Status.Voters != 3 || c.Status.ClusterID == "" {
		t.Fatalf("status %+v", c.Status)
	}
}

// markForRemoval is what a scale-in does before it deletes: the operator dies in between.
func (h *harness) markForRemoval(name string) {
	h.t.Helper()
	for _, m := range h.members() {
		if m.Name != name {
			continue
		}
		m.Annotations = map[string]string{etcdv1.AnnotationRemove: "true"}
		if err := h.api.Update(context.Background(), m); err != nil {
			h.t.Fatal(err)
		}
	}
}

func TestScaleInInterruptedAfterMarkingRemovesTheMarkedMember(t *testing.T) {
	h := runningHarness(t)
	h.markForRemoval("db-1") // not the member a fresh choice would take (db-3)
	h.setReplicas(2)
	h.reconcile()
	if got := names(h.members()); !slices.Equal(got, []string{"db-2", "db-3"}) {
		t.Fatalf("members %v, want the marked db-1 removed", got)
	}
}

func TestRemovalMarkIsDroppedWhenTheClusterNeedsTheMember(t *testing.T) {
	h := runningHarness(t)
	h.markForRemoval("db-2") // the operator died; meanwhile replicas went back to 3
	h.reconcile()
	for _, m := range h.members() {
		if m.Annotations[etcdv1.AnnotationRemove] != "" {
			t.Fatalf("%s keeps its removal mark: deleting it by hand would delete its data", m.Name)
		}
	}
	if n := len(h.members()); n != 3 {
		t.Fatalf("%d members, want 3", n)
	}
}

// staleMembers is a cache that has not seen some EtcdMembers yet: its List leaves them out.
type staleMembers struct {
	client.Client
	hidden []string
}

func (s staleMembers) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := s.Client.List(ctx, list, opts...); err != nil {
		return err
	}
	if members, ok := list.(*etcdv1.EtcdMemberList); ok {
		members.Items = slices.DeleteFunc(members.Items, func(m etcdv1.EtcdMember) bool { return slices.Contains(s.hidden, m.Name) })
	}
	return nil
}

// A reconcile right after the one that created db-4 sees a cache without it: it must not
// create another member (seen after a recovery from a snapshot: two pending members, of
// which etcd took one as a learner, and the other's add failed on every reconcile).
func TestScaleOutWaitsForACacheThatMissesTheMemberItCreated(t *testing.T) {
	h := runningHarness(t)
	h.setReplicas(5)
	h.reconcile() // creates db-4
	h.r.APIReader = h.api
	h.r.Client = staleMembers{Client: h.api, hidden: []string{"db-4"}}
	h.reconcile()
	live, err := listMembersFrom(context.Background(), h.api, h.clusterObj())
	if err != nil {
		t.Fatal(err)
	}
	if got := names(live); !slices.Equal(got, []string{"db-1", "db-2", "db-3", "db-4"}) {
		t.Fatalf("members %v after a reconcile with a stale cache, want db-4 alone added", got)
	}
	if cond := h.condition(etcdv1.ConditionProgressing); !strings.Contains(cond.Message, "db-4 exists but is not in this reconcile's view") {
		t.Fatalf("Progressing %+v, want the wait for the cache", cond)
	}
}

// Two members waiting to join (however that came about): etcd takes one learner at a time,
// so the second waits while the first is promoted, and joins after it.
func TestASecondPendingMemberWaitsForTheLearnerToBePromoted(t *testing.T) {
	h := runningHarness(t)
	h.setReplicas(5)
	h.reconcile() // creates db-4
	h.reconcile() // adds it as a learner
	c := h.clusterObj()
	m5 := h.r.newMember(c, "db-5", etcdv1.MemberBootstrap{
		InitialCluster: specs.InitialCluster(c, []string{"db-1", "db-5"}), InitialClusterState: etcdv1.InitialClusterStateExisting,
	})
	if err := h.r.createMember(context.Background(), c, m5); err != nil {
		t.Fatal(err)
	}
	m4 := h.members()[3]
	id, err := etcd.ParseID(m4.Status.MemberID)
	if err != nil {
		t.Fatal(err)
	}
	h.etcd.StartMember(id, "db-4", specs.ClientURL(c, "db-4"))
	h.etcd.SetCaughtUp(id, true)
	h.etcd.ResetCalls()
	h.reconcile()
	if promotes := h.etcd.CallsTo("Promote"); len(promotes) != 1 || len(h.etcd.CallsTo("AddLearner")) != 0 {
		t.Fatalf("calls %v, want db-4 promoted and no add while it is a learner", h.etcd.Calls())
	}
	h.reconcile()
	if adds := h.etcd.CallsTo("AddLearner"); len(adds) != 1 || !strings.Contains(adds[0], "db-5") {
		t.Fatalf("AddLearner calls %v, want db-5 added once db-4 is a voter", adds)
	}
}

// reconcileAfter reconciles once and says when the controller asked to look again.
func (h *harness) reconcileAfter() time.Duration {
	h.t.Helper()
	h.realizeMembers()
	res, err := h.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "db"}})
	if err != nil {
		h.t.Fatalf("reconcile: %v", err)
	}
	return res.RequeueAfter
}

// markMembersReady does what the member controller does once their Pods are Ready.
func (h *harness) markMembersReady() {
	h.t.Helper()
	for _, m := range h.members() {
		meta.SetStatusCondition(&m.Status.Conditions, metav1.Condition{Type: etcdv1.MemberConditionReady, Status: metav1.ConditionTrue, Reason: etcdv1.ReasonPodReady, Message: "the Pod is ready"})
		if err := h.api.Status().Update(context.Background(), m); err != nil {
			h.t.Fatal(err)
		}
	}
}

// A member whose Pod is Ready but whose etcd did not answer the health check yet is looked
// at again within a second or two, not at the minute's resync: when it answers, nothing the
// operator watches changes (a 5-member bootstrap's status stayed a minute short of one
// ready member so).
func TestAMemberNotReadyYetIsLookedAtAgainSoon(t *testing.T) {
	h := runningHarness(t)
	h.startPods()
	h.markMembersReady()
	slow := h.members()[2]
	id, err := etcd.ParseID(slow.Status.MemberID)
	if err != nil {
		t.Fatal(err)
	}
	h.etcd.SetUnhealthy(id, true)
	var waits []time.Duration
	for range 3 {
		waits = append(waits, h.reconcileAfter())
	}
	if !slices.Equal(waits, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}) {
		t.Fatalf("looks again after %v while %s does not answer; want 1s, 2s, 4s (backing off)", waits, slow.Name)
	}
	if ready := h.clusterObj().Status.ReadyMembers; ready != 2 {
		t.Fatalf("status counts %d ready members, want 2", ready)
	}
	h.etcd.SetUnhealthy(id, false)
	if after := h.reconcileAfter(); after != resyncPeriod {
		t.Fatalf("every member ready: looks again after %v, want the resync period %v", after, resyncPeriod)
	}
	if ready := h.clusterObj().Status.ReadyMembers; ready != 3 {
		t.Fatalf("status counts %d ready members, want 3", ready)
	}
	if after := h.reconcileAfter(); after != resyncPeriod {
		t.Fatalf("at rest: looks again after %v, want %v", after, resyncPeriod)
	}
}

// A learner etcd lists but that has not started is looked for every catchUpPoll once its Pod
// runs (its start changes no watched object), and at the pace of work in motion before.
func TestALearnerNotStartedIsLookedForSoonOnceItsPodRuns(t *testing.T) {
	h := runningHarness(t)
	h.setReplicas(4)
	h.reconcile() // creates db-4
	h.reconcile() // adds it as a learner
	h.setPod("db-4", corev1.PodPending, false)
	if d := h.reconcileAfter(); d != retryBase {
		t.Fatalf("a learner whose Pod is pending is looked at again after %v, want %v", d, retryBase)
	}
	h.setPod("db-4", corev1.PodRunning, false)
	if d := h.reconcileAfter(); d != catchUpPoll {
		t.Fatalf("a learner whose Pod runs is looked at again after %v, want %v", d, catchUpPoll)
	}
}
