package cluster

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/etcdversion"
)

// An upgrade moves one member at a time to spec.version: the cluster controller writes the
// new version into one EtcdMember's spec, which makes that member's Pod outdated, and the
// rolling restart (rollOutdatedPods) restarts it, leadership moved away first. The next
// member is moved only once every voter is healthy, every member runs the version its spec
// names (etcd says so, not the spec) and has applied what the leader had applied. Everything
// the upgrade knows lives in the EtcdMembers' specs and in etcd, so an operator that dies in
// the middle resumes where it was.

// maxApplyLag is how many entries a restarted member may be behind the leader's applied
// index and still count as caught up: under a steady write load the two never meet exactly.
const maxApplyLag = 100

// upgradeMember is what the upgrade decision needs to know of one member.
type upgradeMember struct {
	name     string
	spec     string // the version its Pod is built from
	running  string // the version etcd reports; "" when it does not answer
	healthy  bool
	leader   bool
	applyLag uint64 // entries behind the leader's applied index
	storage  string // the storage version etcd reports (3.6 and later); "" otherwise
}

// planUpgrade picks the member to move to target next: "" and nil when none is left to move,
// a kit.Waiting when the cluster is not ready for the next step. Followers go before the
// leader.
func planUpgrade(target string, members []upgradeMember) (string, error) {
	pending := pendingMembers(target, members)
	if len(pending) == 0 {
		return "", nil
	}
	if err := upgradeBlocked(target, members); err != nil {
		return "", err
	}
	if name := movedBeyondTarget(target, pending); name != "" {
		return name, nil
	}
	return nextToMove(target, members, pending, etcdv1.ReasonUpgrading, "upgrade")
}

// pendingMembers are the members whose spec does not name target yet.
func pendingMembers(target string, members []upgradeMember) []upgradeMember {
	var pending []upgradeMember
	for _, m := range members {
		if m.spec != target {
			pending = append(pending, m)
		}
	}
	return pending
}

// nextToMove is the roll of a version change, up or down: the next pending member, followers
// before the leader, once every member is healthy, runs the version its spec names and has
// caught up with the leader; else a kit.Waiting with reason that says which member the change
// (what, "upgrade" or "downgrade") waits for.
func nextToMove(target string, members, pending []upgradeMember, reason, what string) (string, error) {
	if err := notSettled(target, members, reason, what); err != nil {
		return "", err
	}
	for _, m := range pending {
		if !m.leader {
			return m.name, nil
		}
	}
	return pending[0].name, nil
}

// notSettled is the kit.Waiting of the first member that keeps a version change from its
// next step: unhealthy, not running the version its spec names, or behind the leader.
func notSettled(target string, members []upgradeMember, reason, what string) error {
	for _, m := range members {
		switch {
		case !m.healthy:
			return waitFor(reason, "%s to %s waits: member %s is not healthy", what, target, m.name)
		case m.spec == target && m.running != m.spec:
			return waitFor(reason, "%s to %s waits for member %s to run %s (it reports %q)", what, target, m.name, m.spec, m.running)
		case m.applyLag > maxApplyLag:
			return waitFor(reason, "%s to %s waits for member %s to catch up: %d entries behind the leader", what, target, m.name, m.applyLag)
		}
	}
	return nil
}

// movedBeyondTarget names a member whose spec names a newer version than target and which
// does not run it: spec.version was set back before that member came up on the new release
// (one with no image, or that crash-loops). It goes back first, whatever the health of the
// others: it serves nothing, and it gets a Pod it can run only once its EtcdMember names the
// version (the member controller then replaces its Pod, replaceStuckPod). Waiting for its
// health, as the next step of an upgrade does, would wait forever.
func movedBeyondTarget(target string, pending []upgradeMember) string {
	want, _ := etcdversion.Parse(target)
	for _, m := range pending {
		if spec, ok := etcdversion.Parse(m.spec); ok && want.Less(spec) && m.running != m.spec {
			return m.name
		}
	}
	return ""
}

// upgradeBlocked refuses what etcd does not support, whatever the spec's history: a target
// older than a running member, more than one minor above the oldest running member, or a
// minor from a patch of the minor before that etcd does not upgrade from (3.6 needs 3.5.26,
// 3.7 needs 3.6.11: etcdversion.UpgradeFloor). The CRD refuses the first two changes of
// spec.version; this catches two changes made before the first one finished, and the third,
// which only the running versions tell.
func upgradeBlocked(target string, members []upgradeMember) error {
	want, ok := etcdversion.Parse(target)
	if !ok {
		return waitFor(etcdv1.ReasonUpgradeBlocked, "spec.version %q is no X.Y.Z version", target)
	}
	floor, hasFloor := etcdversion.UpgradeFloor(want)
	for _, m := range members {
		running, ok := etcdversion.Parse(m.running)
		if !ok {
			continue
		}
		switch {
		case want.Less(running):
			return waitFor(etcdv1.ReasonUpgradeBlocked, "member %s runs %s, newer than spec.version %s: etcd goes down only a whole minor, not to an older patch; set spec.version to %s or newer", m.name, running, want, running)
		case want.Minor > running.Minor+1:
			return waitFor(etcdv1.ReasonUpgradeBlocked, "member %s runs %s: etcd upgrades one minor at a time, %s is out of reach; set spec.version to the newest 3.%d patch and let it finish first", m.name, running, want, running.Minor+1)
		case hasFloor && running.SameMinor(floor) && running.Less(floor):
			return waitFor(etcdv1.ReasonUpgradeBlocked, "member %s runs %s: etcd requires %s or later on every member before %d.%d; set spec.version to %s or a newer %d.%d patch and let it finish first", m.name, running, floor, want.Major, want.Minor, floor, floor.Major, floor.Minor)
		}
	}
	return nil
}

// upgradeNextMember takes the next step of a change of spec.version, when the cluster is ready
// for it: moves the next member to it, up or down, or enables or cancels etcd's downgrade
// (planVersion).
func (r *Reconciler) upgradeNextMember(ctx context.Context, c *etcdv1.EtcdCluster, v *clusterView) (bool, error) {
	active := v.active()
	target := wantVersion(c)
	members := upgradeMembers(c, v, active)
	dg, err := observeDowngrade(ctx, c, v, members)
	if err != nil {
		return false, err
	}
	step, err := planVersion(target, members, dg)
	if err != nil {
		return false, err
	}
	switch step.act {
	case versionEnable:
		return r.enableDowngrade(ctx, c, v, target)
	case versionCancel:
		return r.cancelDowngrade(ctx, c, v, dg, target)
	case versionNone:
		if downgradeDone(c, target, members, dg) {
			r.event(ctx, c, corev1.EventTypeNormal, etcdv1.ReasonDowngraded, "Downgrade", "etcd reports the downgrade done: every member runs %s", target)
		}
		return false, nil
	}
	m := memberNamed(active, step.member)
	from := m.Spec.Version
	patch := client.MergeFrom(m.DeepCopy())
	m.Spec.Version = target
	if err := r.Patch(ctx, m, patch); err != nil {
		return false, err
	}
	if step.downgrade {
		r.eventAbout(ctx, c, m, corev1.EventTypeNormal, etcdv1.ReasonDowngradingMember, "DowngradeMember", "downgrading member %s from %s to %s", m.Name, from, target)
		return true, nil
	}
	r.eventAbout(ctx, c, m, corev1.EventTypeNormal, etcdv1.ReasonUpgradingMember, "UpgradeMember", "upgrading member %s from %s to %s", m.Name, from, target)
	return true, nil
}

// wantVersion is spec.version as EtcdMembers name it: without the leading "v" a user may
// write (v3.5.21 is 3.5.21).
func wantVersion(c *etcdv1.EtcdCluster) string { return etcdversion.Canonical(c.Spec.Version) }

// upgradeMembers reads each member's health, version and applied index from the reconcile's
// look at etcd (observe asked every member for its status, the leader among them): a member
// has caught up when it applied what the leader had applied, give or take maxApplyLag.
func upgradeMembers(c *etcdv1.EtcdCluster, v *clusterView, active []*etcdv1.EtcdMember) []upgradeMember {
	leaderApplied := v.statuses[v.leader].RaftAppliedIndex
	out := make([]upgradeMember, len(active))
	for i, m := range active {
		out[i] = upgradeMember{name: m.Name, spec: m.Spec.Version}
		em, ok := v.etcdMemberFor(c, m)
		if !ok || len(em.ClientURLs) == 0 {
			continue
		}
		out[i].healthy, out[i].leader, out[i].running = v.healthy[em.ID], em.ID == v.leader, v.versions[em.ID]
		out[i].applyLag = ^uint64(0) // a member that did not answer is as far behind as can be
		if st, answered := v.statuses[em.ID]; answered {
			out[i].applyLag = applyLag(st.RaftAppliedIndex, leaderApplied)
			out[i].storage = st.StorageVersion
		}
	}
	return out
}

// applyLag is how far applied is behind leaderApplied.
func applyLag(applied, leaderApplied uint64) uint64 {
	if applied >= leaderApplied {
		return 0
	}
	return leaderApplied - applied
}

// clusterVersion is the lowest version of the members' summaries (what each reports, or last
// reported while it does not answer), or previous when none is known.
func clusterVersion(members []etcdv1.MemberSummary, previous string) string {
	var lowest etcdversion.Version
	found := false
	for _, m := range members {
		ver, ok := etcdversion.Parse(m.Version)
		if ok && (!found || ver.Less(lowest)) {
			lowest, found = ver, true
		}
	}
	if !found {
		return previous
	}
	return lowest.String()
}
