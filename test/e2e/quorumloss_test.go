package e2e

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

// spec.quorumLoss RecoverFromMostAdvancedMember with a 10 s grace period, the cluster paused
// for longer than that and resumed: its members take a while to attach their volumes and
// start, without a quorum meanwhile, and that is no loss. No AutomaticRecovery, the same
// cluster and member IDs, every key written before the pause.
func TestResumeAfterAPauseLongerThanTheGracePeriodIsNoQuorumLoss(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	const grace = 10 * time.Second
	create(t, &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "graced", Namespace: ns}, Spec: etcdv1.EtcdClusterSpec{
		Replicas: ptr(int32(3)), Version: etcdVersion,
		QuorumLoss: &etcdv1.QuorumLossPolicy{Policy: etcdv1.QuorumLossRecoverFromMostAdvancedMember, GracePeriodSeconds: ptr(int32(grace / time.Second))}}})
	before := waitSettled(t, ns, "graced", 3, 4*time.Minute)
	w := startWriter(t, ns, "graced", "graced")
	eventually(t, time.Minute, "writes acknowledged before the pause", func() error {
		if n := w.acknowledged(); n < 30 {
			return fmt.Errorf("%d acknowledged", n)
		}
		return nil
	})

	setReplicas(t, ns, "graced", 0) // the writer goes on: its puts fail while paused, unacknowledged
	waitPaused(t, ns, "graced", 3)
	eventually(t, time.Minute, "paused for longer than the grace period", func() error {
		c := getCluster(t, ns, "graced")
		av := meta.FindStatusCondition(c.Status.Conditions, etcdv1.ConditionAvailable)
		if paused := time.Since(av.LastTransitionTime.Time); paused < 2*grace {
			return fmt.Errorf("paused for %s", paused)
		}
		return nil
	})

	setReplicas(t, ns, "graced", 3)
	after := waitSettled(t, ns, "graced", 3, 5*time.Minute)
	if eventAbout(t, ns, "AutomaticRecovery", "") {
		t.Fatalf("the resume was taken for a quorum loss: events %v", eventReasons(t, ns))
	}
	if after.Status.ClusterID != before.Status.ClusterID {
		t.Fatalf("cluster ID %s after the resume, was %s", after.Status.ClusterID, before.Status.ClusterID)
	}
	if got, want := fmt.Sprint(sorted(memberIDs(after))), fmt.Sprint(sorted(memberIDs(before))); got != want {
		t.Fatalf("member IDs %s after the resume, were %s", got, want)
	}
	if after.Status.QuorumLostSince != nil {
		t.Fatalf("a settled cluster still counts a quorum loss since %s", after.Status.QuorumLostSince)
	}
	w.stopAndVerify(t, 30) // every acknowledged write, read back after the resume
}
