package alarms

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/etcdfake"
)

func TestConfiguredHistory(t *testing.T) {
	opts := func(mode etcdv1.AutoCompactionMode, retention string) *etcdv1.EtcdOptions {
		return &etcdv1.EtcdOptions{AutoCompactionMode: mode, AutoCompactionRetention: retention}
	}
	tests := []struct {
		name    string
		options *etcdv1.EtcdOptions
		keep    int64
		compact bool
		what    string
	}{
		{"no options: etcd keeps every revision", nil, 0, false, "every revision"},
		{"a mode without retention", opts(etcdv1.AutoCompactionRevision, ""), 0, false, "every revision"},
		{"retention 0 turns auto-compaction off", opts(etcdv1.AutoCompactionPeriodic, "0"), 0, false, "every revision"},
		{"revision retention: keep the last N", opts(etcdv1.AutoCompactionRevision, "10000"), 10000, true, "the last 10000 revisions"},
		{"revision retention 0 is off too", opts(etcdv1.AutoCompactionRevision, "0"), 0, false, "every revision"},
		{"periodic: etcd's compactor keeps it, nothing to compact", opts(etcdv1.AutoCompactionPeriodic, "24h"), 0, false, "the last 24h"},
		{"periodic is etcd's default mode", opts("", "30m"), 0, false, "the last 30m"},
		{"a bare number is hours", opts("", "5"), 0, false, "the last 5h"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := configuredHistory(tt.options)
			if h.keep != tt.keep || h.compact != tt.compact || !strings.Contains(h.what, tt.what) {
				t.Fatalf("configuredHistory = %+v, want keep %d compact %v, saying %q", h, tt.keep, tt.compact, tt.what)
			}
		})
	}
}

func TestHistoryFitsAndQuota(t *testing.T) {
	const mi = 1 << 20
	fits := []struct {
		inUse, quota int64
		want         bool
	}{
		{10 * mi, 16 * mi, true},
		{16 * mi / 5 * 4, 16 * mi, true},
		{13 * mi, 16 * mi, false},
		{16 * mi, 16 * mi, false},
		{1, 0, true}, // no quota known: nothing says it does not fit
	}
	for _, tt := range fits {
		if got := historyFits(tt.inUse, tt.quota); got != tt.want {
			t.Errorf("historyFits(%d, %d) = %v, want %v", tt.inUse, tt.quota, got, tt.want)
		}
	}
	size := resource.MustParse("4Gi")
	zero, set := resource.MustParse("0"), resource.MustParse("16Mi")
	cluster := func(o *etcdv1.EtcdOptions) *etcdv1.EtcdCluster {
		c := &etcdv1.EtcdCluster{}
		c.Spec.Storage.Size, c.Spec.Options = &size, o
		return c
	}
	quotas := []struct {
		name     string
		c        *etcdv1.EtcdCluster
		reported int64
		want     int64
	}{
		{"what the members report wins", cluster(&etcdv1.EtcdOptions{QuotaBackendBytes: &set}), 1 << 30, 1 << 30},
		{"the option", cluster(&etcdv1.EtcdOptions{QuotaBackendBytes: &set}), 0, 16 * mi},
		{"0 is etcd's default", cluster(&etcdv1.EtcdOptions{QuotaBackendBytes: &zero}), 0, 2 << 30},
		{"unset: half the volume", cluster(nil), 0, 2 << 30},
	}
	for _, tt := range quotas {
		if got := quota(tt.c, tt.reported); got != tt.want {
			t.Errorf("%s: quota = %d, want %d", tt.name, got, tt.want)
		}
	}
}

// The acting part: the configured history is kept when it fits, and only when it does not is
// the history compacted to the current revision, with the event saying so.
func TestCompactKeepsTheConfiguredHistoryUnlessItDoesNotFit(t *testing.T) {
	const mi = 1 << 20
	set := resource.MustParse("16Mi")
	for _, tt := range []struct {
		name      string
		retention string
		inUse     int64
		calls     []string
		note      string
	}{
		{"revision retention that fits", "1000", 4 * mi, []string{"CompactKeeping(1000)"}, "kept the last 1000 revisions"},
		{"revision retention that does not fit", "1000", 15 * mi, []string{"CompactKeeping(1000)", "CompactToCurrent()"}, "more than fits: compacted to revision"},
		{"no auto-compaction, room once defragmented", "", 4 * mi, nil, "kept every revision"},
		{"no auto-compaction, full", "", 15 * mi, []string{"CompactToCurrent()"}, "more than fits"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := etcdfake.New()
			m := f.SeedMember("db-0", "https://db-0:2380", "https://db-0:2379")
			f.SetDBSize(m.ID, 16*mi, tt.inUse)
			c := &etcdv1.EtcdCluster{}
			c.Spec.Options = &etcdv1.EtcdOptions{QuotaBackendBytes: &set, AutoCompactionMode: etcdv1.AutoCompactionRevision, AutoCompactionRetention: tt.retention}
			note, err := compact(context.Background(), c, f, []string{"https://db-0:2379"})
			if err != nil {
				t.Fatal(err)
			}
			var compactions []string
			for _, call := range f.Calls() {
				if strings.HasPrefix(call, "Compact") {
					compactions = append(compactions, call)
				}
			}
			if strings.Join(compactions, " ") != strings.Join(tt.calls, " ") || !strings.Contains(note, tt.note) {
				t.Fatalf("compactions %v, note %q; want %v, saying %q", compactions, note, tt.calls, tt.note)
			}
		})
	}
}
