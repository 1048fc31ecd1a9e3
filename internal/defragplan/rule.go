// Package defragplan decides a defragmentation pass over one etcd cluster (which member next,
// the leader last, none when pausing it would cost the quorum, leadership moved away first)
// and defragments a single member so. The EtcdDefrag controller (internal/controller/defrag)
// runs whole passes with it; `kubectl etcd defrag` defragments one member with Member. It
// holds no Kubernetes client.
package defragplan

import (
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

// Defaults of an EtcdDefrag's rule.
var (
	defaultFreeSpaceAbove = resource.MustParse("200Mi")
	defaultMinReclaim     = resource.MustParse("32Mi")
)

// etcdDefaultQuota is etcd's --quota-backend-bytes default, for a member that reports no
// quota (0: etcd 3.5 reports none, 3.6.0 to 3.6.5 report 0 when the default applies) of a
// pass that does not know the quota its members are given either.
const etcdDefaultQuota = 2 << 30

// backendQuota is the quota a member runs with: what it reports, else configured, the quota
// its cluster gives its members (PassView.Quota), else etcd's default. Never 0.
func backendQuota(reported, configured int64) int64 {
	switch {
	case reported > 0:
		return reported
	case configured > 0:
		return configured
	}
	return etcdDefaultQuota
}

// Sizes are a member's database figures from its status.
type Sizes struct {
	DBSize, InUse, Quota int64
}

// selected says whether rule picks a member with these sizes, and why in words; configured
// is the quota the cluster gives its members (backendQuota).
func selected(rule *etcdv1.DefragRule, s Sizes, configured int64) (bool, string) {
	if rule != nil && rule.All {
		return true, "rule.all"
	}
	var r etcdv1.DefragRule
	if rule != nil {
		r = *rule
	}
	reclaimable := s.DBSize - s.InUse
	free := quantityOr(r.FreeSpaceAbove, defaultFreeSpaceAbove)
	if reclaimable > free {
		return true, fmt.Sprintf("%d bytes reclaimable, above freeSpaceAbove %d", reclaimable, free)
	}
	if pct, ok := percent(r.QuotaUsageAbove); ok {
		quota := backendQuota(s.Quota, configured)
		minReclaim := quantityOr(r.MinReclaim, defaultMinReclaim)
		if s.DBSize*100 > int64(pct)*quota && reclaimable >= minReclaim {
			return true, fmt.Sprintf("database %d bytes is above %d%% of the quota %d, %d bytes reclaimable (minReclaim %d)", s.DBSize, pct, quota, reclaimable, minReclaim)
		}
	}
	return false, fmt.Sprintf("%d bytes reclaimable of a %d-byte database: below the rule", reclaimable, s.DBSize)
}

func quantityOr(q *resource.Quantity, fallback resource.Quantity) int64 {
	if q == nil {
		return fallback.Value()
	}
	return q.Value()
}

// percent parses "80%".
func percent(s string) (int, bool) {
	n, err := strconv.Atoi(strings.TrimSuffix(s, "%"))
	if err != nil || !strings.HasSuffix(s, "%") {
		return 0, false
	}
	return n, true
}
