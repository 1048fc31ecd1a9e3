package alarms

import (
	"context"
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/api/resource"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// history is what the cluster's auto-compaction settings (spec.options) keep.
type history struct {
	// keep is how many revisions to keep when compacting now; compact is false when the
	// remediation compacts nothing to keep the history (periodic retention, or none).
	keep    int64
	compact bool
	// what says which history that is, for the event.
	what string
}

// configuredHistory is the history spec.options keeps. With revision retention N the
// remediation compacts to the current revision less N, as etcd's own compactor does every 5
// minutes. With periodic retention etcd's compactor keeps it already: etcd has no index of
// revisions by time, so the remediation cannot compact to the revision of now less the
// retention more exactly than etcd does, and compacts nothing. Without auto-compaction
// (etcd's default) every revision is the history.
func configuredHistory(o *etcdv1.EtcdOptions) history {
	var mode etcdv1.AutoCompactionMode
	var retention string
	if o != nil {
		mode, retention = o.AutoCompactionMode, o.AutoCompactionRetention
	}
	if retention == "" || retention == "0" {
		return history{what: "every revision (no auto-compaction)"}
	}
	if mode == etcdv1.AutoCompactionRevision {
		// The API admits only digits in revision mode.
		n, err := strconv.ParseInt(retention, 10, 64)
		if err == nil && n > 0 {
			return history{keep: n, compact: true, what: fmt.Sprintf("the last %d revisions (autoCompactionRetention)", n)}
		}
		return history{what: "every revision (no auto-compaction)"}
	}
	return history{what: fmt.Sprintf("the last %s, kept by etcd's periodic auto-compaction", periodicRetention(retention))}
}

// periodicRetention spells etcd's retention: a bare number is hours.
func periodicRetention(retention string) string {
	if _, err := strconv.ParseFloat(retention, 64); err == nil {
		return retention + "h"
	}
	return retention
}

// fitNumerator/fitDenominator is the share of the quota the kept history may use for it to
// fit: with more, the writes that follow the disarm would raise NOSPACE again at once, and
// each episode would cost a defragmentation of every member for nothing.
const (
	fitNumerator   = 4
	fitDenominator = 5
)

// historyFits says whether the space in use, once the configured history is all that is
// kept, leaves the cluster room to write: at most four fifths of the quota.
func historyFits(inUse, quota int64) bool {
	return quota <= 0 || inUse <= quota/fitDenominator*fitNumerator
}

// quota is the backend quota the members run with: what they report, else, as etcd 3.5 and
// 3.6.0 to 3.6.5 may report 0, what the operator gave them (specs.BackendQuota: etcd's own
// default when the option is 0).
func quota(c *etcdv1.EtcdCluster, reported int64) int64 {
	return specs.BackendQuota(c, reported)
}

func bytes(n int64) string { return resource.NewQuantity(n, resource.BinarySI).String() }

// compact compacts keeping the configured history and, when the space that history uses
// does not fit, to the current revision; what it did, for the event.
func compact(ctx context.Context, c *etcdv1.EtcdCluster, cli etcd.Client, endpoints []string) (string, error) {
	h := configuredHistory(c.Spec.Options)
	done := "compacted nothing"
	if h.compact {
		rev, err := cli.CompactKeeping(ctx, h.keep)
		if err != nil {
			return "", err
		}
		done = fmt.Sprintf("compacted to revision %d", rev)
	}
	inUse, reported, err := spaceInUse(ctx, cli, endpoints)
	if err != nil {
		return "", err
	}
	q := quota(c, reported)
	if historyFits(inUse, q) {
		return fmt.Sprintf("kept %s: %s, %s of the %s quota in use", h.what, done, bytes(inUse), bytes(q)), nil
	}
	rev, err := cli.CompactToCurrent(ctx)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s uses %s of the %s quota, more than fits: compacted to revision %d, the current one, erasing the older history",
		h.what, bytes(inUse), bytes(q), rev), nil
}

// spaceInUse is the most any member answering uses of its backend, and the quota they
// report (0 from etcd 3.5, and from 3.6.0 to 3.6.5 when etcd's default applies).
func spaceInUse(ctx context.Context, cli etcd.Client, endpoints []string) (inUse, quota int64, err error) {
	answered := false
	for _, ep := range endpoints {
		s, serr := cli.Status(ctx, ep)
		if serr != nil {
			err = serr
			continue
		}
		answered = true
		inUse, quota = max(inUse, s.DBSizeInUse), max(quota, s.DBSizeQuota)
	}
	if !answered {
		return 0, 0, fmt.Errorf("no member says how much space it uses: %w", err)
	}
	return inUse, quota, nil
}
