package controller

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/agent"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// ReasonRestoreFailed is Available's reason while the bootstrap snapshot cannot be restored.
const ReasonRestoreFailed = "RestoreFailed"

// foundingCount is how many members bootstrap the cluster. A cluster restored from a snapshot
// starts from ONE restored member (the seed); the others join it as learners and receive the
// data from it. So no member serves before the restore succeeded, every member ends up with
// the same data, and there is a single restore to fail, report and retry. A cluster rebuilt
// from an EtcdSnapshot after it lost its quorum bootstraps the same way.
func foundingCount(c *etcdv1.EtcdCluster, replicas int) int {
	if (c.Spec.Bootstrap != nil && c.Spec.Bootstrap.Restore != nil) || c.Status.SnapshotRecovery != nil {
		return min(replicas, 1)
	}
	return replicas
}

// restoreFailure is why the founding member's restore failed, from its restore init
// container's result in the Pods the reconcile observed; "" while it has not failed (or there
// is no restore).
func restoreFailure(c *etcdv1.EtcdCluster, members []*etcdv1.EtcdMember, pods map[string]*corev1.Pod) string {
	if c.Status.ClusterID != "" {
		return ""
	}
	var failures []string
	for _, m := range members {
		pod := pods[m.Name]
		if pod == nil || !specs.Restores(c, m) {
			continue
		}
		if msg := restoreContainerFailure(pod); msg != "" {
			failures = append(failures, fmt.Sprintf("member %s: %s", m.Name, msg))
		}
	}
	return strings.Join(failures, "; ")
}

// restoreContainerFailure reads the restore init container's last failed result, while it has
// not succeeded since.
func restoreContainerFailure(pod *corev1.Pod) string {
	for _, cs := range pod.Status.InitContainerStatuses {
		if cs.Name != specs.RestoreContainerName {
			continue
		}
		if t := cs.State.Terminated; t != nil && t.ExitCode == 0 {
			return ""
		}
		t := cs.State.Terminated
		if t == nil {
			t = cs.LastTerminationState.Terminated
		}
		if t == nil || t.ExitCode == 0 {
			return ""
		}
		if res, ok := agent.ParseResult(t.Message); ok && res.Reason != "" {
			return fmt.Sprintf("%s: %s", res.Reason, res.Message)
		}
		return fmt.Sprintf("the restore container exited with code %d (%s)", t.ExitCode, t.Reason)
	}
	return ""
}

// restoreFailed reports whether Available says the bootstrap restore failed.
func restoreFailed(c *etcdv1.EtcdCluster) bool {
	cond := meta.FindStatusCondition(c.Status.Conditions, etcdv1.ConditionAvailable)
	return cond != nil && cond.Reason == ReasonRestoreFailed
}

// restoreSubject names the snapshot a bootstrap restores, for messages.
func restoreSubject(c *etcdv1.EtcdCluster) string {
	if r := c.Status.SnapshotRecovery; r != nil {
		return "restoring EtcdSnapshot " + r.Snapshot
	}
	return "restoring spec.bootstrap.restore"
}
