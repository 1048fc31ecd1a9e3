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

// etcdDefaultQuota is etcd's --quota-backend-bytes default, for servers that do not report
// their quota (3.5).
const etcdDefaultQuota = 2 << 30

// Sizes are a member's database figures from its status.
type Sizes struct {
	DBSize, InUse, Quota int64
}

// selected says whether rule picks a member with these sizes, and why in words.
func selected(rule *etcdv1.DefragRule, s Sizes) (bool, string) {
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
		quota := s.Quota
		if quota <= 0 {
			quota = etcdDefaultQuota
		}
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
