package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

// A recovery asked from an EtcdSnapshot whose stored file was removed from MinIO behind the
// operator's back (a bucket lifecycle rule, a person): the operator reads the file before it
// discards anything, finds it gone and refuses, naming SnapshotNotFound. The quorum is lost
// by cutting two members off the network (their data stays), so that once they are back the
// cluster must serve every key it had, on every member's own PVC: nothing was discarded.
func TestRecoveryFromARemovedSnapshotFileIsRefused(t *testing.T) {
	t.Parallel()
	ns, bucket := s3Namespace(t)
	createCluster(t, ns, "unverified", 3)
	before := waitSettled(t, ns, "unverified", 3, 4*time.Minute)
	cli := dialClusterWith(t, ns, "unverified", access{})
	loadKeys(t, cli, "/before", 500)
	createSnapshot(t, ns, "snap", "unverified", s3Location(t, bucket, "snapshots/"))
	snap := waitSnapshotDone(t, ns, "snap", etcdv1.SnapshotComplete)
	loadKeys(t, cli, "/after", 100)
	_ = cli.Close()
	removeStoredFile(t, bucket, snap)
	pvcs := clusterPVCs(t, ns, "unverified")

	cut := []string{before.Status.Members[1].Name, before.Status.Members[2].Name}
	cutAt := time.Now()
	for _, name := range cut {
		setPodLink(t, ns, name, "down")
	}
	eventually(t, 3*time.Minute, "QuorumLost", func() error {
		av := meta.FindStatusCondition(getCluster(t, ns, "unverified").Status.Conditions, etcdv1.ConditionAvailable)
		if av == nil || av.Reason != "QuorumLost" {
			return fmt.Errorf("Available %+v", av)
		}
		return nil
	})

	checkRecoveryOfARemovedFileRefused(t, ns, before, snap)
	checkNothingDiscarded(t, ns, "unverified", pvcs)

	for _, name := range cut {
		setPodLink(t, ns, name, "up")
	}
	// Settled since the cut, not since the heal: the operator may see the quorum back within
	// the second of the heal, and condition times have whole seconds (SeenSince). The status
	// said QuorumLost in between, so a settled one is the operator's answer to the heal.
	after := waitSettledAfter(t, ns, "unverified", 3, cutAt, 5*time.Minute)
	if after.Status.ClusterID != before.Status.ClusterID || after.Annotations[etcdv1.AnnotationRecoverFromSnapshot] != "" {
		t.Fatalf("after the partition: cluster ID %q (was %s), annotations %v", after.Status.ClusterID, before.Status.ClusterID, after.Annotations)
	}
	checkNothingDiscarded(t, ns, "unverified", pvcs)
	if ids := memberIDs(after); len(ids) != 3 || ids[cut[0]] != before.Status.Members[1].ID || ids[cut[1]] != before.Status.Members[2].ID {
		t.Fatalf("member IDs %v, were %+v", ids, before.Status.Members)
	}
	restored := dialClusterWith(t, ns, "unverified", access{})
	if b, a := countKeys(t, restored, "/before"), countKeys(t, restored, "/after"); b != 500 || a != 100 {
		t.Fatalf("%d of 500 keys written before the snapshot, %d of 100 written after it", b, a)
	}
}

// checkRecoveryOfARemovedFileRefused asks, with the plugin, for a recovery of the cluster
// "unverified" from EtcdSnapshot snap, whose file is gone, and checks it is refused naming
// SnapshotNotFound, with events saying so, and the cluster as before.
func checkRecoveryOfARemovedFileRefused(t *testing.T, ns string, before *etcdv1.EtcdCluster, snap *etcdv1.EtcdSnapshot) {
	t.Helper()
	out, err := runPlugin(buildPlugin(t), ns, "recover", "unverified", "--from-snapshot", "snap", "--timeout", "3m")
	if err == nil || !strings.Contains(err.Error(), "SnapshotNotFound") || !strings.Contains(err.Error(), "nothing was changed") {
		t.Fatalf("kubectl etcd recover --from-snapshot of a removed file: %v\n%s", err, out)
	}
	for reason, part := range map[string]string{"VerifyingSnapshot": snap.Status.Artifact.URI, etcdv1.ReasonRecoveryRefused: "SnapshotNotFound"} {
		if !eventAbout(t, ns, reason, part) {
			t.Errorf("no %s event saying %q: %v", reason, part, eventReasons(t, ns))
		}
	}
	c := getCluster(t, ns, "unverified")
	if c.Status.SnapshotRecovery != nil || c.Status.ClusterID != before.Status.ClusterID {
		t.Fatalf("a refused recovery changed the cluster: record %+v, cluster ID %q (was %s)", c.Status.SnapshotRecovery, c.Status.ClusterID, before.Status.ClusterID)
	}
}

// clusterPVCs maps the cluster's PVCs to their UIDs.
func clusterPVCs(t *testing.T, ns, cluster string) map[string]types.UID {
	t.Helper()
	list := &corev1.PersistentVolumeClaimList{}
	if err := k8s.List(context.Background(), list, client.InNamespace(ns), client.MatchingLabels{etcdv1.LabelCluster: cluster}); err != nil {
		t.Fatal(err)
	}
	out := map[string]types.UID{}
	for _, p := range list.Items {
		out[p.Name] = p.UID
	}
	return out
}

// checkNothingDiscarded: the very PVCs of before, none going, and every EtcdMember there,
// none marked to discard its data or going.
func checkNothingDiscarded(t *testing.T, ns, cluster string, pvcs map[string]types.UID) {
	t.Helper()
	list := &corev1.PersistentVolumeClaimList{}
	if err := k8s.List(context.Background(), list, client.InNamespace(ns), client.MatchingLabels{etcdv1.LabelCluster: cluster}); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != len(pvcs) || len(pvcs) != 3 {
		t.Fatalf("%d PVCs, were %v", len(list.Items), pvcs)
	}
	for _, p := range list.Items {
		if pvcs[p.Name] != p.UID || !p.DeletionTimestamp.IsZero() {
			t.Fatalf("PVC %s (UID %s, deleting %v) is not the one of before (%s)", p.Name, p.UID, p.DeletionTimestamp, pvcs[p.Name])
		}
	}
	members := &etcdv1.EtcdMemberList{}
	if err := k8s.List(context.Background(), members, client.InNamespace(ns), client.MatchingLabels{etcdv1.LabelCluster: cluster}); err != nil {
		t.Fatal(err)
	}
	if len(members.Items) != 3 {
		t.Fatalf("%d EtcdMembers", len(members.Items))
	}
	for _, m := range members.Items {
		if m.Annotations[etcdv1.AnnotationDiscard] != "" || !m.DeletionTimestamp.IsZero() {
			t.Fatalf("EtcdMember %s marked to discard its data or going", m.Name)
		}
	}
}

// setPodLink turns the network link of a member's Pod down or up: the local cluster's node
// agent gives each Pod the network namespace "lc-" and the first 8 characters of its UID,
// with its end of the veth as eth0. The link comes back up when the test ends.
func setPodLink(t *testing.T, ns, pod, state string) {
	t.Helper()
	p := &corev1.Pod{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: pod}, p); err != nil {
		t.Fatal(err)
	}
	netns := "lc-" + string(p.UID)[:8]
	run := func(state string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if out, err := exec.CommandContext(ctx, "ip", "-n", netns, "link", "set", "dev", "eth0", state).CombinedOutput(); err != nil {
			return fmt.Errorf("ip -n %s link set dev eth0 %s: %w: %s", netns, state, err, out)
		}
		return nil
	}
	if err := run(state); err != nil {
		t.Fatal(err)
	}
	if state == "down" {
		t.Cleanup(func() { _ = run("up") })
	}
}

// removeStoredFile removes the snapshot's file, at the key its status records, from the
// bucket behind the operator's back. The file must be there first: S3 answers the removal of
// a key that does not exist with success, which would leave the file for the test to find.
func removeStoredFile(t *testing.T, bucket string, snap *etcdv1.EtcdSnapshot) {
	t.Helper()
	key := strings.TrimPrefix(snap.Status.Artifact.URI, "s3://"+bucket+"/")
	admin := localS3(t).admin
	if _, err := admin.StatObject(context.Background(), bucket, key, minio.StatObjectOptions{}); err != nil {
		t.Fatalf("the snapshot's file %s (from %s) before its removal: %v", key, snap.Status.Artifact.URI, err)
	}
	if err := admin.RemoveObject(context.Background(), bucket, key, minio.RemoveObjectOptions{}); err != nil {
		t.Fatal(err)
	}
}
