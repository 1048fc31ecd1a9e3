package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

// Two of three members stopped with their data intact (their Pods deleted, a ResourceQuota
// keeping new ones out) and a recovery from the survivor: the cluster is back to 3 voters
// under new names, and the two discarded members' PVCs are still there, annotated as
// discarded data with their member IDs and owned by nothing, named by DiscardedDataKept.
// Then spec.quorumLoss.keepDiscardedDataSeconds, set to what the cluster has served since plus
// 20 s, lets the operator delete them, 20 s later and not before.
func TestRecoveryKeepsTheDiscardedMembersData(t *testing.T) {
	t.Parallel()
	ns, before, w := loadedCluster(t, "kept", 3)
	w.stopAndVerify(t, 10)
	survivor, discarded := before.Status.Members[0], before.Status.Members[1:]
	stopWithTheirData(t, ns, "kept", discarded)

	c := getCluster(t, ns, "kept")
	patch := client.MergeFrom(c.DeepCopy())
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	c.Annotations[etcdv1.AnnotationRecoverFrom] = survivor.Name
	if err := k8s.Patch(context.Background(), c, patch); err != nil {
		t.Fatal(err)
	}
	eventually(t, 4*time.Minute, "QuorumRecovered", func() error {
		if !eventAbout(t, ns, "QuorumRecovered", survivor.Name) {
			return fmt.Errorf("events %v", eventReasons(t, ns))
		}
		return nil
	})
	if err := k8s.Delete(context.Background(), &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "one-pod"}}); err != nil {
		t.Fatal(err)
	}
	after := waitSettledWithout(t, ns, "kept", 3, discarded, 6*time.Minute)
	t.Logf("recovered: members %v", memberIDs(after))
	if after.Status.Voters != 3 || memberIDs(after)[survivor.Name] != survivor.ID {
		t.Fatalf("after the recovery: %d voters, members %v", after.Status.Voters, memberIDs(after))
	}
	for _, m := range discarded {
		if _, ok := memberIDs(after)[m.Name]; ok {
			t.Fatalf("a new member took the name of discarded %s: %v", m.Name, memberIDs(after))
		}
		checkKeptAsDiscarded(t, ns, m)
	}
	cond := meta.FindStatusCondition(after.Status.Conditions, etcdv1.ConditionDiscardedDataKept)
	if cond == nil || cond.Reason != etcdv1.ReasonKeptUntilDeleted || !strings.Contains(cond.Message, discarded[0].Name+", "+discarded[1].Name) {
		t.Fatalf("DiscardedDataKept %+v", cond)
	}
	if !eventAbout(t, ns, "DiscardedDataKept", discarded[0].Name) {
		t.Errorf("no DiscardedDataKept event naming %s: %v", discarded[0].Name, eventReasons(t, ns))
	}
	w.stopAndVerify(t, 10) // every acknowledged write, read back through the recovered cluster
	if out := mustPlugin(t, buildPlugin(t), ns, "discarded", "kept"); !strings.Contains(out, discarded[0].Name) || !strings.Contains(out, discarded[1].ID) {
		t.Errorf("kubectl etcd discarded kept:\n%s", out)
	}

	releaseAfterServing(t, ns, "kept", discarded)
}

// stopWithTheirData stops the named members for good without touching their PVCs: a quota
// of one Pod (counted before it is relied on) refuses their new Pods once theirs are deleted,
// and the cluster reports its quorum lost.
func stopWithTheirData(t *testing.T, ns, cluster string, members []etcdv1.MemberSummary) {
	t.Helper()
	podQuota(t, ns, "one-pod", 1, 3)
	for _, m := range members {
		if err := k8s.Delete(context.Background(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: m.Name}}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 3*time.Minute, "QuorumLost with 1 of 3 members answering", func() error {
		av := meta.FindStatusCondition(getCluster(t, ns, cluster).Status.Conditions, etcdv1.ConditionAvailable)
		if av == nil || av.Reason != "QuorumLost" || !strings.Contains(av.Message, "1 of 3 members answer") {
			return fmt.Errorf("Available %+v", av)
		}
		return nil
	})
}

// checkKeptAsDiscarded: the member's PVC is there, annotated as discarded data, with its
// member ID, owned by nothing, and no EtcdMember of its name exists.
func checkKeptAsDiscarded(t *testing.T, ns string, m etcdv1.MemberSummary) {
	t.Helper()
	pvc := getPVC(t, ns, m.Name)
	if _, err := time.Parse(time.RFC3339, pvc.Annotations[etcdv1.AnnotationDiscardedByRecovery]); err != nil || !pvc.DeletionTimestamp.IsZero() {
		t.Fatalf("PVC %s of discarded member %s: annotations %v, deleted at %v", pvc.Name, m.Name, pvc.Annotations, pvc.DeletionTimestamp)
	}
	if pvc.Annotations[etcdv1.AnnotationMemberID] != m.ID || len(pvc.OwnerReferences) != 0 {
		t.Fatalf("PVC %s: member ID %q (was %s), owners %v", pvc.Name, pvc.Annotations[etcdv1.AnnotationMemberID], m.ID, pvc.OwnerReferences)
	}
	err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: m.Name}, &etcdv1.EtcdMember{})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("EtcdMember %s of discarded data: %v", m.Name, err)
	}
}

// releaseAfterServing sets keepDiscardedDataSeconds to what the cluster has served since the
// PVCs were kept plus 20 s, sees them still there and the condition saying when they go, then
// waits for them to go, each no earlier than keepDiscardedDataSeconds after both its keeping
// and Available's last turn to True.
func releaseAfterServing(t *testing.T, ns, cluster string, discarded []etcdv1.MemberSummary) {
	t.Helper()
	c := getCluster(t, ns, cluster)
	since, earliest := servedSince(t, c, discarded)
	keep := time.Since(earliest).Truncate(time.Second) + 21*time.Second
	patch := client.MergeFrom(c.DeepCopy())
	c.Spec.QuorumLoss = &etcdv1.QuorumLossPolicy{KeepDiscardedDataSeconds: ptr(int32(keep / time.Second))}
	if err := k8s.Patch(context.Background(), c, patch); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "DiscardedDataKept saying when the PVCs go", func() error {
		cond := meta.FindStatusCondition(getCluster(t, ns, cluster).Status.Conditions, etcdv1.ConditionDiscardedDataKept)
		if cond == nil || cond.Reason != etcdv1.ReasonKeptUntilServed || !strings.Contains(cond.Message, discarded[0].Name+" at ") {
			return fmt.Errorf("DiscardedDataKept %+v", cond)
		}
		return nil
	})
	due := map[string]time.Time{}
	for _, m := range discarded {
		due[m.Name] = since[m.Name].Add(keep)
	}
	t.Logf("keepDiscardedDataSeconds %d, set %s after the earliest keeping or serving", int(keep/time.Second), time.Since(earliest).Truncate(time.Second))
	waitReleasedNotBefore(t, ns, discarded, due)
	if !eventAbout(t, ns, "DiscardedDataReleased", discarded[0].Name) {
		t.Errorf("no DiscardedDataReleased event: %v", eventReasons(t, ns))
	}
	eventually(t, time.Minute, "DiscardedDataKept gone", func() error {
		if cond := meta.FindStatusCondition(getCluster(t, ns, cluster).Status.Conditions, etcdv1.ConditionDiscardedDataKept); cond != nil {
			return fmt.Errorf("DiscardedDataKept %+v", cond)
		}
		return nil
	})
}

// servedSince is, for each discarded member's kept PVC, the later of its keeping and
// Available's last turn to True (from which the operator counts), and the earliest of those.
func servedSince(t *testing.T, c *etcdv1.EtcdCluster, discarded []etcdv1.MemberSummary) (map[string]time.Time, time.Time) {
	t.Helper()
	available := meta.FindStatusCondition(c.Status.Conditions, etcdv1.ConditionAvailable)
	if available == nil || available.Status != metav1.ConditionTrue {
		t.Fatalf("Available %+v", available)
	}
	since := map[string]time.Time{}
	var earliest time.Time
	for _, m := range discarded {
		kept, err := time.Parse(time.RFC3339, getPVC(t, c.Namespace, m.Name).Annotations[etcdv1.AnnotationDiscardedByRecovery])
		if err != nil {
			t.Fatal(err)
		}
		since[m.Name] = kept
		if available.LastTransitionTime.After(kept) {
			since[m.Name] = available.LastTransitionTime.Time
		}
		if earliest.IsZero() || since[m.Name].Before(earliest) {
			earliest = since[m.Name]
		}
	}
	return since, earliest
}

// waitReleasedNotBefore waits until the discarded members' PVCs are gone, and fails if one
// is seen gone before its due time.
func waitReleasedNotBefore(t *testing.T, ns string, discarded []etcdv1.MemberSummary, due map[string]time.Time) {
	t.Helper()
	var gone []string
	eventually(t, 2*time.Minute, "the kept PVCs released", func() error {
		for _, m := range discarded {
			if slices.Contains(gone, m.Name) {
				continue
			}
			err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: m.Name}, &corev1.PersistentVolumeClaim{})
			if !apierrors.IsNotFound(err) {
				return fmt.Errorf("PVC %s: %w", m.Name, err)
			}
			// Whole seconds in the annotation and the condition: a second's grace.
			if now := time.Now(); now.Before(due[m.Name].Add(-time.Second)) {
				t.Fatalf("PVC %s deleted at %s, before %s", m.Name, now.UTC().Format(time.RFC3339), due[m.Name].UTC().Format(time.RFC3339))
			}
			t.Logf("PVC %s seen gone %s after it was due", m.Name, time.Since(due[m.Name]).Truncate(100*time.Millisecond))
			gone = append(gone, m.Name)
		}
		return nil
	})
}
