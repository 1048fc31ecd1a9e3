package cluster

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/agent"
	"github.com/quorumkeeper/etcd-operator/internal/controller/children/retention"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
	"github.com/quorumkeeper/etcd-operator/internal/etcdfake"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

const testChecksum = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// completeSnapshot is an EtcdSnapshot of cluster db (etcd cluster clusterID) at revision 40.
func completeSnapshot(name, clusterID string) *etcdv1.EtcdSnapshot {
	return &etcdv1.EtcdSnapshot{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
		Spec: etcdv1.EtcdSnapshotSpec{ClusterRef: corev1.LocalObjectReference{Name: "db"}, Destination: etcdv1.SnapshotLocation{S3: &etcdv1.S3SnapshotLocation{
			Endpoint: "http://minio:9000", Bucket: "backups", Key: "db/", CredentialsSecretRef: corev1.LocalObjectReference{Name: "s3"},
		}}},
		Status: etcdv1.EtcdSnapshotStatus{
			Phase: etcdv1.SnapshotComplete, Revision: 40, ClusterID: clusterID, Member: "db-2",
			Artifact: &etcdv1.SnapshotArtifact{URI: "s3://backups/db/" + name + ".db", SizeBytes: 1000, Checksum: testChecksum},
		},
	}
}

func TestPlanSnapshotRecovery(t *testing.T) {
	survivors := []survivor{answered("db-1", 100, false), {name: "db-2"}, {name: "db-3"}}
	edited := func(edit func(*etcdv1.EtcdSnapshot)) *etcdv1.EtcdSnapshot {
		s := completeSnapshot("snap", "c1a5e4")
		edit(s)
		return s
	}
	for _, tc := range []struct {
		name       string
		snapshot   *etcdv1.EtcdSnapshot
		allowOther bool
		tmpfs      bool
		refusal    string // part of the refusal; "" when it goes ahead
	}{
		{"a complete snapshot of this cluster", completeSnapshot("snap", "c1a5e4"), false, false, ""},
		{"no such snapshot", nil, false, false, "EtcdSnapshot snap does not exist"},
		{"a snapshot still being taken", edited(func(s *etcdv1.EtcdSnapshot) { s.Status.Phase = etcdv1.SnapshotStarted }), false, false, `is "Started", not Complete`},
		{"a snapshot being deleted", edited(func(s *etcdv1.EtcdSnapshot) { s.DeletionTimestamp = &metav1.Time{Time: time.Now()} }), false, false, "is being deleted"},
		{"a failed snapshot", edited(func(s *etcdv1.EtcdSnapshot) { s.Status.Phase = etcdv1.SnapshotFailed }), false, false, "not Complete"},
		{"no checksum", edited(func(s *etcdv1.EtcdSnapshot) { s.Status.Artifact.Checksum = "" }), false, false, "records no checksum or revision"},
		{"no revision", edited(func(s *etcdv1.EtcdSnapshot) { s.Status.Revision = 0 }), false, false, "records no checksum or revision"},
		{"an artifact naming another file", edited(func(s *etcdv1.EtcdSnapshot) { s.Status.Artifact.URI = "s3://backups/db/other.db" }), false, false, "an artifact that does not name its file"},
		{"another EtcdCluster's", edited(func(s *etcdv1.EtcdSnapshot) { s.Spec.ClusterRef.Name = "orders" }), false, false, "holds the data of EtcdCluster orders"},
		{"another etcd cluster's", edited(func(s *etcdv1.EtcdSnapshot) { s.Status.ClusterID = "beef" }), false, false, "etcd cluster beef; this is EtcdCluster db, etcd cluster c1a5e4"},
		{"another cluster's, allowed", edited(func(s *etcdv1.EtcdSnapshot) { s.Status.ClusterID = "beef" }), true, false, ""},
		{"tmpfs", completeSnapshot("snap", "c1a5e4"), false, true, "a tmpfs cluster cannot be rebuilt from a snapshot"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan := planSnapshotRecovery(snapshotRecoveryInput{
				requested: "snap", snapshot: tc.snapshot, cluster: "db", clusterID: "c1a5e4", allowOther: tc.allowOther, tmpfs: tc.tmpfs,
				survivors: survivors, names: []string{"db-3", "db-1", "db-2"},
			})
			if tc.refusal != "" {
				if !strings.Contains(plan.refusal, tc.refusal) {
					t.Fatalf("refusal %q, want %q", plan.refusal, tc.refusal)
				}
				return
			}
			if plan.refusal != "" {
				t.Fatalf("refused: %s", plan.refusal)
			}
			for _, want := range []string{
				"restoring EtcdSnapshot snap at revision 40", "writes after revision 40 are lost",
				"db-1 revision 42 (2 revisions after the snapshot are lost)", "db-2 unknown (not answering)",
				"the data of every member [db-1, db-2, db-3] is discarded", "new cluster ID",
			} {
				if !strings.Contains(plan.loss, want) {
					t.Errorf("loss %q does not say %q", plan.loss, want)
				}
			}
			rec := plan.record
			if rec.Restore.Source.S3 == nil || rec.Restore.Source.S3.Key != "db/snap.db" || rec.Restore.Checksum != testChecksum || rec.ReplacedClusterID != "c1a5e4" || rec.Loss != plan.loss {
				t.Errorf("record %+v", rec)
			}
		})
	}
}

// lostQuorumWithSnapshot: a running cluster of 3 whose db-2 and db-3 are down, with a Pod for
// each member and a Complete snapshot of it.
func lostQuorumWithSnapshot(t *testing.T) *harness {
	h := runningHarness(t)
	for _, name := range []string{"db-1", "db-2", "db-3"} {
		h.startPodOf(name)
	}
	h.etcd.SetDown(h.etcdID("db-2"), true)
	h.etcd.SetDown(h.etcdID("db-3"), true)
	h.reconcile()
	if err := h.api.Create(context.Background(), completeSnapshot("snap", h.clusterObj().Status.ClusterID)); err != nil {
		t.Fatal(err)
	}
	h.verifier = verifiesAs(agent.Result{SizeBytes: 1000, Message: "verified"})
	return h
}

func (h *harness) annotate(kv ...string) {
	h.t.Helper()
	c := h.clusterObj()
	patch := client.MergeFrom(c.DeepCopy())
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	for i := 0; i < len(kv); i += 2 {
		c.Annotations[kv[i]] = kv[i+1]
	}
	if err := h.api.Patch(context.Background(), c, patch); err != nil {
		h.t.Fatal(err)
	}
}

// countOfCluster counts the objects of the list's kind labelled as the cluster's (a verify
// Job's Pod is not).
func (h *harness) countOfCluster(list client.ObjectList) int {
	h.t.Helper()
	if err := h.api.List(context.Background(), list, client.InNamespace("ns"), client.MatchingLabels{etcdv1.LabelCluster: "db"}); err != nil {
		h.t.Fatal(err)
	}
	return meta.LenList(list)
}

func (h *harness) count(list client.ObjectList) int {
	h.t.Helper()
	if err := h.api.List(context.Background(), list, client.InNamespace("ns")); err != nil {
		h.t.Fatal(err)
	}
	return meta.LenList(list)
}

// A recovery from a snapshot: the loss is stated before anything, then recorded, then every
// member and Pod goes and every PVC is kept as discarded data, then one member, under a name
// no kept PVC has, restores the snapshot under a new token, and once the new cluster answers
// the request and the record go and scaling adds the others.
func TestRecoveryFromSnapshot(t *testing.T) {
	h := lostQuorumWithSnapshot(t)
	oldToken := h.clusterObj().Status.ClusterToken
	h.annotate(etcdv1.AnnotationRecoverFromSnapshot, "snap")
	h.reconcile() // the file verified
	h.reconcile()
	pr := h.condition(etcdv1.ConditionProgressing)
	if pr.Reason != etcdv1.ReasonQuorumRecovery || !strings.Contains(pr.Message, "restoring EtcdSnapshot snap at revision 40") || !strings.Contains(pr.Message, "db-1 revision 0 (nothing after the snapshot)") {
		t.Fatalf("Progressing before any act: %+v", pr)
	}
	if len(h.members()) != 3 || h.clusterObj().Status.SnapshotRecovery != nil {
		t.Fatal("something was done before the loss was in status")
	}
	if h.snapshotHeld() {
		t.Fatal("the snapshot was held before the loss was in status")
	}
	h.reconcile()
	if rec := h.clusterObj().Status.SnapshotRecovery; rec == nil || len(h.members()) != 3 {
		t.Fatalf("the recovery was not recorded before the first act: %+v", rec)
	}
	if !h.snapshotHeld() {
		t.Fatal("the recovery was recorded without holding the snapshot's file")
	}
	h.checkOldClusterCleared(oldToken)
	h.checkRestoringSeed(oldToken)
	h.finishSnapshotRecoveryWith(0xbeef)
}

// A PVC that carries the cluster's label but is not the data of one of its members (another
// manager's) is not the recovery's to touch, and does not hold the recovery up.
func TestRecoveryFromSnapshotLeavesAPVCThatIsNotOurs(t *testing.T) {
	h := lostQuorumWithSnapshot(t)
	foreign := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "db-cache", Namespace: "ns",
		Labels: map[string]string{etcdv1.LabelCluster: "db", etcdv1.LabelMember: "db-cache", etcdv1.LabelManagedBy: "helm"}}}
	if err := h.api.Create(context.Background(), foreign); err != nil {
		t.Fatal(err)
	}
	h.annotate(etcdv1.AnnotationRecoverFromSnapshot, "snap")
	for i := 0; i < 25 && (h.clusterObj().Status.SnapshotRecovery == nil || h.clusterObj().Status.ClusterID != ""); i++ {
		h.reconcile()
	}
	if c := h.clusterObj(); c.Status.ClusterID != "" {
		t.Fatalf("the recovery did not clear the old cluster: %+v", h.condition(etcdv1.ConditionProgressing))
	}
	list := &corev1.PersistentVolumeClaimList{}
	if err := h.api.List(context.Background(), list, client.InNamespace("ns")); err != nil {
		t.Fatal(err)
	}
	for _, pvc := range list.Items {
		if pvc.Name == "db-cache" && (pvc.UID != foreign.UID || retention.DiscardedData(&pvc)) {
			t.Fatalf("the foreign PVC was touched: %+v", pvc.ObjectMeta)
		}
	}
	if len(list.Items) != 4 {
		t.Fatalf("%d PVCs after the recovery, want the foreign one and the three kept", len(list.Items))
	}
}

// checkOldClusterCleared reconciles until the cluster ID is cleared: no member or Pod of the
// old cluster is left, every PVC of it is kept as discarded data owned by nothing, and the
// token is new.
func (h *harness) checkOldClusterCleared(oldToken string) {
	t := h.t
	t.Helper()
	for i := 0; i < 20 && h.clusterObj().Status.ClusterID != ""; i++ {
		h.reconcile()
	}
	if c := h.clusterObj(); c.Status.ClusterID != "" || c.Status.ClusterToken == oldToken {
		t.Fatalf("the old cluster was never cleared: ID %q, token %q", c.Status.ClusterID, c.Status.ClusterToken)
	}
	if n := h.countOfCluster(&corev1.PodList{}); n != 0 {
		t.Fatalf("%d Pods left of the old cluster", n)
	}
	for _, name := range []string{"db-1", "db-2", "db-3"} {
		if pvc := h.pvc(name); pvc == nil || !retention.DiscardedData(pvc) || len(pvc.OwnerReferences) != 0 {
			t.Fatalf("PVC %s of the old cluster not kept as discarded data: %+v", name, pvc)
		}
	}
}

// checkRestoringSeed: what bootstrap creates is one member that restores the snapshot,
// checking its checksum, under the new token.
func (h *harness) checkRestoringSeed(oldToken string) {
	t := h.t
	t.Helper()
	h.reconcile()
	ms := h.members()
	if len(ms) != 1 || ms[0].Name != "db-4" || ms[0].Spec.Bootstrap.Restore == nil || ms[0].Spec.Bootstrap.Restore.Source.S3.Key != "db/snap.db" ||
		ms[0].Spec.Bootstrap.ClusterToken == oldToken {
		t.Fatalf("founding members %v: %+v", names(ms), ms[0].Spec.Bootstrap)
	}
	pod := specs.Pod(h.clusterObj(), ms[0], h.r.PodOptions)
	if !hasArg(pod.Spec.InitContainers, specs.RestoreContainerName, "--checksum="+testChecksum) {
		t.Fatal("the founding member's Pod does not restore the snapshot with its checksum")
	}
	if av := h.condition(etcdv1.ConditionAvailable); av.Reason != "Bootstrapping" {
		t.Fatalf("Available while the new cluster forms: %+v", av)
	}
}

// finishSnapshotRecoveryWith: the restored member forms a new cluster of that ID; the request
// and the record go, and scaling adds a member.
func (h *harness) finishSnapshotRecoveryWith(clusterID uint64) {
	t := h.t
	t.Helper()
	// The restored member forms a new cluster.
	h.etcd = etcdfake.New()
	h.etcd.SetClusterID(clusterID)
	h.etcd.SeedMember("db-4", specs.PeerURL(h.clusterObj(), "db-4"), specs.ClientURL(h.clusterObj(), "db-4"))
	h.reconcile() // the request goes
	if _, ok := h.clusterObj().Annotations[etcdv1.AnnotationRecoverFromSnapshot]; ok {
		t.Fatal("the request outlived the recovery")
	}
	h.reconcile() // the record goes
	if c := h.clusterObj(); c.Status.SnapshotRecovery != nil || c.Status.ClusterID != etcd.FormatID(clusterID) {
		t.Fatalf("after the recovery: record %+v, cluster ID %q", c.Status.SnapshotRecovery, c.Status.ClusterID)
	}
	h.reconcile() // scaling adds a member
	if got := len(h.members()); got != 2 {
		t.Fatalf("%d members after the recovery, want a new one added", got)
	}
}

func hasArg(containers []corev1.Container, name, arg string) bool {
	for _, c := range containers {
		if c.Name != name {
			continue
		}
		for _, a := range c.Args {
			if a == arg {
				return true
			}
		}
	}
	return false
}

// Refused, with nothing changed: a snapshot of another etcd cluster without the allowance,
// and a missing one. Allowed explicitly, the other cluster's snapshot goes ahead.
func TestRecoveryFromSnapshotRefusals(t *testing.T) {
	h := lostQuorumWithSnapshot(t)
	other := completeSnapshot("other", "beef")
	if err := h.api.Create(context.Background(), other); err != nil {
		t.Fatal(err)
	}
	// In this order: the allowance below applies to the annotation left on, "other".
	for _, tc := range []struct{ name, want string }{
		{"missing", "EtcdSnapshot missing does not exist"},
		{"other", "to restore it anyway, set " + etcdv1.AnnotationAllowOtherClusterSnapshot + "=true"},
	} {
		name, want := tc.name, tc.want
		h.annotate(etcdv1.AnnotationRecoverFromSnapshot, name)
		h.reconcile()
		h.reconcile()
		pr := h.condition(etcdv1.ConditionProgressing)
		if pr.Reason != etcdv1.ReasonRecoveryRefused || !strings.Contains(pr.Message, want) {
			t.Fatalf("%s: Progressing %+v", name, pr)
		}
		if len(h.members()) != 3 || h.clusterObj().Status.SnapshotRecovery != nil {
			t.Fatalf("%s: a refused recovery changed something", name)
		}
	}
	h.annotate(etcdv1.AnnotationAllowOtherClusterSnapshot, "true")
	h.reconcile() // the file verified
	h.reconcile()
	if pr := h.condition(etcdv1.ConditionProgressing); pr.Reason != etcdv1.ReasonQuorumRecovery || !strings.Contains(pr.Message, "restoring EtcdSnapshot other") {
		t.Fatalf("allowed: Progressing %+v", pr)
	}
}

// While etcd has a quorum the request is refused and removed; nothing else changes.
func TestRecoveryFromSnapshotRefusedWithAQuorum(t *testing.T) {
	h := runningHarness(t)
	if err := h.api.Create(context.Background(), completeSnapshot("snap", h.clusterObj().Status.ClusterID)); err != nil {
		t.Fatal(err)
	}
	h.annotate(etcdv1.AnnotationRecoverFromSnapshot, "snap")
	h.reconcile()
	c := h.clusterObj()
	if _, ok := c.Annotations[etcdv1.AnnotationRecoverFromSnapshot]; ok || c.Status.SnapshotRecovery != nil || len(h.members()) != 3 {
		t.Fatalf("a healthy cluster: annotations %v, record %+v, %d members", c.Annotations, c.Status.SnapshotRecovery, len(h.members()))
	}
}

// The quorum back before the recovery was recorded: the request goes and nothing changes.
// Once recorded, the recovery goes on whatever answers: members may already be gone.
func TestRecoveryFromSnapshotAfterTheQuorumReturns(t *testing.T) {
	h := lostQuorumWithSnapshot(t)
	h.annotate(etcdv1.AnnotationRecoverFromSnapshot, "snap")
	h.reconcile() // the file verified
	h.reconcile() // stated
	h.etcd.SetDown(h.etcdID("db-2"), false)
	h.reconcile()
	c := h.clusterObj()
	if c.Status.SnapshotRecovery != nil || c.Annotations[etcdv1.AnnotationRecoverFromSnapshot] != "" || len(h.members()) != 3 {
		t.Fatalf("quorum back before the record: record %+v, annotations %v, %d members", c.Status.SnapshotRecovery, c.Annotations, len(h.members()))
	}

	h = lostQuorumWithSnapshot(t)
	h.annotate(etcdv1.AnnotationRecoverFromSnapshot, "snap")
	h.reconcile() // the file verified
	h.reconcile() // stated
	h.reconcile() // recorded
	h.reconcile() // db-1 discarded
	h.etcd.SetDown(h.etcdID("db-2"), false)
	h.etcd.SetDown(h.etcdID("db-3"), false)
	for i := 0; i < 20 && h.clusterObj().Status.ClusterID != ""; i++ {
		h.reconcile()
	}
	if c := h.clusterObj(); c.Status.ClusterID != "" || len(h.members()) > 1 {
		t.Fatalf("a recovery that discarded a member stopped halfway: ID %q, members %v", c.Status.ClusterID, names(h.members()))
	}
}

// Each member is marked to discard its data before it is deleted (its finalizer then lets go
// without etcd), one per look; a member left marked but not deleted (the operator died
// between the two) is deleted by the next look; and the old cluster's ID stays while any
// member still holds its data.
func TestRecoveryFromSnapshotMarksEachMemberBeforeDeletingIt(t *testing.T) {
	h := lostQuorumWithSnapshot(t)
	h.holdMembers() // discarded members stay, going, as the finalizer holds them
	h.annotate(etcdv1.AnnotationRecoverFromSnapshot, "snap")
	h.reconcile() // the file verified
	h.reconcile() // stated
	h.reconcile() // recorded
	h.reconcile()
	if m := h.member("db-1"); m.Annotations[etcdv1.AnnotationDiscard] != "true" || m.DeletionTimestamp.IsZero() {
		t.Fatalf("db-1 after the first act: annotations %v, deleted %v", m.Annotations, m.DeletionTimestamp)
	}
	if m := h.member("db-2"); m.Annotations[etcdv1.AnnotationDiscard] == "true" || !m.DeletionTimestamp.IsZero() {
		t.Fatal("a second member was discarded in the same look")
	}
	// The operator died right after marking db-2.
	m := h.member("db-2")
	m.Annotations = map[string]string{etcdv1.AnnotationDiscard: "true"}
	if err := h.api.Update(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	h.reconcile()
	if m := h.member("db-2"); m.DeletionTimestamp.IsZero() {
		t.Fatal("a member left marked was not deleted")
	}
	for range 6 {
		h.reconcile()
	}
	for _, m := range h.members() {
		if m.Annotations[etcdv1.AnnotationDiscard] != "true" || m.DeletionTimestamp.IsZero() {
			t.Fatalf("%s not marked and going: annotations %v", m.Name, m.Annotations)
		}
	}
	if c := h.clusterObj(); c.Status.ClusterID == "" || c.Status.SnapshotRecovery == nil {
		t.Fatalf("the old cluster was cleared while members still hold its data: ID %q", c.Status.ClusterID)
	}
	if pr := h.condition(etcdv1.ConditionProgressing); !strings.Contains(pr.Message, "waiting for the members to let go of their data") {
		t.Fatalf("Progressing while the members go: %+v", pr)
	}
}

// A look at a copy of the cluster from before the record (a cache behind the write) does not
// write the record again: the first stays, with its start time.
func TestRecoveryFromSnapshotIsRecordedOnce(t *testing.T) {
	h := lostQuorumWithSnapshot(t)
	h.annotate(etcdv1.AnnotationRecoverFromSnapshot, "snap")
	h.reconcile() // the file verified
	h.reconcile() // stated
	stale := h.clusterObj()
	h.reconcile() // recorded
	first := h.clusterObj().Status.SnapshotRecovery
	if first == nil {
		t.Fatal("not recorded")
	}
	// Later, but while the verification of the file is still trusted.
	h.r.Now = func() time.Time { return time.Now().Add(verdictTrusted / 2) }
	ctx := context.Background()
	members, err := h.r.listMembers(ctx, stale)
	if err != nil {
		t.Fatal(err)
	}
	v, err := h.r.observe(ctx, stale, members)
	if err != nil {
		t.Fatal(err)
	}
	defer v.close()
	if _, err := h.r.recoverFromSnapshot(ctx, stale, v); !apierrors.IsConflict(err) {
		t.Fatalf("a stale look at the request: %v, want a conflict", err)
	}
	if rec := h.clusterObj().Status.SnapshotRecovery; rec == nil || !rec.StartTime.Equal(first.StartTime) {
		t.Fatalf("the record was written again: %+v, first %+v", rec, first)
	}
}

// snapshotHeld: the EtcdSnapshot snap holds its file for a restore, and says for which cluster.
func (h *harness) snapshotHeld() bool {
	h.t.Helper()
	s := &etcdv1.EtcdSnapshot{}
	if err := h.api.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "snap"}, s); err != nil {
		h.t.Fatal(err)
	}
	return controllerutil.ContainsFinalizer(s, etcdv1.FinalizerRestoreSource) && strings.HasPrefix(s.Annotations[etcdv1.AnnotationRestoreHeldBy], "EtcdCluster db at ")
}

// A deletion of the EtcdSnapshot that comes after the plan read it and before the hold (the
// hold reads live) refuses the hold: no finalizer can be added to an object being deleted.
// The same look at the cluster then refuses the recovery: nothing recorded or discarded.
func TestASnapshotBeingDeletedCannotBeHeld(t *testing.T) {
	h := lostQuorumWithSnapshot(t)
	h.annotate(etcdv1.AnnotationRecoverFromSnapshot, "snap")
	h.reconcile() // the file verified
	h.reconcile() // the loss stated
	ctx := context.Background()
	s := &etcdv1.EtcdSnapshot{}
	if err := h.api.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "snap"}, s); err != nil {
		t.Fatal(err)
	}
	s.Finalizers = []string{"test/keep"}
	if err := h.api.Update(ctx, s); err != nil {
		t.Fatal(err)
	}
	if err := h.api.Delete(ctx, s); err != nil {
		t.Fatal(err)
	}
	if why, err := h.r.holdSnapshot(ctx, h.clusterObj(), "snap"); err != nil || !strings.Contains(why, "EtcdSnapshot snap is being deleted") {
		t.Fatalf("hold of a snapshot being deleted: %q, %v", why, err)
	}
	if h.snapshotHeld() {
		t.Fatal("a snapshot being deleted was held")
	}
	if why, err := h.r.holdSnapshot(ctx, h.clusterObj(), "gone"); err != nil || !strings.Contains(why, "EtcdSnapshot gone no longer exists") {
		t.Fatalf("hold of a missing snapshot: %q, %v", why, err)
	}
	h.reconcile()
	if rec := h.clusterObj().Status.SnapshotRecovery; rec != nil || len(h.members()) != 3 {
		t.Fatalf("a recovery from a snapshot being deleted began: %+v", rec)
	}
}
