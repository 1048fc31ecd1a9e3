package etcdfake

import (
	"errors"
	"testing"

	"github.com/quorumkeeper/etcd-operator/internal/etcd"
)

// A downgrade 3.6 -> 3.5 as etcd runs it: only the minor below the cluster version is valid,
// enabling drops the cluster version at once, 3.6 members report the downgrade and 3.5
// members do not, and it ends by itself once every member runs 3.5.
func TestDowngradeFollowsEtcd(t *testing.T) {
	f := threeVoters(t)
	ctx := t.Context()
	enableDowngradeTo35(t, f)
	st, err := f.Status(ctx, "http://m1:2379")
	if err != nil || st.Downgrade == nil || !st.Downgrade.Enabled || st.Downgrade.TargetVersion != "3.5.0" || st.StorageVersion != "3.5.0" {
		t.Fatalf("a 3.6 member's status %+v %v; want the downgrade to 3.5.0 and storage 3.5.0", st, err)
	}
	f.SetMemberVersion(2, "3.5.35")
	if st, _ := f.Status(ctx, "http://m1:2379"); st.Version != "3.5.35" || st.Downgrade != nil || st.StorageVersion != "" {
		t.Fatalf("a 3.5 member's status %+v; want no downgrade nor storage version", st)
	}
	if info, _ := f.Downgrade(); !info.Enabled {
		t.Fatal("the downgrade ended with a member still on 3.6")
	}
	f.SetMemberVersion(1, "3.5.35")
	f.SetMemberVersion(3, "3.5.35")
	if info, cv := f.Downgrade(); info.Enabled || cv != "3.5.0" {
		t.Fatalf("every member on 3.5: %+v, cluster version %s; want the downgrade over at 3.5.0", info, cv)
	}
	if err := f.DowngradeCancel(ctx); !errors.Is(err, etcd.ErrNoInflightDowngrade) {
		t.Fatalf("cancel with none enabled, a 3.5 leader: %v; want ErrNoInflightDowngrade", err)
	}
}

// enableDowngradeTo35 enables a downgrade of 3.6 f to 3.5 as etcd takes it: only the minor
// below the cluster version is valid, enabling drops the cluster version, once.
func enableDowngradeTo35(t *testing.T, f *Cluster) {
	t.Helper()
	ctx := t.Context()
	if _, err := f.DowngradeValidate(ctx, "3.4.0"); !errors.Is(err, etcd.ErrInvalidDowngradeTarget) {
		t.Fatalf("validate two minors down: %v", err)
	}
	if err := f.DowngradeCancel(ctx); err != nil {
		t.Fatalf("cancel with none enabled, a 3.6 leader: %v; want success, as etcd 3.6 answers", err)
	}
	if cv, err := f.DowngradeValidate(ctx, "3.5"); err != nil || cv != "3.6.0" {
		t.Fatalf("validate 3.5 = %q, %v; want the cluster version 3.6.0", cv, err)
	}
	if cv, err := f.DowngradeEnable(ctx, "3.5.35"); err != nil || cv != "3.5.0" {
		t.Fatalf("enable 3.5 = %q, %v; want the cluster version dropped to 3.5.0", cv, err)
	}
	if _, err := f.DowngradeEnable(ctx, "3.5.0"); !errors.Is(err, etcd.ErrInvalidDowngradeTarget) {
		t.Fatalf("a second enable, the cluster version now 3.5: %v", err)
	}
}

// Cancelled half-way, the cluster stays at the lower cluster version until every member runs
// the higher minor again.
func TestCancelledDowngradeRisesOnlyWithEveryMember(t *testing.T) {
	f := threeVoters(t)
	ctx := t.Context()
	if _, err := f.DowngradeEnable(ctx, "3.5"); err != nil {
		t.Fatal(err)
	}
	f.SetMemberVersion(2, "3.5.35")
	if err := f.DowngradeCancel(ctx); err != nil {
		t.Fatal(err)
	}
	if info, cv := f.Downgrade(); info.Enabled || cv != "3.5.0" {
		t.Fatalf("after cancel: %+v at %s; want disabled at 3.5.0", info, cv)
	}
	f.SetMemberVersion(2, "3.6.16")
	if _, cv := f.Downgrade(); cv != "3.6.0" {
		t.Fatalf("every member on 3.6 again: cluster version %s; want 3.6.0", cv)
	}
}
