package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/test/robustness"
)

// readThrough makes a linearizable read through one member: it answers only once that
// member has applied every write committed before the read.
func readThrough(t *testing.T, ip, prefix string) int {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://" + ip + ":2379"}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cli.Close() }()
	return countKeys(t, cli, prefix)
}

// suspendReconcile sets or removes the cluster's suspend-reconcile annotation and waits until
// the operator says (the ReconcileSuspended condition) that it has seen it: from then on
// neither the cluster's nor its members' reconciles act on what the test does.
func suspendReconcile(t *testing.T, ns, name string, on bool) {
	t.Helper()
	c := getCluster(t, ns, name)
	patch := client.MergeFrom(c.DeepCopy())
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	delete(c.Annotations, etcdv1.AnnotationSuspendReconcile)
	if on {
		c.Annotations[etcdv1.AnnotationSuspendReconcile] = "true"
	}
	if err := k8s.Patch(context.Background(), c, patch); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, fmt.Sprintf("ReconcileSuspended present: %v", on), func() error {
		cond := meta.FindStatusCondition(getCluster(t, ns, name).Status.Conditions, etcdv1.ConditionReconcileSuspended)
		if (cond != nil && cond.Status == metav1.ConditionTrue) != on {
			return fmt.Errorf("condition %+v", cond)
		}
		return nil
	})
}

// destroy deletes members' Pods at once (no grace) and their PVCs, and waits until the PVCs
// are gone: their data is lost.
func destroy(t *testing.T, ns string, names ...string) {
	t.Helper()
	for _, name := range names {
		meta := metav1.ObjectMeta{Namespace: ns, Name: name}
		if err := k8s.Delete(context.Background(), &corev1.Pod{ObjectMeta: meta}, client.GracePeriodSeconds(0)); client.IgnoreNotFound(err) != nil {
			t.Fatal(err)
		}
		if err := k8s.Delete(context.Background(), &corev1.PersistentVolumeClaim{ObjectMeta: meta}); client.IgnoreNotFound(err) != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 2*time.Minute, "the PVCs of "+strings.Join(names, ", ")+" gone", func() error {
		for _, name := range names {
			err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &corev1.PersistentVolumeClaim{})
			if !apierrors.IsNotFound(err) {
				return fmt.Errorf("PVC %s: %w", name, err)
			}
		}
		return nil
	})
}

// Two of three members destroyed (Pods and PVCs) while the operator is down, so that it
// cannot replace the first before the second goes: the cluster has no quorum and stays so
// until a person asks for a recovery from the survivor. Then it is back to 3 voters under the
// same cluster ID with the survivor's member ID, and every write the survivor had is there.
func TestRecoveryFromTheSurvivorOfThree(t *testing.T) {
	t.Parallel()
	ns, before, w := loadedCluster(t, "lost", 3)
	w.stopAndVerify(t, 10)
	survivor := before.Status.Members[0]
	written := readThrough(t, memberIPs(t, ns, "lost")[survivor.Name], "lost")
	t.Logf("survivor %s has applied %d writes", survivor.Name, written)

	loseTwoOfThree(t, ns, "lost", before, "1 of 3 members answer")

	// Asked through kubectl etcd: first what each member has, then the request, which the
	// plugin hands to the operator (the recover-from annotation) and whose answer it prints.
	plugin := buildPlugin(t)
	if out := mustPlugin(t, plugin, ns, "recover", "lost"); !strings.Contains(out, survivor.Name) || !strings.Contains(out, "--from MEMBER") {
		t.Fatalf("kubectl etcd recover without --from:\n%s", out)
	}
	if ann := getCluster(t, ns, "lost").Annotations; ann["etcd-operator.cozystack.io/recover-from"] != "" {
		t.Fatalf("kubectl etcd recover without --from changed the cluster: %v", ann)
	}
	if out := mustPlugin(t, plugin, ns, "recover", "lost", "--from", survivor.Name); !strings.Contains(out, "recovering from member "+survivor.Name) {
		t.Fatalf("kubectl etcd recover --from %s printed no statement of the loss:\n%s", survivor.Name, out)
	}
	after := waitSettled(t, ns, "lost", 3, 6*time.Minute)
	if after.Status.ClusterID != before.Status.ClusterID {
		t.Fatalf("cluster ID %s, was %s", after.Status.ClusterID, before.Status.ClusterID)
	}
	if ids := memberIDs(after); ids[survivor.Name] != survivor.ID {
		t.Fatalf("the survivor %s has ID %q, was %s: %v", survivor.Name, ids[survivor.Name], survivor.ID, ids)
	}
	if _, ok := after.Annotations["etcd-operator.cozystack.io/recover-from"]; ok {
		t.Error("the recovery request outlived the recovery")
	}
	for reason, part := range map[string]string{
		"QuorumRecovery":  "recovering from member " + survivor.Name,
		"QuorumRecovered": "one-member cluster from " + survivor.Name,
	} {
		if !eventAbout(t, ns, reason, part) {
			t.Errorf("no %s event saying %q: %v", reason, part, eventReasons(t, ns))
		}
	}
	// The survivor's data is the recovered cluster's: each member, the two rebuilt ones
	// included, serves exactly the writes the survivor had applied before the loss.
	for name, ip := range memberIPs(t, ns, "lost") {
		if n := readThrough(t, ip, "lost"); n != written {
			t.Errorf("member %s serves %d of the writer's keys, the survivor had %d", name, n, written)
		}
	}
	w.stopAndVerify(t, 10) // every acknowledged write, read back through the recovered cluster
}

// countKeys counts the keys under prefix through cli.
func countKeys(t *testing.T, cli *clientv3.Client, prefix string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, prefix+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	return int(resp.Count)
}

// Two of three members destroyed (Pods and PVCs) after a snapshot was taken and more was
// written: the cluster has no quorum until a person asks, through kubectl etcd, for a
// recovery from the snapshot. Then every member's data is replaced by the snapshot's: every
// key written before the snapshot is there, none written after it, the cluster has a new
// cluster ID and is back to 3 voters; the survivor's PVC, with the data after the snapshot,
// is kept as discarded data and no new member has its name. The members are destroyed while the operator leaves the
// cluster alone, as in TestRecoveryFromTheSurvivorOfThree (a running operator replaces the
// first before the second goes, and the quorum holds).
func TestRecoveryFromASnapshot(t *testing.T) {
	t.Parallel()
	ns, bucket := s3Namespace(t)
	createCluster(t, ns, "snaplost", 3)
	before := waitSettled(t, ns, "snaplost", 3, 4*time.Minute)
	cli := dialClusterWith(t, ns, "snaplost", access{})
	const keys = 2000
	loadKeys(t, cli, "/before", keys)
	create(t, &etcdv1.EtcdSnapshot{ObjectMeta: metav1.ObjectMeta{Name: "snap", Namespace: ns},
		Spec: etcdv1.EtcdSnapshotSpec{ClusterRef: corev1.LocalObjectReference{Name: "snaplost"},
			Destination: s3Location(t, bucket, "snapshots/"), DeletionPolicy: etcdv1.SnapshotDelete}})
	waitSnapshotDone(t, ns, "snap", etcdv1.SnapshotComplete)
	loadKeys(t, cli, "/after", 100)
	_ = cli.Close()

	loseTwoOfThree(t, ns, "snaplost", before, "no quorum")

	plugin := buildPlugin(t)
	if out := mustPlugin(t, plugin, ns, "recover", "snaplost", "--from-snapshot", "snap"); !strings.Contains(out, "restoring EtcdSnapshot snap at revision") ||
		!strings.Contains(out, "are lost") {
		t.Fatalf("kubectl etcd recover --from-snapshot printed no statement of the loss:\n%s", out)
	}
	// Deleted, file and all, as soon as the recovery has begun: the recovery holds it.
	eventually(t, 2*time.Minute, "the recovery recorded", func() error {
		if getCluster(t, ns, "snaplost").Status.SnapshotRecovery == nil {
			return fmt.Errorf("no status.snapshotRecovery yet")
		}
		return nil
	})
	deleteSnapshot(t, ns, "snap")
	after := waitSettled(t, ns, "snaplost", 3, 6*time.Minute)
	if after.Status.ClusterID == before.Status.ClusterID || after.Status.ClusterID == "" {
		t.Fatalf("cluster ID %q after the recovery from a snapshot, was %s", after.Status.ClusterID, before.Status.ClusterID)
	}
	if after.Status.Voters != 3 || after.Status.SnapshotRecovery != nil || after.Annotations[etcdv1.AnnotationRecoverFromSnapshot] != "" {
		t.Fatalf("after the recovery: %d voters, record %+v, annotations %v", after.Status.Voters, after.Status.SnapshotRecovery, after.Annotations)
	}
	checkKeptAsDiscarded(t, ns, before.Status.Members[0])
	if _, ok := memberIDs(after)[before.Status.Members[0].Name]; ok {
		t.Fatalf("a new member took the name of %s, whose PVC is kept: %v", before.Status.Members[0].Name, memberIDs(after))
	}
	restored := dialClusterWith(t, ns, "snaplost", access{})
	if got, lost := countKeys(t, restored, "/before"), countKeys(t, restored, "/after"); got != keys || lost != 0 {
		t.Fatalf("%d of the %d keys written before the snapshot, %d of those written after it", got, keys, lost)
	}
	for reason, part := range map[string]string{
		"QuorumRecovery":  "restoring EtcdSnapshot snap",
		"QuorumRecovered": "restored from EtcdSnapshot snap",
	} {
		if !eventAbout(t, ns, reason, part) {
			t.Errorf("no %s event saying %q: %v", reason, part, eventReasons(t, ns))
		}
	}
	w := startWriter(t, ns, "snaplost", "/after-recovery")
	time.Sleep(2 * time.Second)
	w.stopAndVerify(t, 10)
	// Nothing needs the snapshot any more: its deletion, and its file's, went on.
	waitSnapshotGone(t, ns, "snap")
	if err := objectDeleted(bucket, keyOf("snapshots/", ns, "snaplost", "snap")); err != nil {
		t.Fatalf("the deleted snapshot's file (deletionPolicy Delete): %v", err)
	}
}

// loseTwoOfThree destroys the second and third members (Pods and PVCs) while the operator
// leaves the cluster alone (the suspend-reconcile annotation), so that it cannot replace the
// first before the second goes, and waits for the cluster to report QuorumLost with a message
// containing what once it is handed back.
func loseTwoOfThree(t *testing.T, ns, cluster string, before *etcdv1.EtcdCluster, what string) {
	t.Helper()
	suspendReconcile(t, ns, cluster, true)
	destroy(t, ns, before.Status.Members[1].Name, before.Status.Members[2].Name)
	suspendReconcile(t, ns, cluster, false)
	eventually(t, 3*time.Minute, "QuorumLost: "+what, func() error {
		av := meta.FindStatusCondition(getCluster(t, ns, cluster).Status.Conditions, etcdv1.ConditionAvailable)
		if av == nil || av.Reason != "QuorumLost" || !strings.Contains(av.Message, what) {
			return fmt.Errorf("Available %+v", av)
		}
		return nil
	})
}

// spec.quorumLoss RecoverFromMostAdvancedMember with a short grace period: two of three
// members destroyed, nobody asks, and once the grace period has passed the operator recovers
// from the survivor by itself: same cluster ID, the survivor's member ID, 3 voters, and every
// write the survivor had applied.
func TestAutomaticRecoveryFromTheMostAdvancedMember(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	create(t, &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "autolost", Namespace: ns}, Spec: etcdv1.EtcdClusterSpec{
		Replicas: ptr(int32(3)), Version: etcdVersion,
		QuorumLoss: &etcdv1.QuorumLossPolicy{Policy: etcdv1.QuorumLossRecoverFromMostAdvancedMember, GracePeriodSeconds: ptr(int32(15))}}})
	before := waitSettled(t, ns, "autolost", 3, 4*time.Minute)
	w := startWriter(t, ns, "autolost", "autolost")
	time.Sleep(2 * time.Second)
	w.stopAndVerify(t, 10)
	survivor := before.Status.Members[0]
	written := readThrough(t, memberIPs(t, ns, "autolost")[survivor.Name], "autolost")

	loseTwoOfThree(t, ns, "autolost", before, "")
	// The settled status from before the loss would pass at once: the recovery's own event
	// and the destroyed members' IDs leaving the status say it happened.
	eventually(t, 3*time.Minute, "an AutomaticRecovery event naming "+survivor.Name, func() error {
		if !eventAbout(t, ns, "AutomaticRecovery", survivor.Name) {
			return fmt.Errorf("events %v", eventReasons(t, ns))
		}
		return nil
	})
	after := waitSettledWithout(t, ns, "autolost", 3, before.Status.Members[1:], 6*time.Minute)
	if after.Status.ClusterID != before.Status.ClusterID {
		t.Fatalf("cluster ID %s, was %s", after.Status.ClusterID, before.Status.ClusterID)
	}
	if ids := memberIDs(after); ids[survivor.Name] != survivor.ID {
		t.Fatalf("the survivor %s has ID %q, was %s: %v", survivor.Name, ids[survivor.Name], survivor.ID, ids)
	}
	if got := readThrough(t, memberIPs(t, ns, "autolost")[after.Status.Members[2].Name], "autolost"); got != written {
		t.Fatalf("%d writes read through a member added after the recovery, the survivor had applied %d", got, written)
	}
}

// waitSettledWithout waits until the cluster is settled at n members and none of gone's
// member IDs is listed any more.
func waitSettledWithout(t *testing.T, ns, name string, n int32, gone []etcdv1.MemberSummary, timeout time.Duration) *etcdv1.EtcdCluster {
	t.Helper()
	var c *etcdv1.EtcdCluster
	eventually(t, timeout, fmt.Sprintf("%s/%s settled at %d members without the lost members' IDs", ns, name, n), func() error {
		c = getCluster(t, ns, name)
		if err := robustness.Settled(c, n); err != nil {
			return err
		}
		ids := memberIDs(c)
		for _, m := range gone {
			for _, id := range ids {
				if id == m.ID {
					return fmt.Errorf("member ID %s of lost %s still listed: %v", m.ID, m.Name, ids)
				}
			}
		}
		return nil
	})
	return c
}
