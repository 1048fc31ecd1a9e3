package member

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller/children/retention"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
	"github.com/quorumkeeper/etcd-operator/internal/etcdfake"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// memberHarness is a member reconciler over a fake API and a fake etcd of three started
// voters db-1..db-3, with their EtcdMembers (finalizer set, IDs recorded) and PVCs.
type memberHarness struct {
	t       *testing.T
	api     client.Client
	etcd    *etcdfake.Cluster
	r       *Reconciler
	cluster *etcdv1.EtcdCluster
	ids     map[string]uint64
}

func newMemberHarness(t *testing.T, medium etcdv1.StorageMedium) *memberHarness {
	t.Helper()
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = etcdv1.AddToScheme(scheme)
	size := resource.MustParse("1Gi")
	replicas := int32(3)
	c := &etcdv1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns", UID: "cluster-uid"},
		Spec:       etcdv1.EtcdClusterSpec{Replicas: &replicas, Version: "3.6.16", Storage: etcdv1.StorageSpec{Size: &size, Medium: medium}},
	}
	h := &memberHarness{t: t, etcd: etcdfake.New(), cluster: c, ids: map[string]uint64{}}
	objs := []client.Object{c}
	for i := 1; i <= 3; i++ {
		name := specs.MemberName("db", i)
		em := h.etcd.SeedMember(name, specs.PeerURL(c, name), specs.ClientURL(c, name))
		h.ids[name] = em.ID
		m := &etcdv1.EtcdMember{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name + "-uid"), Labels: specs.MemberLabels("db", name), Finalizers: []string{etcdv1.FinalizerMember}},
			Spec: etcdv1.EtcdMemberSpec{ClusterName: "db", Version: "3.6.16", Storage: c.Spec.Storage, Bootstrap: etcdv1.MemberBootstrap{
				InitialCluster: specs.InitialCluster(c, []string{"db-1", "db-2", "db-3"}), InitialClusterState: etcdv1.InitialClusterStateNew,
			}},
			Status: etcdv1.EtcdMemberStatus{MemberID: em.IDHex(), ClusterID: etcd.FormatID(h.etcd.ClusterID()), Role: etcdv1.RoleVoter},
		}
		objs = append(objs, m)
		if medium != etcdv1.StorageMediumMemory {
			pvc := specs.PVC(c, m)
			pvc.OwnerReferences = []metav1.OwnerReference{{APIVersion: "etcd-operator.cozystack.io/v1alpha2", Kind: "EtcdMember", Name: name, UID: m.UID, Controller: ptrTo(true)}}
			objs = append(objs, pvc)
		}
	}
	h.api = fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithStatusSubresource(&etcdv1.EtcdCluster{}, &etcdv1.EtcdMember{}).Build()
	if err := h.api.Get(context.Background(), client.ObjectKeyFromObject(c), c); err != nil {
		t.Fatal(err)
	}
	h.r = &Reconciler{Client: h.api, NewClient: func(context.Context, *etcdv1.EtcdCluster, []string) (etcd.Client, error) {
		return etcdfake.KeepOpen(h.etcd), nil
	}}
	return h
}

func ptrTo[T any](v T) *T { return &v }

func (h *memberHarness) reconcile(name string) {
	h.t.Helper()
	if _, err := h.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: name}}); err != nil {
		h.t.Fatalf("reconcile %s: %v", name, err)
	}
}

// get reads obj's namesake in the namespace "ns"; nil when it does not exist.
func get[T client.Object](h *memberHarness, name string, obj T) T {
	h.t.Helper()
	var none T
	err := h.api.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: name}, obj)
	if apierrors.IsNotFound(err) {
		return none
	}
	if err != nil {
		h.t.Fatal(err)
	}
	return obj
}

func (h *memberHarness) member(name string) *etcdv1.EtcdMember {
	return get(h, name, &etcdv1.EtcdMember{})
}

func (h *memberHarness) pvc(name string) *corev1.PersistentVolumeClaim {
	return get(h, name, &corev1.PersistentVolumeClaim{})
}

func (h *memberHarness) pod(name string) *corev1.Pod { return get(h, name, &corev1.Pod{}) }

// remove marks a member for removal (or not) and deletes it: its finalizer runs.
func (h *memberHarness) remove(name string, marked bool) {
	h.t.Helper()
	h.delete(name, marked)
	h.reconcile(name)
}

// delete marks a member for removal (or not) and deletes it; its finalizer holds it.
func (h *memberHarness) delete(name string, marked bool) {
	h.t.Helper()
	m := h.member(name)
	if marked {
		m.Annotations = map[string]string{etcdv1.AnnotationRemove: "true"}
		if err := h.api.Update(context.Background(), m); err != nil {
			h.t.Fatal(err)
		}
	}
	if err := h.api.Delete(context.Background(), m); err != nil {
		h.t.Fatal(err)
	}
}

func TestFinalizerOfARemovalTakesTheMemberOutOfEtcdThenItsPVC(t *testing.T) {
	h := newMemberHarness(t, "")
	h.etcd.SetLeader(h.ids["db-2"])
	h.remove("db-2", true)
	if calls := h.etcd.CallsTo("Remove"); !slices.Equal(calls, []string{"Remove(" + etcd.FormatID(h.ids["db-2"]) + ")"}) {
		t.Fatalf("Remove calls %v", calls)
	}
	if len(h.etcd.CallsTo("MoveLeader")) != 1 || h.etcd.Leader() == h.ids["db-2"] {
		t.Fatalf("leadership not moved away first: %v", h.etcd.Calls())
	}
	if h.pvc("db-2") != nil {
		t.Fatal("the PVC of a removed member was kept")
	}
	if h.member("db-2") != nil {
		t.Fatal("the finalizer was not released")
	}
}

// A member replaced because it is down is not asked for its health before its removal: the
// quorum is projected without it, and against a real etcd the question waits out the health
// timeout (3 s) before the removal can go on.
// createPod creates the Pod the member controller would, on node-1.
func (h *memberHarness) createPod(name string) *corev1.Pod {
	h.t.Helper()
	pod := specs.Pod(h.cluster, h.member(name), h.r.PodOptions)
	pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "etcd-operator.cozystack.io/v1alpha2", Kind: "EtcdMember", Name: name, UID: types.UID(name + "-uid"), Controller: ptrTo(true)}}
	pod.Spec.NodeName = "node-1"
	if err := h.api.Create(context.Background(), pod); err != nil {
		h.t.Fatal(err)
	}
	return pod
}

// A voter's Pod is stopped before its removal, so that its etcd shuts down gracefully and its
// clients move on; the removal is proposed once the Pod is gone. With another voter down the
// removal is refused, and the Pod runs on.
func TestFinalizerStopsAVotersPodBeforeItsRemoval(t *testing.T) {
	h := newMemberHarness(t, "")
	h.readyPod("db-2")
	h.remove("db-2", true)
	if h.pod("db-2") != nil {
		t.Fatal("the Pod of the voter to remove was not deleted")
	}
	if calls := h.etcd.CallsTo("Remove"); len(calls) > 0 || h.member("db-2") == nil {
		t.Fatalf("removed before its Pod stopped: %v", calls)
	}
	h.reconcile("db-2")
	if calls := h.etcd.CallsTo("Remove"); len(calls) != 1 || h.member("db-2") != nil {
		t.Fatalf("Remove calls %v once the Pod had gone", calls)
	}

	refused := newMemberHarness(t, "")
	refused.readyPod("db-1")
	refused.etcd.SetDown(refused.ids["db-3"], true)
	refused.remove("db-1", true)
	if refused.pod("db-1") == nil {
		t.Fatal("the Pod of a member whose removal is refused was stopped")
	}
}

// A Pod that is not Ready serves no client (a damaged member replaced): the removal does not
// wait for it to stop.
func TestFinalizerRemovesAMemberWhosePodIsNotReadyAtOnce(t *testing.T) {
	h := newMemberHarness(t, "")
	h.createPod("db-2")
	h.remove("db-2", true)
	if calls := h.etcd.CallsTo("Remove"); len(calls) != 1 || h.member("db-2") != nil {
		t.Fatalf("Remove calls %v: the removal waited on a Pod that serves nothing", calls)
	}
}

// readyPod is createPod, Ready.
func (h *memberHarness) readyPod(name string) {
	h.t.Helper()
	pod := h.createPod(name)
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	if err := h.api.Status().Update(context.Background(), pod); err != nil {
		h.t.Fatal(err)
	}
}

func TestFinalizerDoesNotAskTheMemberItRemovesForItsHealth(t *testing.T) {
	h := newMemberHarness(t, "")
	h.etcd.SetDown(h.ids["db-2"], true)
	h.remove("db-2", true)
	if calls := h.etcd.CallsTo("Remove"); len(calls) != 1 || h.member("db-2") != nil {
		t.Fatalf("Remove calls %v: the removal did not happen in one look", calls)
	}
	goneURL := specs.ClientURL(h.cluster, "db-2")
	asked := h.etcd.CallsTo("Healthy")
	if slices.Contains(asked, "Healthy("+goneURL+")") || len(asked) != 2 {
		t.Fatalf("Healthy calls %v, want each voter that stays asked once, not %s", asked, goneURL)
	}
}

func TestFinalizerRefusesARemovalTheQuorumCannotTake(t *testing.T) {
	h := newMemberHarness(t, "")
	h.etcd.SetDown(h.ids["db-3"], true) // a mark decided while db-3 was well
	h.remove("db-1", true)
	if calls := h.etcd.CallsTo("Remove"); len(calls) > 0 {
		t.Fatalf("removed although only db-2 would stay healthy: %v", calls)
	}
	if h.pvc("db-1") == nil || h.member("db-1") == nil {
		t.Fatal("the data or the finalizer went without the removal")
	}
	h.etcd.SetDown(h.ids["db-3"], false)
	h.reconcile("db-1")
	if len(h.etcd.CallsTo("Remove")) != 1 || h.member("db-1") != nil {
		t.Fatal("the removal was not carried out once the quorum could take it")
	}
}

// A member whose whole cluster a recovery from a snapshot replaces lets go without etcd,
// which has no quorum (here: two of three down): its PVC is kept as discarded data, owned by
// nothing and with the member's identity, and the finalizer released.
func TestFinalizerOfADiscardKeepsThePVCWithoutEtcd(t *testing.T) {
	h := newMemberHarness(t, "")
	h.reconcile("db-1") // the PVC records the member's ID
	h.etcd.SetDown(h.ids["db-2"], true)
	h.etcd.SetDown(h.ids["db-3"], true)
	m := h.member("db-1")
	m.Annotations = map[string]string{etcdv1.AnnotationDiscard: "true", etcdv1.AnnotationRemove: "true"}
	if err := h.api.Update(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	asked := len(h.etcd.Calls())
	h.remove("db-1", false)
	if calls := h.etcd.Calls()[asked:]; len(calls) > 0 {
		t.Fatalf("a discarded member asked etcd: %v", calls)
	}
	if h.member("db-1") != nil {
		t.Fatal("the finalizer of a discarded member was kept")
	}
	checkKeptAsDiscarded(t, h.pvc("db-1"), h.ids["db-1"])
}

// checkKeptAsDiscarded: the PVC is there, annotated as discarded data with a time, owned by
// nothing, and still says whose data it is (the member ID).
func checkKeptAsDiscarded(t *testing.T, pvc *corev1.PersistentVolumeClaim, id uint64) {
	t.Helper()
	if pvc == nil {
		t.Fatal("the PVC of a discarded member was deleted")
	}
	if _, err := time.Parse(time.RFC3339, pvc.Annotations[etcdv1.AnnotationDiscardedByRecovery]); err != nil || len(pvc.OwnerReferences) != 0 {
		t.Fatalf("PVC %s: annotations %v, owners %v; want %s=<time> and no owner", pvc.Name, pvc.Annotations, pvc.OwnerReferences, etcdv1.AnnotationDiscardedByRecovery)
	}
	if got := pvc.Annotations[etcdv1.AnnotationMemberID]; got != etcd.FormatID(id) {
		t.Fatalf("PVC %s records member ID %q, want %s", pvc.Name, got, etcd.FormatID(id))
	}
}

// A member a recovery from a member discards (removal and discarded marks) keeps its PVC as
// discarded data before etcd is asked anything, also under whenDeleted Delete, where the
// cluster controlled it: the old quorum is gone and the new cluster may answer only later. Once
// the new cluster answers it is removed (here: by etcd's Remove, as it is still listed) and its
// finalizer lets go, the PVC still there.
func TestFinalizerOfARecoveryDiscardKeepsThePVCFirst(t *testing.T) {
	h := newMemberHarness(t, "")
	c := h.cluster
	c.Spec.PersistentVolumeClaimRetentionPolicy = &etcdv1.PVCRetentionPolicy{WhenDeleted: etcdv1.PVCDelete}
	if err := h.api.Update(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	h.reconcile("db-2") // the cluster controls the PVC now
	if pvc := h.pvc("db-2"); len(pvc.OwnerReferences) != 1 {
		t.Fatalf("PVC owners under Delete: %v", pvc.OwnerReferences)
	}
	for _, name := range []string{"db-1", "db-3"} {
		h.etcd.SetDown(h.ids[name], true)
	}
	m := h.member("db-2")
	m.Annotations = map[string]string{etcdv1.AnnotationRemove: "true", etcdv1.AnnotationDiscardedByRecovery: "true"}
	if err := h.api.Update(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	h.remove("db-2", false)
	if h.member("db-2") == nil {
		t.Fatal("the finalizer let go before the member was out of etcd")
	}
	checkKeptAsDiscarded(t, h.pvc("db-2"), h.ids["db-2"])
	for _, name := range []string{"db-1", "db-3"} {
		h.etcd.SetDown(h.ids[name], false)
	}
	h.reconcile("db-2")
	if h.member("db-2") != nil {
		t.Fatal("the finalizer was not released once etcd answered")
	}
	if calls := h.etcd.CallsTo("Remove"); !slices.Equal(calls, []string{"Remove(" + etcd.FormatID(h.ids["db-2"]) + ")"}) {
		t.Fatalf("Remove calls %v, want the discarded member's once etcd answered", calls)
	}
	checkKeptAsDiscarded(t, h.pvc("db-2"), h.ids["db-2"])
}

func TestFinalizerOfADeletionByHandKeepsThePVC(t *testing.T) {
	h := newMemberHarness(t, "")
	h.remove("db-2", false)
	if calls := h.etcd.CallsTo("Remove"); len(calls) > 0 {
		t.Fatalf("a deletion by hand removed the member from etcd: %v", calls)
	}
	pvc := h.pvc("db-2")
	if pvc == nil || len(pvc.OwnerReferences) != 0 {
		t.Fatalf("PVC %+v, want it kept with no owner (whenDeleted Retain)", pvc)
	}
	if h.member("db-2") != nil {
		t.Fatal("the finalizer was not released")
	}
}

func TestRescueAndDeleteOfAPVCThatIsGone(t *testing.T) {
	h := newMemberHarness(t, "")
	m := h.member("db-2")
	fate, err := h.r.deletePVC(context.Background(), h.cluster, m)
	if err != nil || fate != pvcDeleted {
		t.Fatalf("deletePVC: %s, %v; want %s", fate, err, pvcDeleted)
	}
	if h.pvc("db-2") != nil {
		t.Fatal("deletePVC left the PVC")
	}
	if fate, err := h.r.deletePVC(context.Background(), h.cluster, m); err != nil || fate != pvcAbsent {
		t.Fatalf("deleting a PVC that is gone: %s, %v; want %s", fate, err, pvcAbsent)
	}
	if fate, err := h.r.rescuePVC(context.Background(), h.cluster, m); err != nil || fate != pvcAbsent || h.pvc("db-2") != nil {
		t.Fatalf("rescuing a PVC that is gone: %s, %v; want %s (must not create one)", fate, err, pvcAbsent)
	}
}

// foreignPVC puts another application's PVC where member name's was: the member's name, and
// the labels and owner the case gives it.
func (h *memberHarness) foreignPVC(name string, labels map[string]string, owner *metav1.OwnerReference) *corev1.PersistentVolumeClaim {
	h.t.Helper()
	if err := h.api.Delete(context.Background(), h.pvc(name)); err != nil {
		h.t.Fatal(err)
	}
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: labels}}
	if owner != nil {
		pvc.OwnerReferences = []metav1.OwnerReference{*owner}
	}
	if err := h.api.Create(context.Background(), pvc); err != nil {
		h.t.Fatal(err)
	}
	return h.pvc(name)
}

// foreignPVCs are PVCs that are not a member's although they have its name: the member
// finalizer must neither delete them nor take them over.
var foreignPVCs = []struct {
	name   string
	labels map[string]string
	owner  *metav1.OwnerReference
}{
	{name: "no labels, no owner"},
	{name: "controlled by a StatefulSet", owner: &metav1.OwnerReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "app", UID: "sts-uid", Controller: ptrTo(true)}},
	{name: "our cluster label, another manager", labels: map[string]string{etcdv1.LabelCluster: "db", etcdv1.LabelMember: "db-2", etcdv1.LabelManagedBy: "helm"}},
	{name: "controlled by another cluster of the name", labels: specs.MemberLabels("db", "db-2"),
		owner: &metav1.OwnerReference{APIVersion: etcdv1.GroupVersion.String(), Kind: "EtcdCluster", Name: "db", UID: "older-cluster-uid", Controller: ptrTo(true)}},
}

// A removal (scale-in, a replacement) deletes the member's PVC and a discard (recovery from a
// snapshot) keeps it as discarded data; a PVC of its name that is not its is left as it was,
// and the member still goes.
func TestFinalizerLeavesAPVCOfTheMembersNameThatIsNotItsOwn(t *testing.T) {
	for _, discard := range []bool{false, true} {
		for _, tc := range foreignPVCs {
			t.Run(fmt.Sprintf("%s, discard %v", tc.name, discard), func(t *testing.T) {
				h := newMemberHarness(t, "")
				before := h.foreignPVC("db-2", tc.labels, tc.owner)
				if discard {
					m := h.member("db-2")
					m.Annotations = map[string]string{etcdv1.AnnotationDiscard: "true"}
					if err := h.api.Update(context.Background(), m); err != nil {
						t.Fatal(err)
					}
				}
				h.remove("db-2", true)
				after := h.pvc("db-2")
				if after == nil || after.UID != before.UID || !equality.Semantic.DeepEqual(after.OwnerReferences, before.OwnerReferences) {
					t.Fatalf("the foreign PVC was deleted or taken over: %+v", after)
				}
				if h.member("db-2") != nil {
					t.Fatal("the member was held by a PVC that is not its")
				}
			})
		}
	}
}

// A member deleted by hand hands its PVC to the cluster (whenDeleted Delete); a foreign PVC
// of its name is not made the cluster's, which would have garbage collection delete it with
// the cluster.
func TestFinalizerOfADeletionByHandTakesNoForeignPVC(t *testing.T) {
	for _, tc := range foreignPVCs {
		t.Run(tc.name, func(t *testing.T) {
			h := newMemberHarness(t, "")
			c := h.cluster
			c.Spec.PersistentVolumeClaimRetentionPolicy = &etcdv1.PVCRetentionPolicy{WhenDeleted: etcdv1.PVCDelete}
			if err := h.api.Update(context.Background(), c); err != nil {
				t.Fatal(err)
			}
			before := h.foreignPVC("db-2", tc.labels, tc.owner)
			h.remove("db-2", false)
			after := h.pvc("db-2")
			if after == nil || !equality.Semantic.DeepEqual(after.OwnerReferences, before.OwnerReferences) {
				t.Fatalf("the foreign PVC was taken over: owners %+v", after.OwnerReferences)
			}
		})
	}
}

// A member never starts on data a recovery discarded, also one of that very name created by
// hand (or by an older operator rebuilding from the PVC): its old ID and membership would
// rejoin the recovered cluster. It says why, and its Pod is not made.
func TestMemberNeverStartsOnDiscardedData(t *testing.T) {
	h := newMemberHarness(t, "")
	pvc := h.pvc("db-2")
	retention.MarkDiscarded(h.cluster, pvc, time.Now())
	if err := h.api.Update(context.Background(), pvc); err != nil {
		t.Fatal(err)
	}
	h.reconcile("db-2")
	if h.pod("db-2") != nil {
		t.Fatal("a Pod was made on discarded data")
	}
	ready := meta.FindStatusCondition(h.member("db-2").Status.Conditions, etcdv1.MemberConditionReady)
	if ready == nil || ready.Reason != etcdv1.ReasonNameConflict || !strings.Contains(ready.Message, "discarded") {
		t.Fatalf("Ready %+v", ready)
	}
}

func TestEnsurePVCOwnsPerPolicyAndRecordsTheIdentity(t *testing.T) {
	h := newMemberHarness(t, "")
	h.reconcile("db-1")
	pvc := h.pvc("db-1")
	if len(pvc.OwnerReferences) != 0 {
		t.Fatalf("owners %+v: a foreground deletion of the EtcdMember or the cluster would take the data", pvc.OwnerReferences)
	}
	if pvc.Annotations[etcdv1.AnnotationMemberID] != etcd.FormatID(h.ids["db-1"]) || pvc.Annotations[etcdv1.AnnotationClusterID] == "" {
		t.Fatalf("annotations %v", pvc.Annotations)
	}
}

func TestEnsurePVCDoesNotRecreateTheDataOfAJoinedMember(t *testing.T) {
	h := newMemberHarness(t, "")
	if err := h.api.Delete(context.Background(), h.pvc("db-2")); err != nil {
		t.Fatal(err)
	}
	h.reconcile("db-2")
	if h.pvc("db-2") != nil {
		t.Fatal("an empty PVC was created for a member etcd counts on")
	}
	h.expectNotStarted("db-2")
	// etcd unreachable: the same answer, a known ID is never started on empty data.
	h.etcd.FailNext("MemberList", errors.New("no quorum"))
	h.reconcile("db-2")
	if h.pvc("db-2") != nil {
		t.Fatal("an empty PVC was created while etcd could not be asked")
	}
}

func TestEnsurePVCCreatesTheVolumeOfALearnerThatNeverStarted(t *testing.T) {
	h := newMemberHarness(t, "")
	added, _, err := h.etcd.AddLearner(context.Background(), []string{specs.PeerURL(h.cluster, "db-4")})
	if err != nil {
		t.Fatal(err)
	}
	m := &etcdv1.EtcdMember{
		ObjectMeta: metav1.ObjectMeta{Name: "db-4", Namespace: "ns", Labels: specs.MemberLabels("db", "db-4"), Finalizers: []string{etcdv1.FinalizerMember}},
		Spec: etcdv1.EtcdMemberSpec{ClusterName: "db", Version: "3.6.16", Storage: h.cluster.Spec.Storage, Bootstrap: etcdv1.MemberBootstrap{
			InitialCluster: specs.InitialCluster(h.cluster, []string{"db-1", "db-2", "db-3", "db-4"}), InitialClusterState: etcdv1.InitialClusterStateExisting,
		}},
	}
	if err := h.api.Create(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	m.Status.MemberID = added.IDHex()
	if err := h.api.Status().Update(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	h.reconcile("db-4")
	if h.pvc("db-4") == nil {
		t.Fatal("no PVC for a learner that has not started yet")
	}
	pod := h.pod("db-4")
	if pod == nil || specs.InitialClusterOf(pod) != m.Spec.Bootstrap.InitialCluster {
		t.Fatalf("the first start of a learner must name its peers: %+v", pod)
	}
}

func TestPodOfAJoinedMemberRefusesEmptyData(t *testing.T) {
	h := newMemberHarness(t, "")
	h.reconcile("db-1")
	pod := h.pod("db-1")
	if pod == nil {
		t.Fatal("no Pod")
	}
	args := strings.Join(pod.Spec.Containers[0].Args, " ")
	if specs.InitialClusterOf(pod) != specs.InitialCluster(h.cluster, []string{"db-1"}) ||
		!strings.Contains(args, "--initial-cluster-state=existing") {
		t.Fatalf("args %s, initial cluster %q: a restart on an empty data directory would rejoin under the same ID", args, specs.InitialClusterOf(pod))
	}
	want := specs.Pod(h.cluster, h.member("db-1"), h.r.PodOptions).Annotations[etcdv1.AnnotationPodTemplateHash]
	if pod.Annotations[etcdv1.AnnotationPodTemplateHash] != want {
		t.Fatal("the template hash changed: every member would be restarted")
	}
}

func TestTmpfsMemberThatJoinedGetsNoNewPod(t *testing.T) {
	h := newMemberHarness(t, etcdv1.StorageMediumMemory)
	h.reconcile("db-2")
	h.expectNotStarted("db-2")
}

// expectNotStarted: the member, which lost its data, has no Pod and says why.
func (h *memberHarness) expectNotStarted(name string) {
	h.t.Helper()
	if h.pod(name) != nil {
		h.t.Fatalf("a Pod was started for %s, which joined etcd and lost its data", name)
	}
	ready := meta.FindStatusCondition(h.member(name).Status.Conditions, etcdv1.MemberConditionReady)
	if ready == nil || ready.Reason != etcdv1.ReasonDataLost {
		h.t.Fatalf("Ready %+v", ready)
	}
}

// A Pod the scheduler could place on no node is replaced as soon as the cluster's spec gives
// its member another Pod (a toleration added): nothing ran in it. A Pod a node took, or one
// the scheduler has not judged, or one of the current spec, stays.
func TestAnUnschedulablePodIsReplacedWhenTheSpecChanges(t *testing.T) {
	unschedulable := []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message: "0/3 nodes are available: 3 node(s) had untolerated taint {dedicated: etcd}"}}
	for _, tc := range []struct {
		name       string
		node       string
		conditions []corev1.PodCondition
		changed    bool
		replaced   bool
	}{
		{"unschedulable, spec changed", "", unschedulable, true, true},
		{"unschedulable, spec as it was", "", unschedulable, false, false},
		{"not judged yet, spec changed", "", nil, true, false},
		{"on a node, spec changed (a roll's job)", "node-1", nil, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newMemberHarness(t, "")
			h.reconcile("db-1")
			pod := h.pod("db-1")
			pod.Spec.NodeName = tc.node
			if err := h.api.Update(context.Background(), pod); err != nil {
				t.Fatal(err)
			}
			pod.Status.Conditions = tc.conditions
			if err := h.api.Status().Update(context.Background(), pod); err != nil {
				t.Fatal(err)
			}
			if tc.changed {
				h.cluster.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "etcd", Effect: corev1.TaintEffectNoSchedule}}
				if err := h.api.Update(context.Background(), h.cluster); err != nil {
					t.Fatal(err)
				}
				// The change wakes every member of the cluster.
				if reqs := h.r.membersOfCluster(context.Background(), h.cluster); len(reqs) != 3 || !slices.ContainsFunc(reqs, func(r reconcile.Request) bool { return r.Name == "db-1" }) {
					t.Fatalf("the cluster's change wakes %v, want its 3 members", reqs)
				}
			}
			h.reconcile("db-1")
			if gone := h.pod("db-1") == nil; gone != tc.replaced {
				t.Fatalf("Pod deleted: %v, want %v", gone, tc.replaced)
			}
			if !tc.replaced {
				return
			}
			h.reconcile("db-1")
			if p := h.pod("db-1"); p == nil || len(p.Spec.Tolerations) == 0 || p.Spec.Tolerations[0].Key != "dedicated" {
				t.Fatalf("the new Pod lacks the toleration: %+v", p)
			}
		})
	}
}

// A member of a suspended cluster whose Pod is gone gets no new Pod until the suspension ends.
func TestAMemberOfASuspendedClusterIsNotRestarted(t *testing.T) {
	h := newMemberHarness(t, etcdv1.StorageMediumDefault)
	h.cluster.Annotations = map[string]string{etcdv1.AnnotationSuspendReconcile: "true"}
	if err := h.api.Update(context.Background(), h.cluster); err != nil {
		t.Fatal(err)
	}
	h.reconcile("db-2")
	if h.pod("db-2") != nil {
		t.Fatal("a Pod was created for a member of a suspended cluster")
	}
	delete(h.cluster.Annotations, etcdv1.AnnotationSuspendReconcile)
	if err := h.api.Update(context.Background(), h.cluster); err != nil {
		t.Fatal(err)
	}
	h.reconcile("db-2")
	if h.pod("db-2") == nil {
		t.Fatal("no Pod for the member once the suspension ended")
	}
}

// intercept puts funcs between the reconciler and the fake API; the test's own reads and
// writes (h.api) go straight to it.
func (h *memberHarness) intercept(funcs interceptor.Funcs) {
	h.r.Client = interceptor.NewClient(h.api.(client.WithWatch), funcs)
}

// A PVC the API cannot delete or mark is unchanged, and the error says why; only one that is
// not found is absent.
func TestAPVCTheAPIFailsOnIsUnchangedNotAbsent(t *testing.T) {
	refused := apierrors.NewServiceUnavailable("etcd of the API server is down")
	for _, tc := range []struct {
		err  error
		want pvcFate
	}{
		{refused, pvcUnchanged},
		{apierrors.NewNotFound(corev1.Resource("persistentvolumeclaims"), "db-2"), pvcAbsent},
	} {
		h := newMemberHarness(t, "")
		h.intercept(interceptor.Funcs{
			Delete: func(context.Context, client.WithWatch, client.Object, ...client.DeleteOption) error { return tc.err },
			Patch: func(context.Context, client.WithWatch, client.Object, client.Patch, ...client.PatchOption) error {
				return tc.err
			},
		})
		m := h.member("db-2")
		deleted, delErr := h.r.deletePVC(context.Background(), h.cluster, m)
		kept, keepErr := h.r.keepDiscardedPVC(context.Background(), h.cluster, m)
		for what, got := range map[string]struct {
			fate pvcFate
			err  error
		}{"delete": {deleted, delErr}, "keep as discarded": {kept, keepErr}} {
			if got.fate != tc.want || (tc.want == pvcUnchanged) != errors.Is(got.err, refused) {
				t.Errorf("%s answered %v: fate %s, error %v; want %s, and the error only when it is not NotFound", what, tc.err, got.fate, got.err, tc.want)
			}
		}
	}
}

// deleteCluster deletes the harness's cluster under the retention policy when; its finalizer
// holds it, so the members find it being deleted.
func (h *memberHarness) deleteCluster(when etcdv1.PVCRetentionAction) {
	h.t.Helper()
	c := h.cluster
	c.Spec.PersistentVolumeClaimRetentionPolicy = &etcdv1.PVCRetentionPolicy{WhenDeleted: when}
	c.Finalizers = []string{etcdv1.FinalizerRetainPVCs}
	if err := h.api.Update(context.Background(), c); err != nil {
		h.t.Fatal(err)
	}
	if err := h.api.Delete(context.Background(), c); err != nil {
		h.t.Fatal(err)
	}
}

// ownedByAnOlderOperator gives member name's PVC the cluster's and the member's owner
// references, as an older operator did, and one of someone else's, which stays; it returns
// the PVC.
func (h *memberHarness) ownedByAnOlderOperator(name string) *corev1.PersistentVolumeClaim {
	h.t.Helper()
	pvc := h.pvc(name)
	pvc.OwnerReferences = []metav1.OwnerReference{
		{APIVersion: etcdv1.GroupVersion.String(), Kind: "EtcdCluster", Name: "db", UID: h.cluster.UID},
		{APIVersion: etcdv1.GroupVersion.String(), Kind: "EtcdMember", Name: name, UID: types.UID(name + "-uid")},
		{APIVersion: "v1", Kind: "ConfigMap", Name: "backup-plan", UID: "cm-uid"},
	}
	if err := h.api.Update(context.Background(), pvc); err != nil {
		h.t.Fatal(err)
	}
	return pvc
}

// annotate puts the annotation key=true on member name.
func (h *memberHarness) annotate(name, key string) {
	h.t.Helper()
	m := h.member(name)
	m.Annotations = map[string]string{key: "true"}
	if err := h.api.Update(context.Background(), m); err != nil {
		h.t.Fatal(err)
	}
}

// pvcGoneBeforeItsPatch answers every patch of a PVC with NotFound: deleted since it was read.
var pvcGoneBeforeItsPatch = interceptor.Funcs{Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if _, ok := obj.(*corev1.PersistentVolumeClaim); ok {
		return apierrors.NewNotFound(corev1.Resource("persistentvolumeclaims"), obj.GetName())
	}
	return c.Patch(ctx, obj, patch, opts...)
}}

// A member whose cluster is being deleted (a foreground deletion finalizes the members first)
// lets its PVC go per the cluster's policy: under whenDeleted Retain it takes the cluster's
// owner references off, before garbage collection could take the data; under Delete it
// leaves it to garbage collection; a member a recovery discards keeps it as discarded data
// under either. A PVC gone since it was read is absent, not released.
func TestFinalizerOfAMemberOfADeletedClusterLetsThePVCGoPerPolicy(t *testing.T) {
	for _, tc := range []struct {
		name      string
		when      etcdv1.PVCRetentionAction
		discard   bool
		goneFirst bool // the PVC is deleted between its read and its patch
		want      pvcFate
		released  bool // the cluster's owner references taken off the PVC
	}{
		{name: "Retain", when: etcdv1.PVCRetain, want: pvcReleased, released: true},
		{name: "Delete", when: etcdv1.PVCDelete, want: pvcGoesWithCluster},
		{name: "discarded, Delete", when: etcdv1.PVCDelete, discard: true, want: pvcKeptAsDiscarded, released: true},
		{name: "Retain, the PVC gone meanwhile", when: etcdv1.PVCRetain, goneFirst: true, want: pvcAbsent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newMemberHarness(t, "")
			h.reconcile("db-2") // the PVC records the member's ID
			before := h.ownedByAnOlderOperator("db-2")
			if tc.discard {
				h.annotate("db-2", etcdv1.AnnotationDiscard)
			}
			if tc.goneFirst {
				h.intercept(pvcGoneBeforeItsPatch)
			}
			h.deleteCluster(tc.when)
			h.delete("db-2", false)
			expectLine(t, tc.name, memberLog(t, "db-2").Reconcile(h.r), map[string]any{
				"msg": "step taken", "step": "finalizeClusterDeletion", "changed": true, "pvc": "db-2", "pvcFate": string(tc.want),
			})
			if h.member("db-2") != nil || len(h.etcd.CallsTo("Remove")) > 0 {
				t.Fatalf("the finalizer was not released, or the member of a deleted cluster was removed from etcd: %v", h.etcd.Calls())
			}
			owners := before.OwnerReferences
			if tc.released {
				owners = owners[2:] // someone else's
			}
			after := h.pvc("db-2")
			if after == nil || !equality.Semantic.DeepEqual(after.OwnerReferences, owners) || retention.DiscardedData(after) != tc.discard {
				t.Fatalf("PVC %+v: want it with the owners %v, marked as discarded data: %v", after, owners, tc.discard)
			}
		})
	}
}

// A removal resumed after a crash right after etcd's Remove (failpoint.AfterMemberRemove):
// etcd lists the member no more, its PVC and finalizer are still there. The finalizer does not
// remove it again nor say it removed it (no MemberRemoved event), and lets its data and the
// member go.
func TestFinalizerOfARemovalResumedAfterTheMemberLeftEtcd(t *testing.T) {
	h := newMemberHarness(t, "")
	recorder := events.NewFakeRecorder(20)
	h.r.Recorder = recorder
	h.delete("db-2", true)
	if err := h.etcd.Remove(context.Background(), h.ids["db-2"]); err != nil {
		t.Fatal(err)
	}
	h.etcd.ResetCalls()
	expectLine(t, "the removal of db-2, resumed", memberLog(t, "db-2").Reconcile(h.r), map[string]any{
		"msg": "step taken", "step": "finalizeRemoval", "changed": true, "removedFromEtcd": false, "pvcFate": string(pvcDeleted),
	})
	if calls := h.etcd.CallsTo("Remove"); len(calls) > 0 {
		t.Fatalf("removed again: %v", calls)
	}
	close(recorder.Events)
	var said []string
	for e := range recorder.Events {
		said = append(said, e)
	}
	if slices.ContainsFunc(said, func(e string) bool { return strings.Contains(e, etcdv1.ReasonMemberRemoved) }) ||
		!slices.ContainsFunc(said, func(e string) bool { return strings.Contains(e, etcdv1.ReasonDataDeleted) }) {
		t.Fatalf("events %v: want %s and no %s", said, etcdv1.ReasonDataDeleted, etcdv1.ReasonMemberRemoved)
	}
	if h.pvc("db-2") != nil {
		t.Fatal("the PVC of the removed member was kept")
	}
	if h.member("db-2") != nil {
		t.Fatal("the finalizer was not released")
	}
}
