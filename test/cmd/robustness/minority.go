package main

import (
	"context"
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/test/robustness"
)

// minorityHold is the least time the operator-minority partition lasts: four grace periods
// of spec.quorumLoss, so that an operator counting the partition as a quorum loss has time to
// act on it.
const minorityHold = 4 * pauseGrace

// operatorMinorityTrial partitions the operator's Pod and one member chosen at random from
// the other two members, which keep a quorum and go on serving the workload, for 40 to 60 s,
// while spec.quorumLoss is automatic. From its side the operator sees one member of three
// answer: the quorum it cannot see still serves, so it must not recover from the member it
// sees (that would discard every write the majority took meanwhile, and stop the majority).
// Both sides still reach the API server and the workload (the host). After the partition
// heals the cluster must settle with its cluster ID and member IDs and no AutomaticRecovery;
// the history checks then find any lost write.
func operatorMinorityTrial(ctx context.Context, t *trialEnv) error {
	before, err := t.c.get(ctx)
	if err != nil {
		return err
	}
	minority, majority, err := t.minoritySides(ctx)
	if err != nil {
		return err
	}
	hold := minorityHold + time.Duration(t.rnd.Int64N(int64(20*time.Second)))
	logf("trial %d: the operator and %s cut off from %s for %s (spec.quorumLoss grace %s)",
		t.index, minority[1].Name, podNames(majority), hold.Round(time.Millisecond), pauseGrace)
	partitioned := time.Now()
	if err := partition(ctx, "add", minority, majority); err != nil {
		_ = partition(context.WithoutCancel(ctx), "del", minority, majority)
		return err
	}
	sawLoss, err := t.c.watchPartition(ctx, hold)
	if healErr := partition(context.WithoutCancel(ctx), "del", minority, majority); err == nil {
		err = healErr
	}
	if err != nil {
		return err
	}
	if !sawLoss {
		return fmt.Errorf("the partition did not cut the operator off from the majority: Available never said QuorumLost within %s", hold.Round(time.Second))
	}
	if err := t.c.waitPodsReady(ctx, int(t.replicas)); err != nil {
		return err
	}
	if err := t.c.waitSettled(ctx, t.replicas, partitioned); err != nil {
		return err
	}
	return t.c.sameClusterWithoutRecovery(ctx, before)
}

// minoritySides are the operator's Pod with a member chosen at random, and the other members.
func (t *trialEnv) minoritySides(ctx context.Context) (minority, majority []*corev1.Pod, err error) {
	operator, err := operatorPod(ctx, t.c.e.k8s)
	if err != nil {
		return nil, nil, err
	}
	pods, err := t.c.pods(ctx)
	if err != nil {
		return nil, nil, err
	}
	if len(pods) != 3 {
		return nil, nil, fmt.Errorf("%d member Pods, the scenario needs 3", len(pods))
	}
	pick := t.rnd.IntN(len(pods))
	minority = []*corev1.Pod{operator, &pods[pick]}
	for i := range pods {
		if i != pick {
			majority = append(majority, &pods[i])
		}
	}
	return minority, majority, nil
}

// operatorPod is the operator's one running Pod.
func operatorPod(ctx context.Context, k8s client.Reader) (*corev1.Pod, error) {
	pods := &corev1.PodList{}
	if err := k8s.List(ctx, pods, client.InNamespace(robustness.OperatorNamespace), client.MatchingLabels{"app.kubernetes.io/name": "etcd-operator"}); err != nil {
		return nil, err
	}
	var running []*corev1.Pod
	for i := range pods.Items {
		if p := &pods.Items[i]; p.DeletionTimestamp.IsZero() && p.Status.PodIP != "" && robustness.PodReady(p) {
			running = append(running, p)
		}
	}
	if len(running) != 1 {
		return nil, fmt.Errorf("%d running operator Pods, want 1 (a second one, on the other side, would see the majority)", len(running))
	}
	return running[0], nil
}

// partition adds ("add") or removes ("del") a blackhole route to every Pod address of each
// side in the network namespaces of the other side's Pods: packets between the two sides
// vanish, as in a network split, while each Pod still reaches the host (the API server, the
// kubelet's probes, the workload).
func partition(ctx context.Context, action string, a, b []*corev1.Pod) error {
	var errs []string
	for _, sides := range [][2][]*corev1.Pod{{a, b}, {b, a}} {
		for _, from := range sides[0] {
			for _, to := range sides[1] {
				if err := blackhole(ctx, action, localclusterNetns(from), to.Status.PodIP); err != nil {
					errs = append(errs, err.Error())
				}
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

func blackhole(ctx context.Context, action, netns, ip string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ip", "-n", netns, "route", action, "blackhole", ip+"/32").CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip -n %s route %s blackhole %s/32: %w: %s", netns, action, ip, err, strings.TrimSpace(string(out)))
	}
	return nil
}

func podNames(pods []*corev1.Pod) string {
	names := make([]string, 0, len(pods))
	for _, p := range pods {
		names = append(names, p.Name)
	}
	return strings.Join(names, " and ")
}

// watchPartition looks at the cluster's status every second for hold and says whether
// Available said QuorumLost meanwhile (the operator lost sight of the quorum: the partition
// is what the scenario means); a recovery request seen ends the hold early with an error.
func (c *cluster) watchPartition(ctx context.Context, hold time.Duration) (sawLoss bool, err error) {
	end := time.Now().Add(hold)
	for time.Now().Before(end) && ctx.Err() == nil {
		if ec, err := c.get(ctx); err == nil {
			if av := meta.FindStatusCondition(ec.Status.Conditions, etcdv1.ConditionAvailable); av != nil && av.Reason == "QuorumLost" {
				sawLoss = true
			}
			if from := ec.Annotations[etcdv1.AnnotationRecoverFrom]; from != "" {
				return sawLoss, fmt.Errorf("a recovery from %s was asked while the majority served", from)
			}
		}
		time.Sleep(time.Second)
	}
	return sawLoss, ctx.Err()
}

// sameClusterWithoutRecovery: the cluster kept its cluster ID and member IDs, and no event
// says a recovery was asked or made (a recovery from one member would discard the others'
// acknowledged writes, which the history check would also see).
func (c *cluster) sameClusterWithoutRecovery(ctx context.Context, before *etcdv1.EtcdCluster) error {
	after, err := c.get(ctx)
	if err != nil {
		return err
	}
	if after.Status.ClusterID != before.Status.ClusterID {
		return fmt.Errorf("cluster ID %s after the fault, was %s", after.Status.ClusterID, before.Status.ClusterID)
	}
	if b, a := memberIDList(before), memberIDList(after); a != b {
		return fmt.Errorf("member IDs %s after the fault, were %s", a, b)
	}
	events := &eventsv1.EventList{}
	if err := c.e.k8s.List(ctx, events, client.InNamespace(c.ns)); err != nil {
		return err
	}
	for _, e := range events.Items {
		if e.Reason == "AutomaticRecovery" || e.Reason == "QuorumRecovery" {
			return fmt.Errorf("taken for a quorum loss: %s %s", e.Reason, e.Note)
		}
	}
	return nil
}

func memberIDList(c *etcdv1.EtcdCluster) string {
	ids := make([]string, 0, len(c.Status.Members))
	for _, m := range c.Status.Members {
		ids = append(ids, m.Name+"="+m.ID)
	}
	sort.Strings(ids)
	return strings.Join(ids, ",")
}
