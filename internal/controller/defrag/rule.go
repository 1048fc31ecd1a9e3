// Package defrag runs EtcdDefrag passes (one member at a time, the leader last, never below
// quorum) and creates them on the schedule of an EtcdCluster's spec.defrag.
package defrag

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

// etcdDefaultQuota is etcd's --quota-backend-bytes default, for servers that do not report
// their quota (3.5).
const etcdDefaultQuota = 2 << 30

// sizes are a member's database figures from its status.
type sizes struct {
	dbSize, inUse, quota int64
}

// selected says whether rule picks a member with these sizes, and why in words.
func selected(rule *etcdv1.DefragRule, s sizes) (bool, string) {
	if rule != nil && rule.All {
		return true, "rule.all"
	}
	var r etcdv1.DefragRule
	if rule != nil {
		r = *rule
	}
	reclaimable := s.dbSize - s.inUse
	free := quantityOr(r.FreeSpaceAbove, defaultFreeSpaceAbove)
	if reclaimable > free {
		return true, fmt.Sprintf("%d bytes reclaimable, above freeSpaceAbove %d", reclaimable, free)
	}
	if pct, ok := percent(r.QuotaUsageAbove); ok {
		quota := s.quota
		if quota <= 0 {
			quota = etcdDefaultQuota
		}
		minReclaim := quantityOr(r.MinReclaim, defaultMinReclaim)
		if s.dbSize*100 > int64(pct)*quota && reclaimable >= minReclaim {
			return true, fmt.Sprintf("database %d bytes is above %d%% of the quota %d, %d bytes reclaimable (minReclaim %d)", s.dbSize, pct, quota, reclaimable, minReclaim)
		}
	}
	return false, fmt.Sprintf("%d bytes reclaimable of a %d-byte database: below the rule", reclaimable, s.dbSize)
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
