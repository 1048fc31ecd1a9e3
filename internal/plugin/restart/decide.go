package restart

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/etcdversion"
	"github.com/quorumkeeper/etcd-operator/internal/plugin/cli"
)

// rollReasons are Progressing's reasons while the operator's roll is under way.
var rollReasons = []string{etcdv1.ReasonRollingUpdate, etcdv1.ReasonRollQueued, etcdv1.ReasonRollStuck}

// refusal says why a rolling restart must not be asked for now, naming what to wait for; nil
// when the cluster is at rest and healthy. The operator's roll would wait by itself, but a
// request made mid-scale, mid-upgrade or while a member is down would sit in the spec
// unexplained; refusing says what is in the way while the person is there to read it.
func refusal(c *etcdv1.EtcdCluster, members []etcdv1.EtcdMember, pods map[string]corev1.Pod) error {
	progressing := meta.FindStatusCondition(c.Status.Conditions, etcdv1.ConditionProgressing)
	for _, check := range []func() error{
		func() error { return notManaged(c) },
		func() error { return rolling(progressing) },
		func() error { return notObserved(c) },
		func() error { return scaling(c, members, progressing) },
		func() error { return upgrading(c, members, progressing) },
		func() error { return changing(progressing) },
		func() error { return unhealthy(c, members, pods) },
		func() error { return onlyTmpfsMember(c) },
	} {
		if err := check(); err != nil {
			return fmt.Errorf("not restarting %s: %w", c.Name, err)
		}
	}
	return nil
}

func notManaged(c *etcdv1.EtcdCluster) error {
	switch {
	case c.ReconcileSuspended():
		return fmt.Errorf("the operator leaves it alone (annotation %s): remove the annotation first", etcdv1.AnnotationSuspendReconcile)
	case cli.Replicas(c) == 0:
		return fmt.Errorf("it is paused: kubectl etcd resume %s, and wait until every member is Ready", c.Name)
	}
	return nil
}

func rolling(progressing *metav1.Condition) error {
	if isTrue(progressing) && slices.Contains(rollReasons, progressing.Reason) {
		return fmt.Errorf("the operator is already restarting members (Progressing %s: %s): wait until Progressing is False", progressing.Reason, progressing.Message)
	}
	return nil
}

func notObserved(c *etcdv1.EtcdCluster) error {
	if c.Generation != c.Status.ObservedGeneration {
		return fmt.Errorf("the operator has not yet acted on the latest spec (generation %d, status.observedGeneration %d): wait until they match",
			c.Generation, c.Status.ObservedGeneration)
	}
	return nil
}

func scaling(c *etcdv1.EtcdCluster, members []etcdv1.EtcdMember, progressing *metav1.Condition) error {
	want := int(cli.Replicas(c))
	if len(members) != want || c.Status.Learners > 0 || isTrue(progressing) && progressing.Reason == etcdv1.ReasonScaling {
		return fmt.Errorf("it is mid-scale (%d members for spec.replicas %d, %d learners): wait until the scaling is done and Progressing is False",
			len(members), want, c.Status.Learners)
	}
	return nil
}

func upgrading(c *etcdv1.EtcdCluster, members []etcdv1.EtcdMember, progressing *metav1.Condition) error {
	var behind []string
	want := etcdversion.Canonical(c.Spec.Version) // spec.version may have a leading v; members' never
	for _, m := range members {
		if m.Spec.Version != want {
			behind = append(behind, m.Name+" "+m.Spec.Version)
		}
	}
	if len(behind) > 0 || c.Status.Version != "" && c.Status.Version != want || isTrue(progressing) && progressing.Reason == etcdv1.ReasonUpgrading {
		return fmt.Errorf("it is mid-upgrade to %s (status.version %s; members at another version: %s): wait until status.version is %s",
			c.Spec.Version, cli.Dash(c.Status.Version), cli.Dash(strings.Join(behind, ", ")), c.Spec.Version)
	}
	return nil
}

func changing(progressing *metav1.Condition) error {
	if isTrue(progressing) {
		return fmt.Errorf("the operator is still changing it (Progressing %s: %s): wait until Progressing is False", progressing.Reason, progressing.Message)
	}
	return nil
}

// unhealthy: a restart takes one member down at a time, which only a cluster with every
// member up can afford.
func unhealthy(c *etcdv1.EtcdCluster, members []etcdv1.EtcdMember, pods map[string]corev1.Pod) error {
	if cond := meta.FindStatusCondition(c.Status.Conditions, etcdv1.ConditionAvailable); !isTrue(cond) {
		return fmt.Errorf("it is not Available (%s): wait until Available is True", describe(cond))
	}
	if cond := meta.FindStatusCondition(c.Status.Conditions, etcdv1.ConditionDegraded); isTrue(cond) {
		return fmt.Errorf("it is Degraded (%s: %s): wait until Degraded is False", cond.Reason, cond.Message)
	}
	var down []string
	for i := range members {
		if why := memberDown(&members[i], pods); why != "" {
			down = append(down, members[i].Name+" ("+why+")")
		}
	}
	if len(down) > 0 {
		return fmt.Errorf("not every member is healthy: %s; wait until each is Ready (kubectl etcd status %s)", strings.Join(down, ", "), c.Name)
	}
	return nil
}

func onlyTmpfsMember(c *etcdv1.EtcdCluster) error {
	if c.Spec.Storage.Medium == etcdv1.StorageMediumMemory && cli.Replicas(c) == 1 {
		return fmt.Errorf("its only member keeps its data on tmpfs, which a restart loses (the operator never restarts it): scale to 3 first")
	}
	return nil
}

// memberDown says why a member does not serve ("" when it does): its Pod missing, going or
// not Ready, or the operator's health check of it failing.
func memberDown(m *etcdv1.EtcdMember, pods map[string]corev1.Pod) string {
	pod, ok := pods[m.Name]
	switch {
	case !ok:
		return "no Pod"
	case !pod.DeletionTimestamp.IsZero():
		return "Pod terminating"
	case !cli.PodReady(pod):
		return "Pod not Ready"
	case !isTrue(meta.FindStatusCondition(m.Status.Conditions, etcdv1.MemberConditionReady)):
		return "etcd health check failing"
	}
	return ""
}

// rollState is how far the operator's roll has come since the request.
type rollState struct {
	// Back are the members serving from a Pod made after the request, in name order.
	Back []string
	// Waiting are the members still on their Pod from before, or not serving yet.
	Waiting []string
	// Done: every member is back and the cluster is healthy and at rest.
	Done bool
}

// progress compares the members' Pods with those before the request (their UIDs): a member
// is back once a new Pod of it serves. A member the roll replaced under a new name (tmpfs)
// had no Pod before and counts once it serves.
func progress(before map[string]types.UID, c *etcdv1.EtcdCluster, members []etcdv1.EtcdMember, pods map[string]corev1.Pod) rollState {
	var st rollState
	for i := range members {
		m := &members[i]
		if old, had := before[m.Name]; (!had || pods[m.Name].UID != old) && memberDown(m, pods) == "" {
			st.Back = append(st.Back, m.Name)
		} else {
			st.Waiting = append(st.Waiting, m.Name)
		}
	}
	slices.Sort(st.Back)
	slices.Sort(st.Waiting)
	conds := c.Status.Conditions
	st.Done = len(st.Waiting) == 0 && len(members) > 0 &&
		isTrue(meta.FindStatusCondition(conds, etcdv1.ConditionAvailable)) &&
		!isTrue(meta.FindStatusCondition(conds, etcdv1.ConditionDegraded)) &&
		!isTrue(meta.FindStatusCondition(conds, etcdv1.ConditionProgressing))
	return st
}

// podUIDs are the Pods' UIDs by name.
func podUIDs(pods map[string]corev1.Pod) map[string]types.UID {
	out := make(map[string]types.UID, len(pods))
	for name, p := range pods {
		out[name] = p.UID
	}
	return out
}

func isTrue(c *metav1.Condition) bool { return c != nil && c.Status == metav1.ConditionTrue }

func describe(c *metav1.Condition) string {
	if c == nil {
		return "no Available condition yet"
	}
	return c.Reason + ": " + c.Message
}
