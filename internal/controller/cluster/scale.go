package cluster

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller/kit"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
	"github.com/quorumkeeper/etcd-operator/internal/failpoint"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

func isAlreadyExists(err error) bool { return apierrors.IsAlreadyExists(err) }

// adoptOrphanVoters recreates the EtcdMember of a voter whose EtcdMember was deleted by hand:
// its PVC was kept by the member's finalizer, so the member comes back with its data and ID.
// A voter whose data is gone too (no PVC, or tmpfs) is never started again under its ID: it
// is removed from etcd when the quorum holds without it, and scaling adds a new member.
func (r *Reconciler) adoptOrphanVoters(ctx context.Context, c *etcdv1.EtcdCluster, v *clusterView) (bool, error) {
	for _, em := range v.etcdMembers {
		if em.IsLearner || !em.IsStarted() || v.ownerOf(c, em) != nil || !strings.HasPrefix(em.Name, c.Name+"-") {
			continue
		}
		if memberNamed(v.members, em.Name) != nil {
			return true, waitFor(etcdv1.ReasonScaling, "member %s is going away", em.Name)
		}
		pvc, err := r.keptData(ctx, c, em)
		if err != nil {
			return true, err
		}
		if pvc == nil {
			return r.removeDeadVoter(ctx, c, v, em)
		}
		m := r.newMember(c, em.Name, etcdv1.MemberBootstrap{
			InitialCluster:      specs.InitialCluster(c, []string{em.Name}),
			InitialClusterState: etcdv1.InitialClusterStateExisting,
			ClusterToken:        c.Status.ClusterToken,
		})
		m.Spec.Adopted = specs.AdoptionOf(pvc)
		if err := r.createMember(ctx, c, m); err != nil {
			return true, err
		}
		patch := client.MergeFrom(m.DeepCopy())
		m.Status.MemberID, m.Status.Role, m.Status.ClusterID = em.IDHex(), etcdv1.RoleVoter, etcd.FormatID(v.clusterID)
		if err := r.Status().Patch(ctx, m, patch); err != nil {
			return true, err
		}
		r.eventAbout(ctx, c, m, corev1.EventTypeWarning, etcdv1.ReasonMemberRecreated, "RecreateMember", "recreated EtcdMember %s for voter %s, keeping its data", em.Name, em.IDHex())
		return true, nil
	}
	return false, nil
}

// scale adds or removes one member when every voter is healthy; true when it did.
func (r *Reconciler) scale(ctx context.Context, c *etcdv1.EtcdCluster, v *clusterView, replicas int) (bool, error) {
	if done, err := r.settleRemovalMark(ctx, c, v, replicas); done || err != nil {
		return done && err == nil, err
	}
	active := v.active()
	if len(active) != len(v.members) {
		return false, waitFor(etcdv1.ReasonScaling, "a member is being removed")
	}
	if len(v.learners()) > 0 {
		return false, learnerStarting(c, v)
	}
	if len(active) == replicas {
		return false, nil
	}
	if len(active) < replicas {
		// The new member is promoted only if the larger voter set keeps a healthy quorum;
		// an unhealthy voter does not stop that, so a dead one can be replaced.
		if total, healthy := v.voters(); healthy+1 < etcd.Quorum(total+1) {
			return false, waitFor(etcdv1.ReasonMembersUnhealthy, "not scaling out: %d of %d voters healthy", healthy, total)
		}
		if err := membershipBlocked(wantVersion(c), v.runningVersions()); err != nil {
			return false, err
		}
		return true, r.scaleOut(ctx, c, v)
	}
	return r.scaleIn(ctx, c, v)
}

// scaleOut creates the next member; addPending then adds it to etcd as a learner.
func (r *Reconciler) scaleOut(ctx context.Context, c *etcdv1.EtcdCluster, v *clusterView) error {
	if err := r.viewIsCurrent(ctx, c, v); err != nil {
		return err
	}
	name, err := r.freeName(ctx, c, v)
	if err != nil {
		return err
	}
	initial, err := joiningInitialCluster(v.etcdMembers, name, specs.PeerURL(c, name))
	if err != nil {
		return err
	}
	m := r.newMember(c, name, etcdv1.MemberBootstrap{
		InitialCluster: initial, InitialClusterState: etcdv1.InitialClusterStateExisting,
		ClusterToken: c.Status.ClusterToken,
	})
	if err := r.createMember(ctx, c, m); err != nil {
		return err
	}
	failpoint.Crash(c, failpoint.AfterCreateMember)
	r.eventAbout(ctx, c, m, corev1.EventTypeNormal, etcdv1.ReasonScalingOut, "CreateMember", "scaling out: created member %s", name)
	return nil
}

// joiningInitialCluster is the --initial-cluster of a member about to join: every member etcd
// lists, by name and peer URL, then the new one. A joining etcd fetches the cluster from the
// peers its list names and refuses to start unless its list matches etcd's member for member,
// and the list is written into the EtcdMember once: a member etcd lists without a name (one
// that has not published it since it started, as after a restart out of --force-new-cluster)
// cannot be named, so the new member waits for it rather than get a list it can never join
// with. An empty member list (not read) waits too.
func joiningInitialCluster(members []etcd.Member, name, peerURL string) (string, error) {
	if len(members) == 0 {
		return "", waitFor(etcdv1.ReasonScaling, "not scaling out: etcd's member list is not known")
	}
	known := make([]string, 0, len(members)+1)
	for _, em := range members {
		if !em.IsStarted() || len(em.PeerURLs) == 0 {
			return "", waitFor(etcdv1.ReasonScaling, "not scaling out: member %s has not published its name yet; a new member's initial cluster must name every member", em.IDHex())
		}
		known = append(known, em.Name+"="+em.PeerURLs[0])
	}
	return strings.Join(append(known, name+"="+peerURL), ","), nil
}

// viewIsCurrent reads the EtcdMembers live before one is created or removed: a reconcile
// that starts right after another created or removed a member may see a cache without that
// change, and would create a second member where one was enough (two pending learners, of
// which etcd takes one), or remove a second one where one removal was asked for.
func (r *Reconciler) viewIsCurrent(ctx context.Context, c *etcdv1.EtcdCluster, v *clusterView) error {
	live, err := listMembersFrom(ctx, r.reader(), c)
	if err != nil {
		return err
	}
	if behind := viewBehind(v.members, live); behind != "" {
		return waitFor(etcdv1.ReasonScaling, "%s", behind)
	}
	return nil
}

// viewBehind says how the members a look saw (view) lag those read live: a member created
// that the view lacks, or one going away (gone, being deleted, or marked for removal) that
// the view still has as staying; "" when the view has every such change.
func viewBehind(view, live []*etcdv1.EtcdMember) string {
	for _, m := range live {
		if memberNamed(view, m.Name) == nil {
			return fmt.Sprintf("member %s exists but is not in this reconcile's view yet", m.Name)
		}
	}
	for _, m := range view {
		if l := memberNamed(live, m.Name); !goingAway(m) && (l == nil || goingAway(l)) {
			return fmt.Sprintf("member %s is being removed, which this reconcile's view does not show yet", m.Name)
		}
	}
	return ""
}

// goingAway: the member is being deleted, or marked to be (settleRemovalMark).
func goingAway(m *etcdv1.EtcdMember) bool {
	return !m.DeletionTimestamp.IsZero() || m.Annotations[etcdv1.AnnotationRemove] == "true"
}

// freeName is the lowest ordinal whose name no EtcdMember, etcd member or PVC still uses, so
// a name is never reused while an old member's data exists.
func (r *Reconciler) freeName(ctx context.Context, c *etcdv1.EtcdCluster, v *clusterView) (string, error) {
	discarded := discardedNames(v.discarded)
	for i := 1; ; i++ {
		name := specs.MemberName(c.Name, i)
		// A Pod of that name may be a replaced member's, still terminating; discarded data
		// kept under another PVC name (an adopted member's) keeps its member's name too.
		if memberNamed(v.members, name) != nil || v.etcdMemberNamed(name) || v.pods[name] != nil || discarded[name] {
			continue
		}
		// Read live: the cache holds only PVCs with the operator's label, and a PVC of that
		// name without it (relabelled, or kept from elsewhere) must keep the name taken too.
		err := r.reader().Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: name}, &corev1.PersistentVolumeClaim{})
		if apierrors.IsNotFound(err) {
			return name, nil
		}
		if err != nil {
			return "", err
		}
	}
}

// scaleIn marks the member to remove and deletes its EtcdMember; the member's finalizer
// moves leadership away if needed and removes it from etcd before its data goes. The quorum
// of the smaller voter set must be healthy.
func (r *Reconciler) scaleIn(ctx context.Context, c *etcdv1.EtcdCluster, v *clusterView) (bool, error) {
	victim := v.removalCandidate(c)
	if victim == nil {
		return false, waitFor(etcdv1.ReasonScaling, "no member can be removed safely")
	}
	if err := v.removable(c, victim); err != nil {
		return false, err
	}
	if err := r.viewIsCurrent(ctx, c, v); err != nil {
		return false, err
	}
	if err := r.markAndDelete(ctx, c, victim, failpoint.AfterRemovalMark); err != nil {
		return true, err
	}
	r.eventAbout(ctx, c, victim, corev1.EventTypeNormal, etcdv1.ReasonScalingIn, "RemoveMember", "scaling in: removing member %s", victim.Name)
	return true, nil
}

// removable projects the quorum without m, right before its removal is started.
func (v *clusterView) removable(c *etcdv1.EtcdCluster, m *etcdv1.EtcdMember) error {
	em, ok := v.etcdMemberFor(c, m)
	if !ok {
		return nil
	}
	if ok, why := kit.RemovalVerdict(v.etcdMembers, v.healthy, em.ID); !ok {
		return waitFor(etcdv1.ReasonMembersUnhealthy, "not removing %s: %s", m.Name, why)
	}
	return nil
}

// settleRemovalMark finishes a scale-in the operator died in the middle of: a member marked
// for removal but not deleted is deleted if the cluster is still too large, and unmarked
// otherwise, so that a later deletion by hand cannot be taken for a removal and cost its data.
func (r *Reconciler) settleRemovalMark(ctx context.Context, c *etcdv1.EtcdCluster, v *clusterView, replicas int) (bool, error) {
	for _, m := range v.active() {
		if m.Annotations[etcdv1.AnnotationRemove] != "true" {
			continue
		}
		if len(v.active()) > replicas {
			// The mark may be old: the health it was decided on is not today's.
			if err := v.removable(c, m); err != nil {
				return false, err
			}
			if err := r.Delete(ctx, m); err != nil && !apierrors.IsNotFound(err) {
				return true, err
			}
			r.eventAbout(ctx, c, m, corev1.EventTypeNormal, etcdv1.ReasonScalingIn, "RemoveMember", "scaling in: removing member %s", m.Name)
			return true, nil
		}
		// The mark goes with the one that keeps the data as discarded (a recovery's, which the
		// quorum's return made moot): a member that stays must not lose its data later to it.
		patch := client.MergeFrom(m.DeepCopy())
		delete(m.Annotations, etcdv1.AnnotationRemove)
		delete(m.Annotations, etcdv1.AnnotationDiscardedByRecovery)
		return true, r.Patch(ctx, m, patch)
	}
	return false, nil
}

// removalCandidate prefers a member etcd does not know, then an unhealthy one, then the
// newest follower; the leader goes last.
func (v *clusterView) removalCandidate(c *etcdv1.EtcdCluster) *etcdv1.EtcdMember {
	var follower, leader *etcdv1.EtcdMember
	for i := len(v.members) - 1; i >= 0; i-- {
		m := v.members[i]
		em, ok := v.etcdMemberFor(c, m)
		switch {
		case !ok:
			return m
		case !v.healthy[em.ID]:
			return m
		case em.ID == v.leader:
			leader = m
		case follower == nil:
			follower = m
		}
	}
	if follower != nil {
		return follower
	}
	return leader
}

// learnerStarting is the wait for a learner that promoteLearners passed over because it has
// not started (etcd lists it without a name until its process publishes one). That start
// changes no object the operator watches: while the learner's Pod runs it is a moment away,
// and it is looked for every catchUpPoll; a look a second later cost every learner step of a
// scale-out a second about half the time, the new Pod then missing its next readiness probe
// (a learner is not ready until promoted). Before its Pod runs, the Pod's start wakes the
// cluster, and the look is a second away as for any work in motion.
func learnerStarting(c *etcdv1.EtcdCluster, v *clusterView) error {
	w := kit.Waiting{Reason: etcdv1.ReasonScaling, Message: "a learner is catching up"}
	for _, em := range v.learners() {
		owner := v.ownerOf(c, em)
		if owner == nil {
			continue
		}
		if pod := v.pods[owner.Name]; pod != nil && pod.Status.Phase == corev1.PodRunning {
			w.RetryIn = catchUpPoll
		}
	}
	return w
}
