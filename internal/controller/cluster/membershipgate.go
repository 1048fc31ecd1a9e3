package cluster

import (
	"maps"
	"slices"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/etcdversion"
)

// membershipBlocked refuses adding a member (scale out, the new member of a replacement) or
// promoting a learner while spec.version, or the version a member runs, is an etcd patch
// whose learner promotion is known to be broken (etcdversion.MembershipIssue): the wait's
// message names the bug and the patch to move to. Removing members, restarts, upgrades and
// everything else go on. running maps member names to the version etcd reports ("" when it
// does not answer).
func membershipBlocked(target string, running map[string]string) error {
	if v, ok := etcdversion.Parse(target); ok {
		if issue, bad := etcdversion.MembershipIssue(v); bad {
			return membershipUnsafe("spec.version is "+v.String(), v, issue)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(running)) {
		if v, ok := etcdversion.Parse(running[name]); ok {
			if issue, bad := etcdversion.MembershipIssue(v); bad {
				return membershipUnsafe("member "+name+" runs "+v.String(), v, issue)
			}
		}
	}
	return nil
}

func membershipUnsafe(who string, v etcdversion.Version, issue etcdversion.Issue) error {
	return waitFor(etcdv1.ReasonMembershipUnsafe,
		"not adding or promoting a member: %s, on which %s (%s); set spec.version to %s or a newer %d.%d patch, and scaling out, learner promotion and replacement resume once every member runs it. Everything else keeps working on %s",
		who, issue.What, issue.Source, issue.FixedIn, issue.FixedIn.Major, issue.FixedIn.Minor, v)
}

// runningVersions is the version each member etcd lists reports, by name, from the
// reconcile's look at etcd.
func (v *clusterView) runningVersions() map[string]string {
	out := map[string]string{}
	for _, em := range v.etcdMembers {
		if ver := v.versions[em.ID]; ver != "" {
			out[em.Name] = ver
		}
	}
	return out
}
