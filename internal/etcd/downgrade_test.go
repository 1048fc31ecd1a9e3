package etcd

// The downgrade API against a real etcd (see process_test.go).

import (
	"errors"
	"fmt"
	"testing"

	"github.com/quorumkeeper/etcd-operator/internal/etcdversion"
)

// wantRefused fails unless err is one of the sentinels.
func wantRefused(t *testing.T, what string, err error, sentinels ...error) {
	t.Helper()
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return
		}
	}
	t.Fatalf("%s: %v; want one of %v", what, err, sentinels)
}

// waitDowngradeStatus waits until endpoint's status reports the downgrade as enabled says,
// with storage as its storage version.
func waitDowngradeStatus(t *testing.T, c Client, endpoint string, enabled bool, target, storage string) {
	t.Helper()
	err := eventually(startupTimeout, func() error {
		st, err := c.Status(shortContext(t), endpoint)
		if err != nil {
			return err
		}
		if st.Downgrade == nil || st.Downgrade.Enabled != enabled || st.Downgrade.TargetVersion != target || st.StorageVersion != storage {
			return fmt.Errorf("status %+v, downgrade %+v", st, st.Downgrade)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("want downgrade enabled %t to %q, storage version %q: %v", enabled, target, storage, err)
	}
}

// minorBelow is the release a downgrade from v ends on: the oldest patch of the minor below
// that etcd lets go back up (etcdversion.DowngradeFloor), or its first patch.
func minorBelow(v etcdversion.Version) etcdversion.Version {
	below := etcdversion.Version{Major: v.Major, Minor: v.Minor - 1}
	if floor, ok := etcdversion.DowngradeFloor(below); ok {
		return floor
	}
	return below
}

// waitClusterVersion waits until the cluster has a cluster version and returns etcd's answer
// to a validation of twoBelow, a target two minors below, which changes nothing. A cluster
// just started has none for a moment (its leader decides it once the members have published
// themselves); etcd meanwhile answers a validation with "cluster version not found" (seen on
// 3.6.15), and an enable sent then once made a 3.6.16 member exit with a stack dump.
func waitClusterVersion(t *testing.T, c Client, twoBelow etcdversion.Version) error {
	t.Helper()
	var err error
	if e := eventually(startupTimeout, func() error {
		_, err = c.DowngradeValidate(shortContext(t), twoBelow.String())
		if errors.Is(err, ErrClusterVersionUnknown) {
			return err
		}
		return nil
	}); e != nil {
		t.Fatalf("the cluster version was never decided: %v", e)
	}
	return err
}

// Validate, enable and cancel a downgrade as etcd answers them, on every release. Where the
// operator downgrades (etcdversion.DowngradeRefusal says none; 3.6 and newer): only the minor
// below is valid, enabling drops the cluster version and migrates the storage version to it,
// the status reports the downgrade, a second enable is refused, and cancel ends it: the data
// goes back up. Where it refuses (3.5): etcd reports neither a storage version nor a
// downgrade, so a migration could not be watched, and it answers a cancel with none enabled
// with ErrNoInflightDowngrade.
func TestDowngradeValidateEnableCancel(t *testing.T) {
	t.Parallel()
	forEachRelease(t, testDowngradeValidateEnableCancel)
}

func testDowngradeValidateEnableCancel(t *testing.T, r release) {
	cluster := startStaticClusterOn(t, r, 1)
	c := newTestClient(t, Config{Endpoints: endpointsOf(cluster)})
	ep := cluster[0].clientURL
	below := minorBelow(r.version)
	twoBelow := etcdversion.Version{Major: r.version.Major, Minor: r.version.Minor - 2}

	err := waitClusterVersion(t, c, twoBelow)
	wantRefused(t, fmt.Sprintf("validate %s on a %s cluster", twoBelow, r.version), err, ErrInvalidDowngradeTarget)

	if why := etcdversion.DowngradeRefusal(r.version, below); why != "" {
		t.Logf("the operator refuses a downgrade from %s: %s", r.version, why)
		st := waitForLeader(t, c, ep)
		if st.StorageVersion != "" || st.Downgrade != nil {
			t.Fatalf("status of %s: %+v; want no storage version and no downgrade info", r.version, st)
		}
		err := c.DowngradeCancel(shortContext(t))
		wantRefused(t, "cancel with none enabled on "+r.version.String(), err, ErrNoInflightDowngrade)
		return
	}

	current, target := r.version.ClusterMinor().String(), below.ClusterMinor().String()
	// etcd 3.6 and newer log "no inflight downgrade job" and answer success.
	if err := c.DowngradeCancel(shortContext(t)); err != nil {
		t.Fatalf("cancel with none enabled: %v; want success from etcd %s", err, r.version)
	}
	waitDowngradeStatus(t, c, ep, false, "", current)
	if _, err := c.DowngradeValidate(shortContext(t), below.String()); err != nil {
		t.Fatalf("validate %s: %v", below, err)
	}
	if _, err := c.DowngradeEnable(shortContext(t), below.String()); err != nil {
		t.Fatalf("enable %s: %v", below, err)
	}
	waitDowngradeStatus(t, c, ep, true, target, target)
	_, err = c.DowngradeEnable(shortContext(t), below.String())
	wantRefused(t, "a second enable", err, ErrInvalidDowngradeTarget, ErrDowngradeInProcess)
	if err := c.DowngradeCancel(shortContext(t)); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	// With every member on r, the cluster version, and the data with it, go back up.
	waitDowngradeStatus(t, c, ep, false, "", current)
}

// downgradeTarget35 is the 3.5 release a downgrade test restarts members on (the cache of
// hack/testbed.sh has it, as the e2e image map does).
const downgradeTarget35 = "3.5.35"

// A whole downgrade of one member, 3.6 -> 3.5: once it runs 3.5 it reports neither the
// downgrade nor a storage version, and a validation of 3.4, which changes nothing, says
// whether etcd still has the downgrade enabled: refused with ErrDowngradeInProcess until
// etcd's leader ends it, then accepted.
func TestDowngradeEndsOnceEveryMemberRunsTheTarget(t *testing.T) {
	t.Parallel()
	cluster := startStaticClusterOn(t, releaseOf(t, etcdTestVersion), 1)
	m := cluster[0]
	c := newTestClient(t, Config{Endpoints: endpointsOf(cluster)})
	err := waitClusterVersion(t, c, etcdversion.MustParse("3.4.0"))
	wantRefused(t, "validate 3.4 on a 3.6 cluster", err, ErrInvalidDowngradeTarget)
	if _, err := c.DowngradeEnable(shortContext(t), "3.5.0"); err != nil {
		t.Fatalf("enable 3.5: %v", err)
	}
	err = eventually(startupTimeout, func() error {
		st, err := c.Status(shortContext(t), m.clientURL)
		if err == nil && st.StorageVersion != "3.5.0" {
			err = fmt.Errorf("storage version %q", st.StorageVersion)
		}
		return err
	})
	if err != nil {
		t.Fatalf("the data never migrated to 3.5: %v", err)
	}
	if _, err := c.DowngradeValidate(shortContext(t), "3.4.0"); !errors.Is(err, ErrInvalidDowngradeTarget) && !errors.Is(err, ErrDowngradeInProcess) {
		t.Fatalf("validate 3.4 with the downgrade enabled on 3.6: %v; want it refused", err)
	}

	m.stop(t)
	m.binary = releaseOf(t, downgradeTarget35).etcd
	// etcd's leader looks every check time; the first look comes well after the first probe.
	m.extraArgs = append(m.extraArgs, "--experimental-downgrade-check-time=5s")
	m.start(t, initialCluster(cluster), "new", "token-"+t.Name())
	st := waitForLeader(t, c, m.clientURL)
	if st.Version != downgradeTarget35 || st.Downgrade != nil || st.StorageVersion != "" {
		t.Fatalf("status on 3.5: %+v; want version %s, no downgrade info, no storage version", st, downgradeTarget35)
	}
	if _, err := c.DowngradeValidate(shortContext(t), "3.4.0"); !errors.Is(err, ErrDowngradeInProcess) {
		t.Fatalf("validate 3.4 on 3.5 before etcd looked: %v; want ErrDowngradeInProcess", err)
	}
	err = eventually(startupTimeout, func() error {
		_, err := c.DowngradeValidate(shortContext(t), "3.4.0")
		if err != nil && !errors.Is(err, ErrDowngradeInProcess) {
			t.Fatalf("validate 3.4 on 3.5: %v; want success or ErrDowngradeInProcess", err)
		}
		return err
	})
	if err != nil {
		t.Fatalf("etcd never ended the downgrade: %v", err)
	}
}
