package etcd

// The downgrade API against a real etcd (see process_test.go).

import (
	"errors"
	"fmt"
	"testing"
)

// Validate, enable and cancel a downgrade 3.6 -> 3.5 as etcd answers them: only the minor
// below is valid, enabling drops the cluster version and migrates the storage version, the
// status reports the downgrade, a second enable is refused, and cancel ends it.
func TestDowngradeValidateEnableCancel(t *testing.T) {
	t.Parallel()
	cluster := startStaticCluster(t, 1)
	c := newTestClient(t, Config{Endpoints: endpointsOf(cluster)})
	ep := cluster[0].clientURL

	if _, err := c.DowngradeValidate(shortContext(t), "3.4.0"); !errors.Is(err, ErrInvalidDowngradeTarget) {
		t.Fatalf("validate 3.4 on a 3.6 cluster: %v; want ErrInvalidDowngradeTarget", err)
	}
	// etcd 3.6 logs "no inflight downgrade job" and answers success (3.5 returns the error).
	if err := c.DowngradeCancel(shortContext(t)); err != nil {
		t.Fatalf("cancel with none enabled: %v; want success from etcd 3.6", err)
	}
	st, err := c.Status(shortContext(t), ep)
	if err != nil || st.Downgrade == nil || st.Downgrade.Enabled || st.StorageVersion != "3.6.0" {
		t.Fatalf("status before: %+v %v; want no downgrade enabled, storage version 3.6.0", st, err)
	}
	if _, err := c.DowngradeValidate(shortContext(t), "3.5.0"); err != nil {
		t.Fatalf("validate 3.5: %v", err)
	}
	if _, err := c.DowngradeEnable(shortContext(t), "3.5.0"); err != nil {
		t.Fatalf("enable 3.5: %v", err)
	}
	err = eventually(startupTimeout, func() error {
		st, err := c.Status(shortContext(t), ep)
		if err != nil {
			return err
		}
		if st.Downgrade == nil || !st.Downgrade.Enabled || st.Downgrade.TargetVersion != "3.5.0" || st.StorageVersion != "3.5.0" {
			return fmt.Errorf("status %+v, downgrade %+v", st, st.Downgrade)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("after enable: %v; want the downgrade to 3.5.0 reported and the storage migrated", err)
	}
	if _, err := c.DowngradeEnable(shortContext(t), "3.5.0"); !errors.Is(err, ErrInvalidDowngradeTarget) && !errors.Is(err, ErrDowngradeInProcess) {
		t.Fatalf("a second enable: %v; want it refused", err)
	}
	if err := c.DowngradeCancel(shortContext(t)); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	st, err = c.Status(shortContext(t), ep)
	if err != nil || st.Downgrade == nil || st.Downgrade.Enabled {
		t.Fatalf("status after cancel: %+v %v; want no downgrade enabled", st, err)
	}
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
	cluster := startStaticCluster(t, 1)
	m := cluster[0]
	c := newTestClient(t, Config{Endpoints: endpointsOf(cluster)})
	if _, err := c.DowngradeEnable(shortContext(t), "3.5.0"); err != nil {
		t.Fatalf("enable 3.5: %v", err)
	}
	err := eventually(startupTimeout, func() error {
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
	m.binary = etcdBinaryOf(t, downgradeTarget35)
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
