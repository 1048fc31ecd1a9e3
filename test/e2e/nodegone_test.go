package e2e

import (
	"context"
	"fmt"
	"maps"
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
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
	"github.com/quorumkeeper/etcd-operator/test/robustness"
)

// The node of a follower is removed for good, as a cloud deletes a VM: its containers killed,
// the data of its local volumes gone, the Node deleted. While spec.nodeLoss's grace period
// (20 s here) runs, the cluster says Degraded NodeLost naming the member and the node; then
// the member is replaced: etcd's member list ends with 3 voters, the old ID gone and a new
// one added as a learner and promoted, under a writer whose every acknowledged write is read
// back. Not parallel: every Pod of the removed node goes, those of other tests too; the node
// comes back (a new, empty machine of its name) before the next test.
func TestMemberOfANodeGoneForGoodIsReplaced(t *testing.T) {
	ns := namespace(t)
	grace := int32(20)
	replicas := int32(3)
	c := &etcdv1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "nodegone", Namespace: ns},
		Spec: etcdv1.EtcdClusterSpec{Replicas: &replicas, Version: etcdVersion,
			NodeLoss: &etcdv1.NodeLossPolicy{Policy: etcdv1.NodeLossReplaceMember, GracePeriodSeconds: &grace}},
	}
	if err := k8s.Create(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	before := waitSettled(t, ns, "nodegone", 3, 4*time.Minute)
	w := startWriter(t, ns, "nodegone", "nodegone")
	victim := followerOffTheOperatorsNode(t, ns, w, before)
	pod, pvc := memberPodAndPVC(t, ns, victim.Name)
	node := pod.Spec.NodeName
	if err := robustness.RemoveNode(node); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { addNodeBack(t, node) })
	removed := time.Now()

	waitNodeLostCondition(t, ns, "nodegone", victim.Name, node)
	t.Logf("Degraded NodeLost %.0f s after the node was removed", time.Since(removed).Seconds())
	if got := membersInEvents(t, ns, etcdv1.ReasonNodeLost); !slices.Equal(got, []string{victim.Name}) {
		t.Errorf("%s events name members %v, want [%s]", etcdv1.ReasonNodeLost, got, victim.Name)
	}

	joined := waitReplacedInEtcd(t, w, before, victim)
	t.Logf("replaced %.0f s after the node was removed: %s (%s) by %s", time.Since(removed).Seconds(), victim.Name, victim.ID, joined)
	after := waitSettledAfter(t, ns, "nodegone", 3, removed, 4*time.Minute)
	// The replacement may take the lost member's name again once its PVC is gone (the
	// lowest free ordinal); what must differ is the member ID.
	newcomer := ""
	for name, id := range memberIDs(after) {
		if id == victim.ID {
			t.Errorf("members %v: %s's ID %s is still listed", memberIDs(after), victim.Name, victim.ID)
		}
		if !slices.Contains(slices.Collect(maps.Values(memberIDs(before))), id) {
			newcomer = name
		}
	}
	if newcomer == "" {
		t.Fatalf("members %v: none has a new ID (before: %v)", memberIDs(after), memberIDs(before))
	}
	for _, reason := range []string{"MemberAdded", "MemberPromoted"} {
		if got := membersInEvents(t, ns, reason); !slices.Contains(got, newcomer) {
			t.Errorf("%s events name %v, not the new member %s", reason, got, newcomer)
		}
	}
	eventually(t, 3*time.Minute, "the lost member's PVC deleted", func() error {
		gone := &corev1.PersistentVolumeClaim{}
		err := k8s.Get(context.Background(), client.ObjectKeyFromObject(pvc), gone)
		switch {
		case apierrors.IsNotFound(err) || (err == nil && gone.UID != pvc.UID):
			return nil
		case err != nil:
			return err
		}
		return fmt.Errorf("PVC %s still there (%s)", pvc.Name, gone.Status.Phase)
	})
	w.stopAndVerifyAtMost(t, 20, failuresPerDisruption)
}

// followerOffTheOperatorsNode is a follower whose Pod runs on another node than the
// operator's, so that removing its node leaves the operator running (the leader when no
// follower does).
func followerOffTheOperatorsNode(t *testing.T, ns string, w *writer, c *etcdv1.EtcdCluster) etcdv1.MemberSummary {
	t.Helper()
	operators := &corev1.PodList{}
	if err := k8s.List(context.Background(), operators, client.InNamespace(robustness.OperatorNamespace),
		client.MatchingLabels{"app.kubernetes.io/name": "etcd-operator"}); err != nil {
		t.Fatal(err)
	}
	operatorNodes := map[string]bool{}
	for _, p := range operators.Items {
		operatorNodes[p.Spec.NodeName] = true
	}
	leader := leaderID(t, w)
	var candidates []etcdv1.MemberSummary
	for _, m := range c.Status.Members {
		pod, _ := memberPodAndPVC(t, ns, m.Name)
		if m.Role == etcdv1.RoleVoter && !operatorNodes[pod.Spec.NodeName] {
			candidates = append(candidates, m)
		}
	}
	for _, m := range candidates {
		if m.ID != leader {
			return m
		}
	}
	if len(candidates) == 0 {
		t.Fatalf("every voter of %v runs on the operator's node %v", memberIDs(c), operatorNodes)
	}
	// Rare: the scheduler put both followers beside the operator. The leader's loss costs an
	// election more, which failuresPerDisruption allows for.
	t.Logf("only the leader %s runs off the operator's node: removing its node", candidates[0].Name)
	return candidates[0]
}

// waitNodeLostCondition waits until Degraded says NodeLost, naming the member, its node and
// when it will be replaced.
func waitNodeLostCondition(t *testing.T, ns, name, member, node string) {
	t.Helper()
	eventually(t, 2*time.Minute, "Degraded NodeLost naming "+member+" and "+node, func() error {
		cond := meta.FindStatusCondition(getCluster(t, ns, name).Status.Conditions, etcdv1.ConditionDegraded)
		if cond == nil || cond.Reason != etcdv1.ReasonNodeLost {
			return fmt.Errorf("Degraded %+v", cond)
		}
		for _, want := range []string{member, node, "will be replaced at"} {
			if !strings.Contains(cond.Message, want) {
				return fmt.Errorf("Degraded NodeLost says %q, not %q", cond.Message, want)
			}
		}
		return nil
	})
}

// waitReplacedInEtcd waits until etcd's member list, read through the writer's client, holds three
// voters and no learner, the victim's ID gone and an ID that none of the members before had
// among them; it returns the voters.
func waitReplacedInEtcd(t *testing.T, w *writer, before *etcdv1.EtcdCluster, victim etcdv1.MemberSummary) string {
	t.Helper()
	old := map[string]bool{}
	for _, id := range memberIDs(before) {
		old[id] = true
	}
	var voters []string
	eventually(t, 4*time.Minute, "etcd's member list with 3 voters, "+victim.ID+" replaced", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := w.cli.MemberList(ctx)
		if err != nil {
			return err
		}
		voters = nil
		fresh := 0
		for _, m := range resp.Members {
			id := etcd.FormatID(m.ID)
			switch {
			case m.IsLearner:
				return fmt.Errorf("%s (%s) is still a learner", m.Name, id)
			case id == victim.ID:
				return fmt.Errorf("%s (%s) is still a member", victim.Name, id)
			case !old[id]:
				fresh++
			}
			voters = append(voters, m.Name+"="+id)
		}
		if len(voters) != 3 || fresh != 1 {
			return fmt.Errorf("voters %v (%d new), want 3 with 1 new", voters, fresh)
		}
		return nil
	})
	return strings.Join(voters, ", ")
}

// addNodeBack has a new, empty machine join under the removed node's name and waits until
// it is Ready, so that the tests after this one have every node.
func addNodeBack(t *testing.T, node string) {
	t.Helper()
	if err := robustness.AddNode(node); err != nil {
		t.Errorf("adding node %s back: %v", node, err)
		return
	}
	eventually(t, 2*time.Minute, "node "+node+" back and Ready", func() error {
		n := &corev1.Node{}
		if err := k8s.Get(context.Background(), client.ObjectKey{Name: node}, n); err != nil {
			return err
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("node %s is not Ready: %v", node, n.Status.Conditions)
	})
}
