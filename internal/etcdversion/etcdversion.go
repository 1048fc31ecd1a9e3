// Package etcdversion is the operator's one home for what it knows about etcd releases:
// parsing a version as users write it, ordering versions, and what a release can and cannot
// do safely (health endpoints, upgrade paths, known membership bugs). It is pure: no
// Kubernetes types, no I/O.
//
// Every fact below names its source: etcd's CHANGELOG-3.5.md / CHANGELOG-3.6.md and its
// source tree at the release tags (etcd-io/etcd).
package etcdversion

import (
	"fmt"
	"strconv"
	"strings"
)

// Version is an etcd release X.Y.Z.
type Version struct{ Major, Minor, Patch int }

// Parse reads X.Y.Z, with or without a leading "v" (etcd's own tags and the operator guide
// write v3.5.21; the operator's API writes 3.5.21): false for anything else.
func Parse(s string) (Version, bool) {
	parts := strings.Split(strings.TrimPrefix(s, "v"), ".")
	if len(parts) != 3 {
		return Version{}, false
	}
	var n [3]int
	for i, p := range parts {
		if p == "" || strings.TrimLeft(p, "0123456789") != "" {
			return Version{}, false
		}
		v, err := strconv.Atoi(p)
		if err != nil {
			return Version{}, false
		}
		n[i] = v
	}
	return Version{n[0], n[1], n[2]}, true
}

// MustParse is Parse for versions written in the code.
func MustParse(s string) Version {
	v, ok := Parse(s)
	if !ok {
		panic(fmt.Sprintf("etcdversion: %q is no X.Y.Z version", s))
	}
	return v
}

// Canonical is s without its leading "v" when s is a version (v3.5.21 -> 3.5.21), else s as
// it is: the form EtcdMembers, images and comparisons use.
func Canonical(s string) string {
	if v, ok := Parse(s); ok {
		return v.String()
	}
	return s
}

// String is X.Y.Z, without a "v".
func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch) }

// Compare is -1, 0 or +1 as v is older than, the same as or newer than o.
func (v Version) Compare(o Version) int {
	for _, d := range [3]int{v.Major - o.Major, v.Minor - o.Minor, v.Patch - o.Patch} {
		switch {
		case d < 0:
			return -1
		case d > 0:
			return 1
		}
	}
	return 0
}

// Less: v is older than o.
func (v Version) Less(o Version) bool { return v.Compare(o) < 0 }

// NewerMinor: v is of a later major or minor release than o (patches do not change the
// data's format).
func (v Version) NewerMinor(o Version) bool {
	return v.Major > o.Major || (v.Major == o.Major && v.Minor > o.Minor)
}

// SameMinor: v and o are patches of one minor release.
func (v Version) SameMinor(o Version) bool { return v.Major == o.Major && v.Minor == o.Minor }

// Oldest is the oldest release the operator accepts: the first 3.5 (the CRD refuses older).
var Oldest = Version{3, 5, 0}

// healthEndpoints is the first release that serves /livez and /readyz: etcd's
// server/etcdserver/api/etcdhttp/health.go appears at v3.5.11 and is absent at v3.5.10
// (3.6 has them from its first release). /health is served by every 3.x release.
var healthEndpoints = Version{3, 5, 11}

// HasLivezReadyz: etcd serves /livez and /readyz on its metrics port.
func (v Version) HasLivezReadyz() bool { return !v.Less(healthEndpoints) }

// upgradeFloors is, per minor, the oldest patch of the minor before it that may upgrade to
// it:
//   - 3.6 from 3.5.26: etcd's 3.6 upgrade guide; 3.5.20 (PR 19563) and 3.5.24 (PR 20797)
//     fixed learner promotions that were not written to the v3 store, which 3.6 reads the
//     membership from, and 3.5.26 (PR 20995) fixed zombie members in the v3 store.
//   - 3.7 from 3.6.11: etcd 3.7 takes upgrades only from 3.6.11 or newer (issue 22, checked by
//     hand with 3.6.16 -> 3.7.3); 3.6.11 is also the first 3.6 patch that adds a member while
//     another is down (CHANGELOG-3.6, PR 21667).
var upgradeFloors = map[[2]int]Version{
	{3, 6}: {3, 5, 26},
	{3, 7}: {3, 6, 11},
}

// UpgradeFloor is the oldest patch from which a member may move to target's minor, and
// false when etcd states none (patches of one minor move freely).
func UpgradeFloor(target Version) (Version, bool) {
	v, ok := upgradeFloors[[2]int{target.Major, target.Minor}]
	return v, ok
}

// Issue is a known bug of a range of etcd patches.
type Issue struct {
	// FixedIn is the first patch without the bug: the one to move to.
	FixedIn Version
	// What the bug does, said for a user.
	What string
	// Source names where etcd says so.
	Source string
}

func (i Issue) String() string {
	return fmt.Sprintf("%s (fixed in %s, %s)", i.What, i.FixedIn, i.Source)
}

// membershipIssues are the bugs that make adding a member (through a learner) and promoting
// it unsafe, newest fix first. Both are in etcd's CHANGELOG-3.5.md:
//   - v3.5.20: "the learner promotion changes not being persisted into v3store (bbolt)"
//     (PR 19563): a member promoted on an older patch is still a learner in the v3 store,
//     which 3.6 reads the membership from (issue 20793); 3.5.24 repairs it only when a
//     snapshot is applied (PR 20797).
//   - v3.5.7: "etcdserver might promote a non-started learner" (PR 15096): a voter that
//     serves nothing then counts in the quorum.
var membershipIssues = []Issue{
	{FixedIn: Version{3, 5, 20}, Source: "etcd PR 19563, CHANGELOG-3.5 v3.5.20",
		What: "etcd does not write a learner's promotion to its v3 store, so the promoted member is a learner again for etcd 3.6"},
	{FixedIn: Version{3, 5, 7}, Source: "etcd PR 15096, CHANGELOG-3.5 v3.5.7",
		What: "etcd may promote a learner that has not started, counting a member that serves nothing in the quorum"},
}

// MembershipIssue is the known bug that makes adding or promoting a member unsafe on v, the
// one whose fix is newest (moving to its FixedIn patch clears every such bug), and false
// when v has none. Removing a member is not affected.
func MembershipIssue(v Version) (Issue, bool) {
	for _, i := range membershipIssues {
		if v.SameMinor(i.FixedIn) && v.Less(i.FixedIn) {
			return i, true
		}
	}
	return Issue{}, false
}

// Downgrades. etcd takes a cluster down one minor at a time through its downgrade API
// (etcd's downgrade guides, "Downgrade etcd from v3.6 to v3.5" and "from v3.7 to v3.6"):
// validate the target minor, enable the downgrade (the cluster version drops to the target
// and every member migrates its storage version to it), then restart the members one at a
// time on the lower release; once every member runs it, the leader ends the downgrade itself
// (server/etcdserver/version/monitor.go, CancelDowngradeIfNeeded; etcd 3.5's
// monitorDowngrade). The procedure, with the storage version it migrates, starts with 3.6:
// a 3.5 cluster has none to go through (and its minor below, 3.4, is not one the operator
// runs).

// firstDowngradable is the oldest minor a cluster can be downgraded from.
var firstDowngradable = Version{3, 6, 0}

// DowngradeFloor is the oldest patch of target's minor that a downgrade may end on, and false
// when etcd states none. It is the patch the cluster could be upgraded from again
// (UpgradeFloor of the minor above): 3.5.26, whose v3 store carries the fixes 3.6 reads the
// membership with, and 3.6.11, which 3.7 takes upgrades from. A lower patch would leave a
// cluster that cannot go back up.
func DowngradeFloor(target Version) (Version, bool) {
	return UpgradeFloor(Version{target.Major, target.Minor + 1, 0})
}

// ClusterMinor is the minor of v as etcd names cluster versions and downgrade targets: X.Y.0.
func (v Version) ClusterMinor() Version { return Version{v.Major, v.Minor, 0} }

// DowngradeRefusal says why etcd cannot take a cluster whose newest member runs from down to
// to, a release of a lower minor, and what to do instead; "" when it can.
func DowngradeRefusal(from, to Version) string {
	switch {
	case from.Major != to.Major:
		return fmt.Sprintf("etcd downgrades within one major release only, not from %s to %s", from, to)
	case from.Less(firstDowngradable):
		return fmt.Sprintf("etcd %d.%d has no downgrade API (etcd's downgrade, with its storage migration, starts with 3.6), and the operator runs nothing older than 3.5; keep spec.version at a %d.%d patch",
			from.Major, from.Minor, from.Major, from.Minor)
	case to.Minor < from.Minor-1:
		return fmt.Sprintf("etcd downgrades one minor at a time, and %s is %d minors below %s; set spec.version to a %d.%d patch first, wait until status.version shows it, then set %s",
			to, from.Minor-to.Minor, from, from.Major, from.Minor-1, to)
	}
	if floor, ok := DowngradeFloor(to); ok && to.Less(floor) {
		return fmt.Sprintf("a downgrade to %d.%d ends on %s or a newer %d.%d patch: older ones cannot be upgraded to %d.%d again; set spec.version to %s or newer",
			to.Major, to.Minor, floor, to.Major, to.Minor, to.Major, to.Minor+1, floor)
	}
	return ""
}

// storageVersions is the first release that keeps its data's format as a storage version
// and reports it, with the cluster's downgrade, in a status answer (etcd's
// server/storage/schema and the StatusResponse fields storageVersion and downgradeInfo
// appear at v3.6.0).
var storageVersions = Version{3, 6, 0}

// HasStorageVersion: etcd at v reports a storage version and the downgrade in its status;
// older releases leave them empty.
func (v Version) HasStorageVersion() bool { return !v.Less(storageVersions) }

// defaultQuotaReported is the first release whose status names the backend quota when none
// is set (--quota-backend-bytes 0: etcd's 2 GiB default): etcd's
// server/etcdserver/api/v3rpc/maintenance.go fills dbSizeQuota with DefaultQuotaBytes from
// v3.6.6; v3.6.0 to v3.6.5 answer the flag's 0, and 3.5 has no such field.
var defaultQuotaReported = Version{3, 6, 6}

// ReportsDefaultQuota: etcd at v reports its backend quota in its status even when the
// quota is etcd's default; older releases answer 0 then.
func (v Version) ReportsDefaultQuota() bool { return !v.Less(defaultQuotaReported) }

// statusNeedsRoot is the range of releases that answer a status, with authentication on,
// to root only: etcd's server/etcdserver/api/v3rpc/maintenance.go authMaintenanceServer.Status
// asks isPermitted (admin) from v3.6.0 to v3.6.11, and only requireAuthInfo (any user the
// request authenticates as, a client certificate's common name included) in 3.5 (v3.5.0
// checks nothing) and from v3.6.12.
var statusNeedsRoot = [2]Version{{3, 6, 0}, {3, 6, 12}}

// StatusNeedsRoot: with authentication on, etcd at v answers a status to root only.
func (v Version) StatusNeedsRoot() bool {
	return !v.Less(statusNeedsRoot[0]) && v.Less(statusNeedsRoot[1])
}

// authStatusOpen is the first release that answers an auth status to any client: at v3.7.0
// etcd's server/etcdserver/apply/auth.go needAdminPermission no longer lists AuthStatus (at
// v3.6.16 it does, so only root may ask once authentication is on).
var authStatusOpen = Version{3, 7, 0}

// AuthStatusNeedsRoot: with authentication on, etcd at v answers an auth status to root
// only; newer releases answer every client.
func (v Version) AuthStatusNeedsRoot() bool { return v.Less(authStatusOpen) }
