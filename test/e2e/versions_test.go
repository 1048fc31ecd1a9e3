package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
	"github.com/quorumkeeper/etcd-operator/internal/testrestore"
)

// The oldest and newest patch of each minor the operator supports, end to end: etcd 3.7
// (created, upgraded to from 3.6, snapshot and restore with 3.7's etcdutl) and the oldest 3.5
// (created, probed without /livez and /readyz, refused a scale-out its learner promotion
// makes unsafe, upgraded to the newest 3.5 and on to 3.6).

// A cluster created at 3.7.3 (spec.version written with its leading v, as the official
// guide writes versions) serves, its Pods run the 3.7.3 image with no flag 3.7 removed, every
// member reports 3.7.3, and it scales out through a learner under a writer.
func TestCreateAt37(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	createClusterAt(t, ns, "at37", 3, "v"+etcd37)
	c := waitSettled(t, ns, "at37", 3, 4*time.Minute)
	if got := runningVersions(c, etcd37); got != 3 || c.Status.Version != etcd37 {
		t.Fatalf("%d of 3 members report %s, status.version %q: %+v", got, etcd37, c.Status.Version, c.Status.Members)
	}
	checkEtcdPods(t, ns, "at37", etcd37)
	w := startWriter(t, ns, "at37", "at37")
	setReplicas(t, ns, "at37", 4)
	waitSettled(t, ns, "at37", 4, 4*time.Minute)
	w.stopAndVerify(t, 20)
}

// checkEtcdPods checks that every member Pod of cluster runs the etcd image of version and
// passes etcd no flag 3.7 removed (--experimental-*, the v2 store's --enable-v2).
func checkEtcdPods(t *testing.T, ns, cluster, version string) {
	t.Helper()
	pods := &corev1.PodList{}
	if err := k8s.List(context.Background(), pods, client.InNamespace(ns), client.MatchingLabels{etcdv1.LabelCluster: cluster}); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) == 0 {
		t.Fatalf("no member Pod of %s", cluster)
	}
	for _, p := range pods.Items {
		for _, ctr := range p.Spec.Containers {
			if ctr.Name != specs.ContainerName {
				continue
			}
			if want := specs.Image(specs.DefaultImageRepository, version); ctr.Image != want {
				t.Errorf("Pod %s runs %s, want %s", p.Name, ctr.Image, want)
			}
			for _, arg := range ctr.Args {
				if strings.HasPrefix(arg, "--experimental-") || strings.HasPrefix(arg, "--enable-v2") {
					t.Errorf("Pod %s passes etcd %s, which etcd 3.7 removed", p.Name, arg)
				}
			}
		}
	}
}

// Three members on 3.6.16 upgraded to 3.7.3 with a writer throughout: one member at a time,
// the leader last, the same member IDs, every acknowledged write read back.
func TestUpgradeFrom36To37(t *testing.T) {
	t.Parallel()
	upgradeUnderLoadTo(t, "to37", 3, etcdVersion, etcd37)
}

// Three members on 3.5.0, the oldest accepted release, which serves neither /livez nor
// /readyz: they become Ready on the probes chosen for it. A scale-out is refused with
// MembershipUnsafe naming 3.5.20 (etcd's learner promotion is broken before it) while the
// upgrade to 3.5.35, the way out, goes on under a writer; once every member runs 3.5.35 the
// refused member joins, and the four move on to 3.6.16 with their IDs.
func TestUpgradeFromOldest35(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	createClusterAt(t, ns, "old35", 3, oldest35)
	c := waitSettled(t, ns, "old35", 3, 6*time.Minute)
	if got := runningVersions(c, oldest35); got != 3 || c.Status.Version != oldest35 {
		t.Fatalf("%d of 3 members report %s, status.version %q: %+v", got, oldest35, c.Status.Version, c.Status.Members)
	}
	checkEtcdPods(t, ns, "old35", oldest35)

	setReplicas(t, ns, "old35", 4)
	eventually(t, 2*time.Minute, "the scale-out on "+oldest35+" refused with "+etcdv1.ReasonMembershipUnsafe, func() error {
		c := getCluster(t, ns, "old35")
		cond := meta.FindStatusCondition(c.Status.Conditions, etcdv1.ConditionProgressing)
		if cond == nil || cond.Reason != etcdv1.ReasonMembershipUnsafe || !strings.Contains(cond.Message, "3.5.20") {
			return fmt.Errorf("Progressing %+v", cond)
		}
		return nil
	})
	members := &etcdv1.EtcdMemberList{}
	if err := k8s.List(context.Background(), members, client.InNamespace(ns), client.MatchingLabels{etcdv1.LabelCluster: "old35"}); err != nil {
		t.Fatal(err)
	}
	if len(members.Items) != 3 {
		t.Fatalf("%d EtcdMembers on %s after the refused scale-out, want 3", len(members.Items), oldest35)
	}

	w := startWriter(t, ns, "old35", "old35")
	setVersion(t, ns, "old35", newest35)
	eventually(t, 10*time.Minute, "every member of old35 running "+newest35, func() error {
		c := getCluster(t, ns, "old35")
		// The refused fourth member may join as soon as the last one moves: on 3.5.35 too.
		if got := runningVersions(c, newest35); got < 3 || got != len(c.Status.Members) || c.Status.Version != newest35 {
			return fmt.Errorf("%d of %d members run %s, status.version %q", got, len(c.Status.Members), newest35, c.Status.Version)
		}
		return nil
	})
	before := waitSettled(t, ns, "old35", 4, 6*time.Minute)
	w.stopAndVerify(t, 20)

	w = startWriter(t, ns, "old35", "old35-to36")
	setVersion(t, ns, "old35", etcdVersion)
	waitUpgraded(t, ns, "old35", etcdVersion, before)
	w.stopAndVerify(t, 20)
}

// A snapshot of a live 3.7.3 cluster to a PVC, and a new 3.7.3 cluster restored from it
// (etcdutl of 3.7.3, in the member's own image): every key, value and revision the source had
// at the snapshot's revision.
func TestSnapshotRestoreAt37(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	create(t, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "backups", Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}})
	createClusterAt(t, ns, "source", 3, etcd37)
	waitSettled(t, ns, "source", 3, 4*time.Minute)
	src := dialClusterWith(t, ns, "source", access{})
	loadKeys(t, src, "/load", 2000)
	w := startWriter(t, ns, "source", "/writer")
	createSnapshot(t, ns, "snap", "source", etcdv1.SnapshotLocation{PVC: &etcdv1.PVCSnapshotLocation{ClaimName: "backups", SubPath: "etcd"}})
	s := waitSnapshotDone(t, ns, "snap", etcdv1.SnapshotComplete)
	w.stopAndVerify(t, 10)
	if s.Status.EtcdVersion != etcd37 {
		t.Fatalf("snapshot status.etcdVersion %q, want %s", s.Status.EtcdVersion, etcd37)
	}

	create(t, &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "restored", Namespace: ns}, Spec: etcdv1.EtcdClusterSpec{
		Replicas: ptr(int32(3)), Version: etcd37,
		Bootstrap: &etcdv1.BootstrapSpec{Restore: &etcdv1.RestoreSpec{Source: etcdv1.RestoreSource{
			PVC: &etcdv1.PVCSnapshotLocation{ClaimName: "backups", SubPath: "etcd/snap.db"}}}}}})
	restored := waitSettled(t, ns, "restored", 3, 6*time.Minute)
	if got := runningVersions(restored, etcd37); got != 3 {
		t.Fatalf("%d of 3 restored members report %s: %+v", got, etcd37, restored.Status.Members)
	}
	testrestore.Compare(t, src, dialClusterWith(t, ns, "restored", access{}), s.Status.Revision, 2000)
}
