package cluster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller/children/retention"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
	"github.com/quorumkeeper/etcd-operator/internal/failpoint"
)

// snapshotRecoveryPlan is what a recovery from an EtcdSnapshot would do, or why it must not.
type snapshotRecoveryPlan struct {
	record  etcdv1.SnapshotRecoveryStatus
	key     string // names the recovery in the loss statement
	loss    string
	refusal string
}

// snapshotRecoveryInput is what the plan is made from.
type snapshotRecoveryInput struct {
	requested  string
	snapshot   *etcdv1.EtcdSnapshot // nil when there is none of that name
	cluster    string
	clusterID  string // the cluster's etcd ID (hex)
	allowOther bool
	tmpfs      bool
	survivors  []survivor
	names      []string // every member name with a Pod, a PVC or an EtcdMember
}

// planSnapshotRecovery checks the request: the snapshot must exist, be Complete with a
// recorded checksum and revision (so the restore can verify it), and come from this very etcd
// cluster unless the person allowed another; then it says what is lost.
func planSnapshotRecovery(in snapshotRecoveryInput) snapshotRecoveryPlan {
	var plan snapshotRecoveryPlan
	s := in.snapshot
	var restore *etcdv1.MemberRestore
	if s != nil {
		restore = snapshotFile(s)
	}
	switch {
	case in.tmpfs:
		plan.refusal = "a tmpfs cluster cannot be rebuilt from a snapshot: a member's Pod that restarts would restore it again and lose later writes; create a new cluster with medium \"\" (PVC) and spec.bootstrap.restore"
	case s == nil:
		plan.refusal = fmt.Sprintf("EtcdSnapshot %s does not exist in this namespace; set %s to a Complete EtcdSnapshot of this cluster (kubectl get etcdsnapshots)", in.requested, etcdv1.AnnotationRecoverFromSnapshot)
	case !s.DeletionTimestamp.IsZero():
		plan.refusal = fmt.Sprintf("EtcdSnapshot %s is being deleted (with deletionPolicy Delete, its stored file too): name another snapshot", s.Name)
	case s.Status.Phase != etcdv1.SnapshotComplete:
		plan.refusal = fmt.Sprintf("EtcdSnapshot %s is %q, not Complete: only a snapshot stored and verified can be restored; name a Complete one", s.Name, s.Status.Phase)
	case restore == nil || s.Status.Revision <= 0:
		plan.refusal = fmt.Sprintf("EtcdSnapshot %s records no checksum or revision (or an artifact that does not name its file): the restore could not verify the file; name another snapshot", s.Name)
	case !in.allowOther && (s.Spec.ClusterRef.Name != in.cluster || s.Status.ClusterID != in.clusterID):
		plan.refusal = fmt.Sprintf("EtcdSnapshot %s holds the data of EtcdCluster %s, etcd cluster %s; this is EtcdCluster %s, etcd cluster %s (a cluster rebuilt from a snapshot has a new ID, so snapshots older than that count as another cluster's); to restore it anyway, set %s=true as well",
			s.Name, s.Spec.ClusterRef.Name, s.Status.ClusterID, in.cluster, in.clusterID, etcdv1.AnnotationAllowOtherClusterSnapshot)
	}
	if plan.refusal != "" {
		return plan
	}
	plan.record = etcdv1.SnapshotRecoveryStatus{
		Snapshot: s.Name, Revision: s.Status.Revision, ReplacedClusterID: in.clusterID, Restore: *restore,
	}
	plan.key = snapshotRecoveryKey(s.Name, s.Status.Revision)
	names := slices.SortedFunc(slices.Values(in.names), byOrdinal)
	plan.loss = fmt.Sprintf("%s (taken from member %s of etcd cluster %s): writes after revision %d are lost; the members have: %s; the data of every member [%s] is discarded (their PVCs kept, no member's, until deleted; new members under new names) and the cluster comes back under a new cluster ID, one member restored from the snapshot, the others joining as learners",
		plan.key, s.Status.Member, s.Status.ClusterID, s.Status.Revision, memberRevisions(in.survivors, s.Status.Revision), strings.Join(names, ", "))
	plan.record.Loss = plan.loss
	return plan
}

// snapshotRecoveryKey begins the loss statement of a recovery from an EtcdSnapshot.
func snapshotRecoveryKey(name string, revision int64) string {
	return fmt.Sprintf("%s%d", etcdv1.SnapshotRecoveryKeyPrefix(name), revision)
}

// memberRevisions says, as far as the members answer, how much each has beyond the snapshot.
func memberRevisions(survivors []survivor, snapRev int64) string {
	if len(survivors) == 0 {
		return "nothing known (no member answers)"
	}
	parts := make([]string, 0, len(survivors))
	for _, s := range survivors {
		switch {
		case !s.answered:
			parts = append(parts, s.name+" unknown (not answering)")
		case s.status.Revision > snapRev:
			parts = append(parts, fmt.Sprintf("%s revision %d (%d revisions after the snapshot are lost)", s.name, s.status.Revision, s.status.Revision-snapRev))
		default:
			parts = append(parts, fmt.Sprintf("%s revision %d (nothing after the snapshot)", s.name, s.status.Revision))
		}
	}
	return strings.Join(parts, ", ")
}

// recoverFromSnapshot carries out a requested recovery from an EtcdSnapshot, one act per
// reconcile, each looked for before it is done. Until status.snapshotRecovery is written
// nothing is changed (a refusal, or the statement of what is lost, and only once that is in
// status, the record itself). With the record: every member is marked to discard its data
// and deleted, every Pod stopped, every PVC deleted; then the cluster ID is cleared and a
// new token set, so that bootstrap founds a new cluster whose first member restores the
// snapshot (foundingCount, bootstrap); once that cluster answers the request and the record
// go. It runs before every other step and returns true while it owns the cluster.
func (r *Reconciler) recoverFromSnapshot(ctx context.Context, c *etcdv1.EtcdCluster, v *clusterView) (bool, error) {
	if rec := c.Status.SnapshotRecovery; rec != nil {
		return r.continueSnapshotRecovery(ctx, c, v, rec)
	}
	requested := c.Annotations[etcdv1.AnnotationRecoverFromSnapshot]
	if requested == "" {
		return false, nil
	}
	if v.reachable || c.Status.ClusterID == "" {
		return true, r.dropSnapshotRecoveryRequest(ctx, c, requested)
	}
	if other := c.Annotations[etcdv1.AnnotationRecoverFrom]; other != "" {
		return true, r.refuseRecovery(ctx, c, requested, fmt.Sprintf("%s=%s asks for a recovery from a member as well: remove one of the two requests", etcdv1.AnnotationRecoverFrom, other))
	}
	snap := &etcdv1.EtcdSnapshot{}
	if err := r.reader().Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: requested}, snap); apierrors.IsNotFound(err) {
		snap = nil
	} else if err != nil {
		return true, err
	}
	plan := planSnapshotRecovery(snapshotRecoveryInput{
		requested: requested, snapshot: snap, cluster: c.Name, clusterID: c.Status.ClusterID,
		allowOther: c.Annotations[etcdv1.AnnotationAllowOtherClusterSnapshot] == "true",
		tmpfs:      c.Spec.Storage.Medium == etcdv1.StorageMediumMemory,
		survivors:  v.survivors, names: knownMemberNames(c, v),
	})
	if plan.refusal != "" {
		return true, r.refuseRecovery(ctx, c, requested, plan.refusal)
	}
	// The status fields say the file was good when it was taken; only reading it says it
	// still is (a bucket lifecycle rule, an overwrite, rotated credentials): no loss is
	// stated, and nothing discarded, before this very file was read whole.
	if err := r.verifySnapshotFile(ctx, c, snap, plan); err != nil {
		return true, err
	}
	if !saidInStatus(c, plan.key) {
		r.event(ctx, c, corev1.EventTypeWarning, etcdv1.ReasonQuorumRecovery, "RecoverQuorum", "%s", plan.loss)
		return true, waitFor(etcdv1.ReasonQuorumRecovery, "%s", plan.loss)
	}
	if why, err := r.holdSnapshot(ctx, c, snap.Name); err != nil || why != "" {
		if err != nil {
			return true, err
		}
		return true, r.refuseRecovery(ctx, c, requested, why+": name another snapshot")
	}
	// The snapshot now holds its file until the rebuilt cluster answers (holdSnapshot). The
	// record is the point of no return: from here on nothing is checked again (the members
	// it stops could not answer a check, and a member deleted without a finalizer leaves no
	// trace to tell a begun recovery from one that has not), and everything the rest needs
	// is in it. The quorum was lost in this very look. Written once: with the
	// resourceVersion read, so that a look at a cache not yet showing the record (the next
	// one, often) cannot write it again over the first, with another start time and a loss
	// recomputed from what the members answer then.
	before := c.DeepCopy()
	rec := plan.record
	rec.StartTime = &metav1.Time{Time: r.now().Truncate(time.Second)}
	c.Status.SnapshotRecovery = &rec
	if err := r.Status().Patch(ctx, c, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return true, err
	}
	return true, waitFor(etcdv1.ReasonQuorumRecovery, "began; %s", plan.loss)
}

// dropSnapshotRecoveryRequest removes a request for a recovery from a snapshot from a cluster
// that has a quorum (or has never formed): a request left on a healthy cluster would restore
// an old snapshot the next time the quorum is lost, so it goes, and an event says why.
func (r *Reconciler) dropSnapshotRecoveryRequest(ctx context.Context, c *etcdv1.EtcdCluster, requested string) error {
	patch := client.MergeFrom(c.DeepCopy())
	delete(c.Annotations, etcdv1.AnnotationRecoverFromSnapshot)
	if err := r.Patch(ctx, c, patch); err != nil {
		return err
	}
	r.event(ctx, c, corev1.EventTypeWarning, etcdv1.ReasonRecoveryRefused, "RecoverQuorum", "not recovering from EtcdSnapshot %s: etcd has a quorum (or has never formed), nothing was changed; %s removed", requested, etcdv1.AnnotationRecoverFromSnapshot)
	return nil
}

// refuseRecovery reports a refused recovery from a snapshot; nothing is changed.
func (r *Reconciler) refuseRecovery(ctx context.Context, c *etcdv1.EtcdCluster, requested, why string) error {
	if !saidInStatus(c, why) {
		r.event(ctx, c, corev1.EventTypeWarning, etcdv1.ReasonRecoveryRefused, "RecoverQuorum", "not recovering: %s", why)
	}
	return waitFor(etcdv1.ReasonRecoveryRefused, "the quorum is lost and %s=%s asks for a recovery, but: %s", etcdv1.AnnotationRecoverFromSnapshot, requested, why)
}

// continueSnapshotRecovery takes the next act of a recovery the record says has begun.
func (r *Reconciler) continueSnapshotRecovery(ctx context.Context, c *etcdv1.EtcdCluster, v *clusterView, rec *etcdv1.SnapshotRecoveryStatus) (bool, error) {
	current := c.Status.ClusterID
	if v.reachable {
		current = etcd.FormatID(v.clusterID)
	}
	switch {
	case current == "":
		// The old members are gone: bootstrap founds the new cluster from the snapshot.
		return false, nil
	case current != rec.ReplacedClusterID:
		return true, r.finishSnapshotRecovery(ctx, c, rec, current)
	}
	did, err := r.discardAct(ctx, c, v, rec)
	if err != nil {
		return true, err
	}
	return true, waitFor(etcdv1.ReasonQuorumRecovery, "%s; %s", did, rec.Loss)
}

// recoverFromSnapshotStep is recoverFromSnapshot in step's first list.
func (r *Reconciler) recoverFromSnapshotStep(ctx context.Context, c *etcdv1.EtcdCluster, v *clusterView, _ int) (bool, error) {
	return r.recoverFromSnapshot(ctx, c, v)
}

// discardAct makes the next act of taking the old cluster down: mark and delete a member,
// stop a Pod, delete a PVC, and, once nothing of the old cluster is left (read live), clear
// the cluster ID so that bootstrap founds the new one.
func (r *Reconciler) discardAct(ctx context.Context, c *etcdv1.EtcdCluster, v *clusterView, rec *etcdv1.SnapshotRecoveryStatus) (string, error) {
	if did, err := r.discardMember(ctx, c, v, rec); did != "" || err != nil {
		return did, err
	}
	if pod := unstoppedPod(v, ""); pod != nil {
		if !pod.DeletionTimestamp.IsZero() {
			return waitingToStop(pod), nil
		}
		deleted, err := r.deletePod(ctx, pod)
		if deleted {
			r.event(ctx, c, corev1.EventTypeWarning, etcdv1.ReasonRecoveryStopsMember, "RecoverQuorum", "stopping member %s (Pod %s): the cluster is rebuilt from EtcdSnapshot %s", pod.Labels[etcdv1.LabelMember], pod.Name, rec.Snapshot)
		}
		return "stopping member " + pod.Labels[etcdv1.LabelMember], err
	}
	if len(v.members) > 0 {
		return "waiting for the members to let go of their data", nil
	}
	if did, err := r.discardLeftovers(ctx, c, rec); did != "" || err != nil {
		return did, err
	}
	before := c.DeepCopy()
	c.Status.ClusterID = ""
	c.Status.ClusterToken = recoveryToken(c, rec)
	if err := r.Status().Patch(ctx, c, client.MergeFrom(before)); err != nil {
		return "", err
	}
	r.event(ctx, c, corev1.EventTypeWarning, etcdv1.ReasonRestoringSnapshot, "RecoverQuorum", "the old members are gone: founding a new cluster from EtcdSnapshot %s (revision %d)", rec.Snapshot, rec.Revision)
	return "founding the new cluster from the snapshot", nil
}

// discardMember marks the next member to discard its data and deletes it; "" when every
// member is marked and going. A member already going without the mark (a removal the lost
// quorum could not take, a deletion by hand) is marked too, so that its finalizer lets go
// without etcd.
func (r *Reconciler) discardMember(ctx context.Context, c *etcdv1.EtcdCluster, v *clusterView, rec *etcdv1.SnapshotRecoveryStatus) (string, error) {
	for _, m := range v.members {
		if m.Annotations[etcdv1.AnnotationDiscard] == "true" && !m.DeletionTimestamp.IsZero() {
			continue
		}
		if err := r.markWithAndDelete(ctx, c, m, failpoint.AfterDiscardMark, etcdv1.AnnotationDiscard); err != nil {
			return "", err
		}
		r.eventAbout(ctx, c, m, corev1.EventTypeWarning, etcdv1.ReasonRecoveryRemovesMember, "RecoverQuorum", "discarding member %s and its data: the cluster is rebuilt from EtcdSnapshot %s", m.Name, rec.Snapshot)
		return "discarding member " + m.Name, nil
	}
	return "", nil
}

// discardLeftovers keeps a PVC of the cluster that no member took with it as discarded data
// (retention.MarkDiscarded), or says what is still going; "" when nothing is left. Read live: a PVC
// with the old cluster's data must be marked before the new members are named (foundingNames
// skips the names of kept PVCs), or a member of its name would start on it.
func (r *Reconciler) discardLeftovers(ctx context.Context, c *etcdv1.EtcdCluster, rec *etcdv1.SnapshotRecoveryStatus) (string, error) {
	sel := []client.ListOption{client.InNamespace(c.Namespace), client.MatchingLabels{etcdv1.LabelCluster: c.Name}}
	pvcs := &corev1.PersistentVolumeClaimList{}
	if err := r.reader().List(ctx, pvcs, sel...); err != nil {
		return "", err
	}
	var left []string
	for i := range pvcs.Items {
		pvc := &pvcs.Items[i]
		if !pvcOfCluster(pvc, c) || retention.DiscardedData(pvc) {
			continue // labelled as ours, but not ours to touch (pvcOfCluster); or kept already
		}
		left = append(left, "PVC "+pvc.Name)
		if !pvc.DeletionTimestamp.IsZero() {
			continue
		}
		patch := client.MergeFromWithOptions(pvc.DeepCopy(), client.MergeFromWithOptimisticLock{})
		retention.MarkDiscarded(c, pvc, r.now())
		if err := r.Patch(ctx, pvc, patch); client.IgnoreNotFound(err) != nil {
			return "", err
		}
		r.event(ctx, c, corev1.EventTypeWarning, etcdv1.ReasonRecoveryKeepsData, "RecoverQuorum", "kept PVC %s as discarded data (%s), no member's: the cluster is rebuilt from EtcdSnapshot %s", pvc.Name, etcdv1.AnnotationDiscardedByRecovery, rec.Snapshot)
		return "kept PVC " + pvc.Name + " as discarded data", nil
	}
	pods := &corev1.PodList{}
	if err := r.reader().List(ctx, pods, sel...); err != nil {
		return "", err
	}
	for _, p := range pods.Items {
		left = append(left, "Pod "+p.Name)
	}
	if len(left) > 0 {
		return "waiting for " + strings.Join(left, ", ") + " to go", nil
	}
	return "", nil
}

// pvcOfCluster says whether a PVC carrying cluster c's label holds the data of the member
// it names, by the test the member's ensurePVC applies before using a PVC
// (retention.PVCOfMember): a label alone does not make another application's PVC ours to
// delete.
func pvcOfCluster(pvc *corev1.PersistentVolumeClaim, c *etcdv1.EtcdCluster) bool {
	return retention.PVCOfMember(pvc, c, pvcMember(pvc))
}

// recoveryToken is the new cluster's --initial-cluster-token: new member IDs and a new
// cluster ID, so nothing of the old cluster can ever join it. Derived from the record, so a
// repeated act writes the same.
func recoveryToken(c *etcdv1.EtcdCluster, rec *etcdv1.SnapshotRecoveryStatus) string {
	uid := string(c.UID)
	if len(uid) > 8 {
		uid = uid[:8]
	}
	var started int64
	if rec.StartTime != nil {
		started = rec.StartTime.Unix()
	}
	return fmt.Sprintf("%s-%s-r%d", c.Name, uid, started)
}

// finishSnapshotRecovery, once the new cluster answered: the request goes first (with the
// record still there, a crash in between finishes next time), then the record.
func (r *Reconciler) finishSnapshotRecovery(ctx context.Context, c *etcdv1.EtcdCluster, rec *etcdv1.SnapshotRecoveryStatus, clusterID string) error {
	if _, ok := c.Annotations[etcdv1.AnnotationRecoverFromSnapshot]; ok {
		patch := client.MergeFrom(c.DeepCopy())
		delete(c.Annotations, etcdv1.AnnotationRecoverFromSnapshot)
		delete(c.Annotations, etcdv1.AnnotationAllowOtherClusterSnapshot)
		return r.Patch(ctx, c, patch)
	}
	before := c.DeepCopy()
	c.Status.SnapshotRecovery = nil
	if err := r.Status().Patch(ctx, c, client.MergeFrom(before)); err != nil {
		return err
	}
	r.event(ctx, c, corev1.EventTypeNormal, etcdv1.ReasonQuorumRecovered, "RecoverQuorum", "the cluster answers again as etcd cluster %s, restored from EtcdSnapshot %s (revision %d); members are added as learners up to %d",
		clusterID, rec.Snapshot, rec.Revision, ptrOr(c.Spec.Replicas, 3))
	return nil
}
