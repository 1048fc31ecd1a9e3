package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller/kit"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
	"github.com/quorumkeeper/etcd-operator/internal/etcdversion"
)

// A spec.version one minor below what the members run is a downgrade, which etcd makes only
// through its downgrade API (etcdversion's facts): validate the target minor, enable it (the
// cluster version drops to it and every member migrates its data to it), restart the members
// one at a time on the lower release (the upgrade's roll, nextToMove: followers first, the
// leader last), then wait for etcd's leader to end the downgrade once every member runs the
// target. Everything the downgrade knows lives in etcd (its downgrade record, each member's
// version and storage version) and in the EtcdMembers' specs, so a crash at any point resumes
// from what the next look finds: an enabled downgrade to the same minor is not enabled again,
// one to another minor (spec.version set back up) is cancelled and the members go back up
// through the upgrade.
//
// A mixed cluster (some members already on the lower minor, none enabled) is one whose cluster
// version never rose: an upgrade set back half-way, or a downgrade cancelled half-way. etcd
// says such a cluster goes back by replacing binaries alone (its 3.6 upgrade guide,
// "Rollback"), which is what the roll does there, without enabling anything.

// downgradeTimeout bounds one call of etcd's downgrade API.
const downgradeTimeout = 5 * time.Second

// clusterVersionPoll is how often etcd is asked again while it has no cluster version yet
// (etcd.ErrClusterVersionUnknown): its leader decides it every few seconds once the members
// have published themselves, which no object the operator watches reports.
const clusterVersionPoll = time.Second

// clusterVersionUnknown is the wait while etcd has not decided its cluster version: right
// after members start, nothing that acts on the cluster version is sent (an enable sent
// then once made a 3.6.16 member exit with a stack dump).
func clusterVersionUnknown(want etcdversion.Version, err error) error {
	return kit.Waiting{Reason: etcdv1.ReasonDowngrading, RetryIn: clusterVersionPoll,
		Message: fmt.Sprintf("downgrade to %d.%d: etcd has no cluster version yet (members just started): looking again (%v)", want.Major, want.Minor, err)}
}

// downgradeFacts is what etcd says of its downgrade: known is false when no member reported it
// (servers older than 3.6 do not, and it was not asked otherwise).
type downgradeFacts struct {
	known   bool
	enabled bool
	target  etcdversion.Version // the enabled minor, X.Y.0
}

// versionAct is what a version change does next.
type versionAct int

const (
	versionNone   versionAct = iota
	versionMove              // move member to spec.version
	versionEnable            // validate and enable the downgrade to spec.version's minor
	versionCancel            // cancel the enabled downgrade
)

// versionStep is the next act of a version change: its kind, the member to move, and whether
// the move is a downgrade.
type versionStep struct {
	act       versionAct
	member    string
	downgrade bool
}

// planVersion decides the next act of a change of spec.version to target, up or down, from the
// members (what their specs name, what they run, their health) and etcd's downgrade record;
// a kit.Waiting when the cluster is not ready for the next one, or the change cannot be made.
func planVersion(target string, members []upgradeMember, dg downgradeFacts) (versionStep, error) {
	want, ok := etcdversion.Parse(target)
	if !ok {
		return upgradeStep(target, members)
	}
	if dg.enabled && !dg.target.SameMinor(want) {
		return versionStep{act: versionCancel}, nil
	}
	from, anyRunning := newestRunning(members)
	goingDown := anyRunning && from.NewerMinor(want)
	if !dg.enabled && !goingDown {
		return upgradeStep(target, members)
	}
	if goingDown {
		if why := etcdversion.DowngradeRefusal(from, want); why != "" {
			return versionStep{}, waitFor(etcdv1.ReasonDowngradeBlocked, "spec.version %s: %s", want, why)
		}
	}
	return planDowngrade(target, want, members, dg)
}

// planDowngrade is planVersion's course down to want, a minor below what runs or the minor
// of the enabled downgrade: enable it on a settled cluster, roll the members onto want once
// their data migrated, then wait for etcd to end it.
func planDowngrade(target string, want etcdversion.Version, members []upgradeMember, dg downgradeFacts) (versionStep, error) {
	pending := pendingMembers(target, members)
	if !dg.enabled && !anyRunsMinor(members, want) {
		// Every member runs the higher minor: etcd's downgrade is enabled first, on a
		// settled cluster.
		if err := notSettled(target, members, etcdv1.ReasonDowngrading, "downgrade"); err != nil {
			return versionStep{}, err
		}
		return versionStep{act: versionEnable}, nil
	}
	// No member restarts on the lower release before its data is in the lower minor's
	// format (a mixed cluster's is: its cluster version never rose).
	for _, m := range members {
		if sv, ok := etcdversion.Parse(m.storage); ok && !sv.SameMinor(want) {
			return versionStep{}, waitFor(etcdv1.ReasonDowngrading, "downgrade to %s waits for member %s to migrate its data to %d.%d (storage version %s)", target, m.name, want.Major, want.Minor, m.storage)
		}
	}
	if !dg.enabled {
		// A mixed cluster: its cluster version is still the lower minor.
		return downgradeStep(nextToMove(target, members, pending, etcdv1.ReasonDowngrading, "downgrade"))
	}
	if len(pending) == 0 {
		if err := notSettled(target, members, etcdv1.ReasonDowngrading, "downgrade"); err != nil {
			return versionStep{}, err
		}
		return versionStep{}, waitFor(etcdv1.ReasonDowngradeFinishing, "every member runs %s; waiting for etcd to end the downgrade to %d.%d (its leader does once it sees every member on it)", target, want.Major, want.Minor)
	}
	return downgradeStep(nextToMove(target, members, pending, etcdv1.ReasonDowngrading, "downgrade"))
}

// upgradeStep is planUpgrade as a versionStep.
func upgradeStep(target string, members []upgradeMember) (versionStep, error) {
	name, err := planUpgrade(target, members)
	if err != nil || name == "" {
		return versionStep{}, err
	}
	return versionStep{act: versionMove, member: name}, nil
}

// downgradeStep is nextToMove's answer as a versionStep of a downgrade.
func downgradeStep(name string, err error) (versionStep, error) {
	if err != nil || name == "" {
		return versionStep{}, err
	}
	return versionStep{act: versionMove, member: name, downgrade: true}, nil
}

// newestRunning is the newest version a member runs; false when none reports one.
func newestRunning(members []upgradeMember) (etcdversion.Version, bool) {
	var newest etcdversion.Version
	found := false
	for _, m := range members {
		v, ok := etcdversion.Parse(m.running)
		if ok && (!found || newest.Less(v)) {
			newest, found = v, true
		}
	}
	return newest, found
}

func anyRunsMinor(members []upgradeMember, minor etcdversion.Version) bool {
	for _, m := range members {
		if v, ok := etcdversion.Parse(m.running); ok && v.SameMinor(minor) {
			return true
		}
	}
	return false
}

// downgradeFromStatuses is etcd's downgrade record as the members' statuses of the look report
// it, the leader's first (servers from 3.6 on report it; the record is raft's, so any of
// them says the same once it applied it).
func downgradeFromStatuses(v *clusterView) downgradeFacts {
	pick := func(st etcd.Status) downgradeFacts {
		f := downgradeFacts{known: true, enabled: st.Downgrade.Enabled}
		if t, ok := etcdversion.Parse(st.Downgrade.TargetVersion); ok {
			f.target = t.ClusterMinor()
		}
		return f
	}
	if st, ok := v.statuses[v.leader]; ok && st.Downgrade != nil {
		return pick(st)
	}
	for _, m := range v.etcdMembers {
		if st, ok := v.statuses[m.ID]; ok && st.Downgrade != nil {
			return pick(st)
		}
	}
	return downgradeFacts{}
}

// downgradeUnderWay: the last status says a downgrade was going on.
func downgradeUnderWay(c *etcdv1.EtcdCluster) bool {
	cond := meta.FindStatusCondition(c.Status.Conditions, etcdv1.ConditionProgressing)
	return cond != nil && (cond.Reason == etcdv1.ReasonDowngrading || cond.Reason == etcdv1.ReasonDowngradeFinishing)
}

// downgradeRecent: the last status says a downgrade to low's minor was going on, or may just
// have ended.
func downgradeRecent(c *etcdv1.EtcdCluster, low etcdversion.Version) bool {
	return downgradeUnderWay(c) || downgradeJustEnded(c, low)
}

// downgradeJustEnded: the last status, written before this reconcile's look, records a member
// on a newer minor than low, what every member runs now: the last member came up on the
// lower release (faster than a status said Downgrading).
func downgradeJustEnded(c *etcdv1.EtcdCluster, low etcdversion.Version) bool {
	for _, m := range c.Status.Members {
		if v, ok := etcdversion.Parse(m.Version); ok && v.NewerMinor(low) {
			return true
		}
	}
	return false
}

// observeDowngrade is etcd's downgrade record: from the statuses of the look, or, when no
// member reports it (every member runs 3.5 at the end of a downgrade to 3.5) and the last
// status says a downgrade was going on or had a member on a newer minor, from etcd itself: a
// validation of the minor below the cluster's, which changes nothing, is refused with
// ErrDowngradeInProcess while the downgrade is still enabled (etcd 3.5's downgradeValidate
// checks the target, then the record). A cluster that was on 3.5 all along is not asked.
// While etcd has no cluster version yet, which it then answers, the look waits
// (clusterVersionUnknown): nothing is decided on a record etcd could not give.
func observeDowngrade(ctx context.Context, c *etcdv1.EtcdCluster, v *clusterView, members []upgradeMember) (downgradeFacts, error) {
	if f := downgradeFromStatuses(v); f.known || v.etcd == nil {
		return f, nil
	}
	low, ok := lowestRunning(members)
	if !ok || low.Minor == 0 || !downgradeRecent(c, low) {
		return downgradeFacts{}, nil
	}
	probe := etcdversion.Version{Major: low.Major, Minor: low.Minor - 1}
	ctx, cancel := context.WithTimeout(ctx, downgradeTimeout)
	defer cancel()
	_, err := v.etcd.DowngradeValidate(ctx, probe.String())
	switch {
	case err == nil:
		return downgradeFacts{known: true}, nil
	case errors.Is(err, etcd.ErrDowngradeInProcess):
		return downgradeFacts{known: true, enabled: true, target: low.ClusterMinor()}, nil
	case errors.Is(err, etcd.ErrClusterVersionUnknown):
		return downgradeFacts{}, clusterVersionUnknown(low.ClusterMinor(), err)
	}
	return downgradeFacts{}, nil
}

// lowestRunning is the oldest version a member runs; false when none reports one.
func lowestRunning(members []upgradeMember) (etcdversion.Version, bool) {
	var lowest etcdversion.Version
	found := false
	for _, m := range members {
		v, ok := etcdversion.Parse(m.running)
		if ok && (!found || v.Less(lowest)) {
			lowest, found = v, true
		}
	}
	return lowest, found
}

// enableDowngrade validates and enables etcd's downgrade to target's minor; etcd's refusal is
// the DowngradeBlocked message.
func (r *Reconciler) enableDowngrade(ctx context.Context, c *etcdv1.EtcdCluster, v *clusterView, target string) (bool, error) {
	want := etcdversion.MustParse(target).ClusterMinor()
	ctx, cancel := context.WithTimeout(ctx, downgradeTimeout)
	defer cancel()
	if _, err := v.etcd.DowngradeValidate(ctx, want.String()); err != nil {
		return false, refusedDowngrade(want, err)
	}
	cv, err := v.etcd.DowngradeEnable(ctx, want.String())
	if err != nil {
		return false, refusedDowngrade(want, err)
	}
	r.event(ctx, c, corev1.EventTypeNormal, etcdv1.ReasonDowngradeEnabled, "EnableDowngrade", "etcd's downgrade to %d.%d enabled (cluster version %s): members restart on %s one at a time, the leader last", want.Major, want.Minor, cv, target)
	return true, nil
}

// refusedDowngrade is etcd's answer to a validation or an enabling: a downgrade enabled
// meanwhile (a lost answer to an earlier enable) is looked at again, and so is a cluster
// whose version etcd has not decided yet (members just started; the validation comes first
// so that no enable is sent then); anything else etcd refused is shown as it said it, and a
// failed call is retried.
func refusedDowngrade(want etcdversion.Version, err error) error {
	switch {
	case errors.Is(err, etcd.ErrClusterVersionUnknown):
		return clusterVersionUnknown(want, err)
	case errors.Is(err, etcd.ErrDowngradeInProcess):
		return waitFor(etcdv1.ReasonDowngrading, "downgrade to %d.%d: etcd reports a downgrade enabled already; looking again", want.Major, want.Minor)
	case errors.Is(err, etcd.ErrInvalidDowngradeTarget):
		return waitFor(etcdv1.ReasonDowngradeBlocked, "etcd refused the downgrade to %d.%d: %v", want.Major, want.Minor, err)
	}
	return err
}

// cancelDowngrade cancels an enabled downgrade spec.version no longer names: the members then
// go back up through the upgrade.
func (r *Reconciler) cancelDowngrade(ctx context.Context, c *etcdv1.EtcdCluster, v *clusterView, dg downgradeFacts, target string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, downgradeTimeout)
	defer cancel()
	if err := v.etcd.DowngradeCancel(ctx); err != nil && !errors.Is(err, etcd.ErrNoInflightDowngrade) {
		return false, err
	}
	r.event(ctx, c, corev1.EventTypeNormal, etcdv1.ReasonDowngradeCancelled, "CancelDowngrade", "etcd's downgrade to %d.%d cancelled: spec.version is %s", dg.target.Major, dg.target.Minor, target)
	return true, nil
}

// downgradeDone: etcd reports the downgrade over with every member on target's minor, after a
// last status that said it was going on or had a member on a newer minor.
func downgradeDone(c *etcdv1.EtcdCluster, target string, members []upgradeMember, dg downgradeFacts) bool {
	want, ok := etcdversion.Parse(target)
	if !ok || !dg.known || dg.enabled || !downgradeRecent(c, want) {
		return false
	}
	for _, m := range members {
		if v, ok := etcdversion.Parse(m.running); !ok || !v.SameMinor(want) || m.spec != target {
			return false
		}
	}
	return true
}
