package etcdfake

import (
	"context"
	"fmt"

	"github.com/quorumkeeper/etcd-operator/internal/etcd"
	"github.com/quorumkeeper/etcd-operator/internal/etcdversion"
)

// The downgrade model follows etcd's (server/etcdserver/version): the cluster version is the
// lowest minor the members run and only rises, except that enabling a downgrade drops it to
// the target at once; a downgrade can be enabled only to the minor just below the cluster
// version; the leader disables it once every member runs the target minor. Members of 3.6
// and later report the downgrade and their storage version (the cluster version) in Status;
// 3.5 members report neither.

// downgradeState is the cluster's downgrade record and its cluster version.
type downgradeState struct {
	clusterVersion etcdversion.Version // X.Y.0; zero until first needed
	enabled        bool
	target         etcdversion.Version
	held           bool // the leader does not end a finished downgrade yet
}

// HoldDowngrade keeps etcd's leader from ending a downgrade every member has reached (it
// checks every --downgrade-check-time), until released.
func (f *Cluster) HoldDowngrade(hold bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.downgrade.held = hold
}

// SetMemberVersion makes one member report v (its Pod restarted on another release), where
// SetVersion sets every member's.
func (f *Cluster) SetMemberVersion(id uint64, v string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mustFind(id).version = v
}

// Downgrade reports the cluster's downgrade as etcd records it, and its cluster version.
func (f *Cluster) Downgrade() (info etcd.DowngradeInfo, clusterVersion string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.settleVersions()
	return f.downgradeInfo(), f.downgrade.clusterVersion.String()
}

func (f *Cluster) memberVersion(m *memberState) string {
	if m.version != "" {
		return m.version
	}
	return f.version
}

// lowestMinor is the lowest minor a member runs; false when none runs a version.
func (f *Cluster) lowestMinor() (etcdversion.Version, bool) {
	var low etcdversion.Version
	found := false
	for _, m := range f.members {
		v, ok := etcdversion.Parse(f.memberVersion(m))
		if ok && (!found || v.ClusterMinor().Less(low)) {
			low, found = v.ClusterMinor(), true
		}
	}
	return low, found
}

// settleVersions is what etcd's leader does in the background: it raises the cluster version
// to the lowest minor the members run, and ends a downgrade every member has reached.
func (f *Cluster) settleVersions() {
	low, ok := f.lowestMinor()
	if !ok {
		return
	}
	d := &f.downgrade
	if d.clusterVersion == (etcdversion.Version{}) || (!d.enabled && d.clusterVersion.Less(low)) {
		d.clusterVersion = low
	}
	if d.enabled && !d.held && f.allRunMinor(d.target) {
		d.enabled = false
	}
}

func (f *Cluster) allRunMinor(minor etcdversion.Version) bool {
	for _, m := range f.members {
		v, ok := etcdversion.Parse(f.memberVersion(m))
		if !ok || !v.SameMinor(minor) {
			return false
		}
	}
	return true
}

func (f *Cluster) downgradeInfo() etcd.DowngradeInfo {
	if !f.downgrade.enabled {
		return etcd.DowngradeInfo{}
	}
	return etcd.DowngradeInfo{Enabled: true, TargetVersion: f.downgrade.target.String()}
}

// reportsDowngrade: etcd reports the downgrade and the storage version in Status from 3.6 on.
func reportsDowngrade(version string) bool {
	v, ok := etcdversion.Parse(version)
	return ok && !v.Less(etcdversion.Version{Major: 3, Minor: 6})
}

// validateDowngrade is etcd's DowngradeValidate (version.Manager).
func (f *Cluster) validateDowngrade(version string) (etcdversion.Version, error) {
	f.settleVersions()
	target, ok := etcdversion.Parse(version)
	if !ok {
		target, ok = etcdversion.Parse(version + ".0")
	}
	cv := f.downgrade.clusterVersion
	switch {
	case !ok || target.Major != cv.Major || target.Minor != cv.Minor-1:
		return target, fmt.Errorf("etcdfake: downgrade to %s with cluster version %s: %w", version, cv, etcd.ErrInvalidDowngradeTarget)
	case f.downgrade.enabled:
		return target, fmt.Errorf("etcdfake: downgrade to %s: %w", version, etcd.ErrDowngradeInProcess)
	}
	return target.ClusterMinor(), nil
}

func (f *Cluster) DowngradeValidate(ctx context.Context, version string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	early, lost := f.begin(ctx, "DowngradeValidate", version)
	if err := firstError(early, f.withQuorum()); err != nil {
		return "", err
	}
	if _, err := f.validateDowngrade(version); err != nil {
		return "", err
	}
	return f.downgrade.clusterVersion.String(), lost
}

func (f *Cluster) DowngradeEnable(ctx context.Context, version string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	early, lost := f.begin(ctx, "DowngradeEnable", version)
	if err := firstError(early, f.withQuorum()); err != nil {
		return "", err
	}
	target, err := f.validateDowngrade(version)
	if err != nil {
		return "", err
	}
	f.downgrade.enabled, f.downgrade.target, f.downgrade.clusterVersion = true, target, target
	return target.String(), lost
}

func (f *Cluster) DowngradeCancel(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	early, lost := f.begin(ctx, "DowngradeCancel", "")
	if err := firstError(early, f.withQuorum()); err != nil {
		return err
	}
	f.settleVersions()
	if !f.downgrade.enabled {
		// etcd 3.6 and later log the refusal and answer success; 3.5 returns it.
		if leader := f.find(f.leader); leader != nil && reportsDowngrade(f.memberVersion(leader)) {
			return lost
		}
		return fmt.Errorf("etcdfake: downgrade cancel: %w", etcd.ErrNoInflightDowngrade)
	}
	f.downgrade.enabled = false
	return lost
}
