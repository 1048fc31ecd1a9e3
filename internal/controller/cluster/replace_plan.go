package cluster

import (
	"sort"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller/kit"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
)

// memberFacts is what the operator observed about one EtcdMember, as planReplacement needs it.
type memberFacts struct {
	name       string
	id         uint64
	inEtcd     bool // etcd's member list has it
	started    bool // it published its name: it has (had) data that etcd counts on
	healthy    bool
	memory     bool // tmpfs: its data lives as long as its Pod
	pvcPresent bool // its PVC exists and is not being deleted
	podPresent bool
	dataError  string // why its etcd exits on its data, from the Pod's last termination
	corrupt    bool
	asked      bool // the replace annotation
	recorded   bool // its status records a member ID: it was in etcd once
	deleting   bool
}

// damage says why a member's data is lost or unusable, "" when it is not.
func damage(f memberFacts) string {
	switch {
	case f.deleting:
		return ""
	case f.asked:
		return "its replacement was asked for (" + etcdv1.AnnotationReplace + ")"
	case !f.inEtcd && f.recorded:
		return "etcd no longer lists its member ID: it was removed outside the operator"
	case !f.inEtcd || !f.started:
		return "" // nothing etcd counts on yet: a fresh start is a first start
	case f.corrupt:
		return "etcd raised a CORRUPT alarm for it"
	case f.memory && !f.podPresent:
		return "its tmpfs data went with its Pod"
	case !f.memory && !f.pvcPresent:
		return "its PVC is gone"
	case f.dataError != "" && !f.healthy:
		// Only while it is down: a member that exited once and serves again has its data.
		return "it cannot start on its data: " + f.dataError
	}
	return ""
}

// replacementPlan is planReplacement's decision: which member to replace and why, or why
// not now.
type replacementPlan struct {
	member  string
	why     string
	refusal string // non-empty: the replacement must wait, for this reason
}

// planReplacement picks the damaged member to replace next: unhealthy ones first (removing
// them costs the quorum nothing), and only when the quorum projected without it holds.
// nil when no member is damaged.
func planReplacement(facts []memberFacts, members []etcd.Member, healthy map[uint64]bool) *replacementPlan {
	var damaged []memberFacts
	for _, f := range facts {
		if damage(f) != "" {
			damaged = append(damaged, f)
		}
	}
	if len(damaged) == 0 {
		return nil
	}
	sort.SliceStable(damaged, func(i, j int) bool { return !damaged[i].healthy && damaged[j].healthy })
	var refused *replacementPlan
	for _, f := range damaged {
		plan := &replacementPlan{member: f.name, why: damage(f)}
		if !f.inEtcd {
			return plan
		}
		if ok, why := kit.RemovalVerdict(members, healthy, f.id); !ok {
			plan.refusal = why
			if refused == nil {
				refused = plan
			}
			continue
		}
		return plan
	}
	return refused
}

// facts gathers memberFacts for every EtcdMember of the view.
