package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

// Versions the local cluster's image map has besides etcdVersion (hack/images.sh). Each is
// built from source in CI, so there are only these: the oldest and newest patch of each
// minor the operator supports (3.6's newest is etcdVersion), and the previous 3.6 patch.
// oldest35 is also the oldest version the CRD accepts, and serves neither /livez nor /readyz.
const (
	previousPatch = "3.6.15"
	newest35      = "3.5.35"
	oldest35      = "3.5.0"
	etcd37        = "3.7.3"
)

func createClusterAt(t *testing.T, ns, name string, replicas int32, version string) {
	t.Helper()
	c := &etcdv1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       etcdv1.EtcdClusterSpec{Replicas: &replicas, Version: version},
	}
	if err := k8s.Create(context.Background(), c); err != nil {
		t.Fatal(err)
	}
}

func setVersion(t *testing.T, ns, name, version string) {
	t.Helper()
	c := getCluster(t, ns, name)
	patch := client.MergeFrom(c.DeepCopy())
	c.Spec.Version = version
	if err := k8s.Patch(context.Background(), c, patch); err != nil {
		t.Fatal(err)
	}
}

// runningVersions counts the members whose etcd reports version.
func runningVersions(c *etcdv1.EtcdCluster, version string) int {
	n := 0
	for _, m := range c.Status.Members {
		if m.Version == version {
			n++
		}
	}
	return n
}

// waitUpgraded waits until every member's etcd reports version, status.version says so, and
// the cluster is settled; the member IDs must be those of before.
func waitUpgraded(t *testing.T, ns, name, version string, before *etcdv1.EtcdCluster) {
	t.Helper()
	n := int32(len(before.Status.Members))
	eventually(t, 10*time.Minute, fmt.Sprintf("every member of %s running %s", name, version), func() error {
		c := getCluster(t, ns, name)
		if got := runningVersions(c, version); got != int(n) || c.Status.Version != version {
			return fmt.Errorf("%d of %d members run %s, status.version %q", got, n, version, c.Status.Version)
		}
		return nil
	})
	after := waitSettled(t, ns, name, n, 4*time.Minute)
	if b, a := fmt.Sprint(sorted(memberIDs(before))), fmt.Sprint(sorted(memberIDs(after))); a != b {
		t.Fatalf("member IDs changed across the upgrade:\n before %s\n after  %s", b, a)
	}
}

// A patch upgrade of 3 members with the operator killed once the first member runs the new
// version: the successor finishes it, no acknowledged write is lost, and a downgrade is then
// refused at kubectl apply with the CRD's message.
func TestPatchUpgradeSurvivesTheOperatorKilled(t *testing.T) {
	ns := namespace(t)
	createClusterAt(t, ns, "patch", 3, previousPatch)
	before := waitSettled(t, ns, "patch", 3, 4*time.Minute)
	if before.Status.Version != previousPatch {
		t.Fatalf("status.version %q, want %s", before.Status.Version, previousPatch)
	}
	w := startWriter(t, ns, "patch", "patch")
	setVersion(t, ns, "patch", etcdVersion)
	eventually(t, 5*time.Minute, "the first member running "+etcdVersion, func() error {
		c := getCluster(t, ns, "patch")
		if got := runningVersions(c, etcdVersion); got == 0 || got == 3 {
			return fmt.Errorf("%d of 3 members run %s", got, etcdVersion)
		}
		return nil
	})
	killOperator(t)
	waitUpgraded(t, ns, "patch", etcdVersion, before)
	w.stopAndVerify(t, 20)

	manifest := fmt.Sprintf("apiVersion: etcd-operator.cozystack.io/v1alpha2\nkind: EtcdCluster\nmetadata:\n  name: patch\nspec:\n  replicas: 3\n  version: %s\n", previousPatch)
	out, err := runKubectl(ns, manifest, "apply", "-f", "-")
	want := "spec.version cannot go down from " + etcdVersion + " to " + previousPatch
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("kubectl apply of a downgrade: %v %s; want it refused with %q", err, out, want)
	}
	if c := getCluster(t, ns, "patch"); c.Spec.Version != etcdVersion {
		t.Fatalf("the refused downgrade changed spec.version to %s", c.Spec.Version)
	}
}

// Five members on the newest 3.5 patch, the oldest version the CRD accepts (so its probes
// are shown to be served), upgraded to 3.6 with a writer throughout: one member at a time,
// the leader last, with the same member IDs, no acknowledged write lost.
func TestUpgradeFrom35To36(t *testing.T) {
	t.Parallel()
	upgradeUnderLoad(t, "minor", 5, newest35)
}

// Five members on the previous 3.6 patch upgraded to the current one with a writer
// throughout, as TestUpgradeFrom35To36.
func TestPatchUpgradeOfFive(t *testing.T) {
	t.Parallel()
	upgradeUnderLoad(t, "five", 5, previousPatch)
}

// upgradeUnderLoad creates a cluster of n members at version from, checks that every member's
// etcd reports it, and upgrades the cluster to etcdVersion while a writer runs: every member
// ends on etcdVersion (as its etcd reports it) with its member ID, each member's Pod was
// replaced exactly once, never two at a time, and the leader last (rollWatch), and every
// acknowledged write is read back; only the puts the restarts and elections explain may fail.
func upgradeUnderLoad(t *testing.T, name string, n int32, from string) {
	t.Helper()
	upgradeUnderLoadTo(t, name, n, from, etcdVersion)
}

// upgradeUnderLoadTo is upgradeUnderLoad to the version to.
func upgradeUnderLoadTo(t *testing.T, name string, n int32, from, to string) {
	t.Helper()
	ns := namespace(t)
	createClusterAt(t, ns, name, n, from)
	before := waitSettled(t, ns, name, n, 6*time.Minute)
	if got := runningVersions(before, from); got != int(n) || before.Status.Version != from {
		t.Fatalf("%d of %d members report %s, status.version %q: %+v", got, n, from, before.Status.Version, before.Status.Members)
	}
	roll := watchRoll(t, ns, name, before)
	w := startWriter(t, ns, name, name)
	setVersion(t, ns, name, to)
	waitUpgraded(t, ns, name, to, before)
	w.stopAndVerifyAtMost(t, 20, roll.check(t, "upgrade"))
}

// noSuchRelease is a version the CRD accepts (X.Y.Z, newer than etcdVersion) whose image the
// local cluster's image map lacks: a member Pod of it fails to pull, as a registry miss would.
const noSuchRelease = "3.6.99"

// spec.version set to a release with no image, then set back: the member moved to it, whose
// Pod cannot pull its image and so never ran it, gets a Pod of the fixed spec (the roll would
// wait for it forever), the cluster settles with the same member IDs, and no acknowledged
// write is lost. Going back is accepted because no member ever ran the missing release.
func TestAVersionWithNoImageCanBeSetBack(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	createClusterAt(t, ns, "revert", 3, etcdVersion)
	before := waitSettled(t, ns, "revert", 3, 4*time.Minute)
	w := startWriter(t, ns, "revert", "revert")
	setVersion(t, ns, "revert", noSuchRelease)

	var stuck corev1.Pod
	eventually(t, 5*time.Minute, "a member Pod failing to pull etcd "+noSuchRelease, func() error {
		pods := &corev1.PodList{}
		if err := k8s.List(context.Background(), pods, client.InNamespace(ns), client.MatchingLabels{etcdv1.LabelCluster: "revert"}); err != nil {
			return err
		}
		for _, p := range pods.Items {
			for _, cs := range p.Status.ContainerStatuses {
				if w := cs.State.Waiting; w != nil && (w.Reason == "ErrImagePull" || w.Reason == "ImagePullBackOff") {
					stuck = p
					return nil
				}
			}
		}
		return fmt.Errorf("no member Pod fails to pull its image yet")
	})

	setVersion(t, ns, "revert", etcdVersion)
	eventually(t, 5*time.Minute, "member "+stuck.Name+" in a new Pod of etcd "+etcdVersion, func() error {
		m := &etcdv1.EtcdMember{}
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: stuck.Name}, m); err != nil {
			return err
		}
		p := &corev1.Pod{}
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: stuck.Name}, p); err != nil {
			return err
		}
		if m.Spec.Version != etcdVersion || p.UID == stuck.UID || !podIsReady(p) {
			return fmt.Errorf("member at %s; Pod %s (was %s), ready %v", m.Spec.Version, p.UID, stuck.UID, podIsReady(p))
		}
		return nil
	})
	after := waitSettled(t, ns, "revert", 3, 4*time.Minute)
	if b, a := fmt.Sprint(sorted(memberIDs(before))), fmt.Sprint(sorted(memberIDs(after))); a != b {
		t.Fatalf("member IDs changed:\n before %s\n after  %s", b, a)
	}
	if got := runningVersions(after, etcdVersion); got != 3 {
		t.Fatalf("%d of 3 members run %s: %+v", got, etcdVersion, after.Status.Members)
	}
	if !eventAbout(t, ns, "PodReplaced", stuck.Name) {
		t.Errorf("no PodReplaced event for %s: %v", stuck.Name, eventReasons(t, ns))
	}
	w.stopAndVerify(t, 20)
}
