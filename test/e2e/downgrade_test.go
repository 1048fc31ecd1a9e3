package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/api/meta"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

// Going back a version (docs/day-two.md): etcd's downgrade, one minor at a time, run by the
// operator.

// Three members on 3.6.16 downgraded to 3.5.35 with a writer throughout: etcd's downgrade is
// enabled, the members restart one at a time on 3.5.35 with their IDs, the leader last, etcd
// reports the downgrade over, and every acknowledged write is read back; only the puts the
// restarts and elections explain may fail, as in an upgrade.
func TestDowngradeFrom36To35UnderLoad(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	createClusterAt(t, ns, "down", 3, etcdVersion)
	before := waitSettled(t, ns, "down", 3, 6*time.Minute)
	if got := runningVersions(before, etcdVersion); got != 3 {
		t.Fatalf("%d of 3 members report %s: %+v", got, etcdVersion, before.Status.Members)
	}
	roll := watchRoll(t, ns, "down", before)
	w := startWriter(t, ns, "down", "down")
	setVersion(t, ns, "down", newest35)
	eventually(t, 3*time.Minute, "the cluster downgrading", func() error {
		cond := meta.FindStatusCondition(getCluster(t, ns, "down").Status.Conditions, etcdv1.ConditionProgressing)
		if !eventAbout(t, ns, etcdv1.ReasonDowngradeEnabled, "3.5") {
			return fmt.Errorf("no DowngradeEnabled event yet; Progressing %+v", cond)
		}
		return nil
	})
	waitUpgraded(t, ns, "down", newest35, before)
	w.stopAndVerifyAtMost(t, 20, roll.check(t, "downgrade"))
	checkEtcdPods(t, ns, "down", newest35)

	// etcd's own word that the downgrade is over: a validation of 3.4, which changes nothing,
	// is refused with "downgrade in progress" while it is on (3.5 members report nothing of it
	// in their status).
	cli := dialClusterWith(t, ns, "down", access{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.Downgrade(ctx, clientv3.DowngradeValidate, "3.4.0"); errors.Is(err, rpctypes.ErrDowngradeInProcess) || (err != nil && strings.Contains(err.Error(), "downgrade job in progress")) {
		t.Fatalf("the cluster is settled but etcd still has the downgrade enabled: %v", err)
	} else if err != nil {
		t.Fatalf("asking etcd about the downgrade: %v", err)
	}
	for _, reason := range []string{etcdv1.ReasonDowngradingMember, etcdv1.ReasonDowngraded} {
		if !eventAbout(t, ns, reason, "") {
			t.Errorf("no %s event: %v", reason, eventReasons(t, ns))
		}
	}
}

// Two minors down at once (3.7.3 -> 3.5.35) is refused at kubectl apply with the CRD's
// reason, and spec.version stays.
func TestDowngradeOfTwoMinorsIsRefused(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	createClusterAt(t, ns, "twominors", 3, etcd37)
	c := waitSettled(t, ns, "twominors", 3, 6*time.Minute)
	if got := runningVersions(c, etcd37); got != 3 {
		t.Fatalf("%d of 3 members report %s: %+v", got, etcd37, c.Status.Members)
	}
	manifest := fmt.Sprintf("apiVersion: etcd-operator.cozystack.io/v1alpha2\nkind: EtcdCluster\nmetadata:\n  name: twominors\nspec:\n  replicas: 3\n  version: %s\n", newest35)
	out, err := runKubectl(ns, manifest, "apply", "-f", "-")
	want := "spec.version cannot go down from " + etcd37 + " to " + newest35 + " at once: a member has run a release more than one minor above it"
	if err == nil || !strings.Contains(err.Error()+out, want) {
		t.Fatalf("kubectl apply of 3.7.3 -> 3.5.35: %v %s; want it refused with %q", err, out, want)
	}
	if got := getCluster(t, ns, "twominors"); got.Spec.Version != etcd37 || got.Generation != c.Generation {
		t.Fatalf("the refused downgrade changed the cluster: version %s, generation %d (was %d)", got.Spec.Version, got.Generation, c.Generation)
	}
}
