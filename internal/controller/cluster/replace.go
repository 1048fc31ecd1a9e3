package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller/children/retention"
	"github.com/quorumkeeper/etcd-operator/internal/controller/kit"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
	"github.com/quorumkeeper/etcd-operator/internal/failpoint"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// reader reads around the cache: a decision that costs a member's data is confirmed live.
func (r *Reconciler) reader() client.Reader { return kit.Live(r.APIReader, r.Client) }

// rebuildFromPVCs recreates, while etcd cannot be reached, the EtcdMember of every PVC that
// records a member ID of this cluster and has no EtcdMember: after `kubectl delete
// etcdmembers --all` (or of a majority) no Pod runs and nothing answers, but the PVCs say
// where each member's data lives. Each member comes back with its name, its data and its ID
// (memberFromPVC).
func (r *Reconciler) rebuildFromPVCs(ctx context.Context, c *etcdv1.EtcdCluster, v *clusterView, replicas int) (bool, error) {
	if v.reachable || c.Status.ClusterID == "" {
		return false, nil
	}
	var rebuilt []string
	for _, name := range knownMemberNames(c, v) {
		if v.pvcs[name] == nil || !needsMemberFromPVC(memberNamed(v.members, name)) {
			continue
		}
		// Live: a PVC the cache still shows may be one a removal has just deleted.
		pvc := &corev1.PersistentVolumeClaim{}
		if err := r.reader().Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: v.pvcs[name].Name}, pvc); client.IgnoreNotFound(err) != nil {
			return true, err
		} else if err != nil || !rebuildable(c, pvc) {
			continue
		}
		m, err := r.memberFromPVC(ctx, c, memberNamed(v.members, name), pvc, c.Status.ClusterID, lastRole(c, name), replicas == 0)
		if err != nil {
			return true, err
		}
		failpoint.Crash(c, failpoint.AfterRebuildMember)
		r.eventAbout(ctx, c, m, corev1.EventTypeWarning, etcdv1.ReasonMemberRebuilt, "RecreateMember",
			"etcd does not answer and EtcdMember %s was gone: rebuilt it from its PVC as member %s, with its data", name, m.Status.MemberID)
		rebuilt = append(rebuilt, name)
	}
	return len(rebuilt) > 0, nil
}

// needsMemberFromPVC: no EtcdMember of the PVC's member, or one that memberFromPVC created and
// a crash kept from getting its member ID (it would wait forever to be added to etcd).
func needsMemberFromPVC(m *etcdv1.EtcdMember) bool {
	return m == nil || (m.Status.MemberID == "" && m.DeletionTimestamp.IsZero() &&
		m.Spec.Bootstrap.InitialClusterState == etcdv1.InitialClusterStateExisting)
}

// memberFromPVC recreates the EtcdMember whose data pvc holds (or finishes one an earlier
// attempt created, have), under its name and with the member ID recorded on the PVC. Its Pod
// names only itself in its initial cluster: etcd starts from the data, and refuses to start on
// an empty directory. Both acts look first, so a crash between them is finished next time.
func (r *Reconciler) memberFromPVC(ctx context.Context, c *etcdv1.EtcdCluster, have *etcdv1.EtcdMember, pvc *corev1.PersistentVolumeClaim,
	clusterID string, role etcdv1.MemberRole, dormant bool) (*etcdv1.EtcdMember, error) {
	m := have
	if m == nil {
		name := pvcMember(pvc)
		m = r.newMember(c, name, etcdv1.MemberBootstrap{
			InitialCluster: specs.InitialCluster(c, []string{name}), InitialClusterState: etcdv1.InitialClusterStateExisting,
			ClusterToken: c.Status.ClusterToken,
		})
		m.Spec.Dormant = dormant
		m.Spec.Adopted = specs.AdoptionOf(pvc) // a member adopted from another operator keeps its data where it was
		if err := r.createMember(ctx, c, m); err != nil {
			return nil, err
		}
	}
	patch := client.MergeFrom(m.DeepCopy())
	m.Status.MemberID, m.Status.ClusterID, m.Status.Role = pvc.Annotations[etcdv1.AnnotationMemberID], clusterID, role
	return m, r.Status().Patch(ctx, m, patch)
}

// rebuildable: the PVC holds a member's data of this very cluster. Not the data of a member a
// recovery discarded: a recovery from a member keeps the cluster ID, so that member would
// come back into the recovered cluster under its old ID, with the old membership in its data.
func rebuildable(c *etcdv1.EtcdCluster, pvc *corev1.PersistentVolumeClaim) bool {
	if !pvc.DeletionTimestamp.IsZero() || pvc.Annotations[etcdv1.AnnotationMemberID] == "" || retention.DiscardedData(pvc) {
		return false
	}
	cid := pvc.Annotations[etcdv1.AnnotationClusterID]
	return cid == "" || cid == c.Status.ClusterID
}

// lastRole is the member's role in the last status, voter when unknown.
func lastRole(c *etcdv1.EtcdCluster, name string) etcdv1.MemberRole {
	for _, m := range c.Status.Members {
		if m.Name == name && m.Role != "" {
			return m.Role
		}
	}
	return etcdv1.RoleVoter
}

// replaceDamaged replaces a member whose data is lost or unusable (planReplacement): it is
// marked for removal and its EtcdMember deleted; the member's finalizer projects the quorum
// again, removes it from etcd and deletes its PVC; scaling then adds a fresh member, with a
// new name, ID and PVC, as a learner. Refused, and reported, while the quorum would not hold.
func (r *Reconciler) replaceDamaged(ctx context.Context, c *etcdv1.EtcdCluster, v *clusterView) (bool, error) {
	plan := planReplacement(v.facts(c), v.etcdMembers, v.healthy)
	if plan == nil {
		return false, nil
	}
	if plan.refusal != "" {
		return false, r.refuseReplacement(ctx, c, memberNamed(v.members, plan.member),
			fmt.Sprintf("member %s must be replaced (%s), but not now: %s", plan.member, plan.why, plan.refusal))
	}
	// The replacement ends in a new learner: refused before the damaged member goes on a
	// patch that cannot promote it safely.
	if err := membershipBlocked(wantVersion(c), v.runningVersions()); err != nil {
		return false, err
	}
	m := memberNamed(v.members, plan.member)
	if still, err := r.stillDamaged(ctx, c, v, m); !still || err != nil {
		return false, err
	}
	r.eventAbout(ctx, c, m, corev1.EventTypeWarning, etcdv1.ReasonMemberReplacing, "ReplaceMember",
		"replacing member %s (%s): %s; a new member with a new ID takes its place", m.Name, m.Status.MemberID, plan.why)
	return true, r.markAndDelete(ctx, c, m, failpoint.AfterReplaceMark)
}

// stillDamaged looks at the member's PVC and Pod again, live: a cache that has not seen them
// yet must not cost a member its data. A member the look did not ask, its cached Pod saying
// etcd did not run, is taken for down only while its Pod read now says so too (startedAgain).
func (r *Reconciler) stillDamaged(ctx context.Context, c *etcdv1.EtcdCluster, v *clusterView, m *etcdv1.EtcdMember) (bool, error) {
	live := *v
	live.members = []*etcdv1.EtcdMember{m}
	live.pvcs, live.pods = map[string]*corev1.PersistentVolumeClaim{}, map[string]*corev1.Pod{}
	key := types.NamespacedName{Namespace: m.Namespace, Name: m.Name}
	pvc := &corev1.PersistentVolumeClaim{}
	if err := r.reader().Get(ctx, types.NamespacedName{Namespace: m.Namespace, Name: specs.PVCName(m)}, pvc); err == nil {
		live.pvcs[m.Name] = pvc
	} else if !apierrors.IsNotFound(err) {
		return false, err
	}
	pod := &corev1.Pod{}
	if err := r.reader().Get(ctx, key, pod); err == nil {
		live.pods[m.Name] = pod
	} else if !apierrors.IsNotFound(err) {
		return false, err
	}
	if startedAgain(v, c, m, live.pods[m.Name]) {
		return false, nil
	}
	return damage(live.facts(c)[0]) != "", nil
}

// startedAgain: the look did not ask m, its Pod as cached saying etcd did not run, and its Pod
// read now says etcd runs again. Whether it serves on its data is for the next look to ask,
// which the Pod's change brings: a member that exited once and serves again has its data.
func startedAgain(v *clusterView, c *etcdv1.EtcdCluster, m *etcdv1.EtcdMember, livePod *corev1.Pod) bool {
	em, ok := v.etcdMemberFor(c, m)
	return ok && v.stopped[em.ID] && !etcdStopped(m, livePod)
}

// markAndDelete marks a member for removal and deletes its EtcdMember; only with the mark
// does its finalizer take it out of etcd and delete its PVC. step is the failpoint between.
func (r *Reconciler) markAndDelete(ctx context.Context, c *etcdv1.EtcdCluster, m *etcdv1.EtcdMember, step string) error {
	return r.markWithAndDelete(ctx, c, m, step, etcdv1.AnnotationRemove)
}

// markWithAndDelete sets each annotation of marks to "true" on a member, in one write unless
// they are all there, then deletes its EtcdMember: the marks tell its finalizer what becomes
// of the member, so they are written first, and a crash between the two (step is the
// failpoint there) leaves a marked member that the next look deletes. Deleting a member
// already going changes nothing.
func (r *Reconciler) markWithAndDelete(ctx context.Context, c *etcdv1.EtcdCluster, m *etcdv1.EtcdMember, step string, marks ...string) error {
	if slices.ContainsFunc(marks, func(mark string) bool { return m.Annotations[mark] != "true" }) {
		patch := client.MergeFrom(m.DeepCopy())
		if m.Annotations == nil {
			m.Annotations = map[string]string{}
		}
		for _, mark := range marks {
			m.Annotations[mark] = "true"
		}
		if err := r.Patch(ctx, m, patch); err != nil {
			return err
		}
	}
	failpoint.Crash(c, step)
	if err := r.Delete(ctx, m); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}

// keptData is the PVC of a voter etcd knows with no EtcdMember, when it still has the
// voter's data: it exists (read live), is not being deleted and records this member's ID (or
// none yet). Nil when the data is gone; a tmpfs member's data went with its Pod.
func (r *Reconciler) keptData(ctx context.Context, c *etcdv1.EtcdCluster, em etcd.Member) (*corev1.PersistentVolumeClaim, error) {
	if c.Spec.Storage.Medium == etcdv1.StorageMediumMemory {
		return nil, nil
	}
	pvc, err := memberPVC(ctx, r.reader(), c.Namespace, em.Name)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	id := pvc.Annotations[etcdv1.AnnotationMemberID]
	if !pvc.DeletionTimestamp.IsZero() || (id != "" && id != em.IDHex()) || retention.DiscardedData(pvc) {
		return nil, nil
	}
	return pvc, nil
}

// removeDeadVoter takes a voter whose data is gone out of etcd, when the voters left keep a
// healthy quorum; scaling then adds a new member in its place.
func (r *Reconciler) removeDeadVoter(ctx context.Context, c *etcdv1.EtcdCluster, v *clusterView, em etcd.Member) (bool, error) {
	if ok, why := kit.RemovalVerdict(v.etcdMembers, v.healthy, em.ID); !ok {
		return false, r.refuseReplacement(ctx, c, nil,
			fmt.Sprintf("voter %s (%s) has no EtcdMember and no data left, but it cannot be removed now: %s", em.Name, em.IDHex(), why))
	}
	if err := v.etcd.Remove(ctx, em.ID); err != nil && !errors.Is(err, etcd.ErrMemberNotFound) {
		return true, fmt.Errorf("removing voter %s whose data is gone: %w", em.Name, err)
	}
	failpoint.Crash(c, failpoint.AfterDeadVoterRemove)
	r.event(ctx, c, corev1.EventTypeWarning, etcdv1.ReasonDeadMemberRemoved, "RemoveMember",
		"removed voter %s (%s) from etcd: its EtcdMember and its data are gone; a new member will take its place", em.Name, em.IDHex())
	return true, nil
}

// refuseReplacement reports a replacement the quorum cannot afford now: Progressing says
// ReplacementRefused, and a Warning event is recorded when the refusal begins.
func (r *Reconciler) refuseReplacement(ctx context.Context, c *etcdv1.EtcdCluster, related *etcdv1.EtcdMember, msg string) error {
	if prev := meta.FindStatusCondition(c.Status.Conditions, etcdv1.ConditionProgressing); prev == nil || prev.Reason != etcdv1.ReasonReplacementRefused {
		var rel client.Object
		if related != nil {
			rel = related
		}
		r.eventAbout(ctx, c, rel, corev1.EventTypeWarning, etcdv1.ReasonReplacementRefused, "ReplaceMember", "%s", msg)
	}
	return waitFor(etcdv1.ReasonReplacementRefused, "%s", msg)
}
