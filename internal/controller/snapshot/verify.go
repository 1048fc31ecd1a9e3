package snapshot

import (
	"context"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumkeeper/etcd-operator/internal/agent"
)

// JobFinished says whether an agent Job is done, failed, the reason of its final condition
// and when it reached it.
func JobFinished(job *batchv1.Job) (done, failed bool, reason string, at metav1.Time) {
	done, failed, reason = jobFinished(job)
	for _, c := range job.Status.Conditions {
		if c.Status == corev1.ConditionTrue && (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) {
			at = c.LastTransitionTime
		}
	}
	return done, failed, reason, at
}

// JobResult reads an agent Job's result from its Pod, from the cache and, when the cache
// holds none yet, live: Pods and Jobs come to the cache by separate watches, so a finished
// Job may be seen before its Pod's last status. Without a result, the string says how the
// agent's container ended, as the live read saw it.
func JobResult(ctx context.Context, cached, live client.Reader, job *batchv1.Job) (agent.Result, bool, string, error) {
	res, found, _, err := agentResultIn(ctx, cached, job)
	if found || err != nil {
		return res, found, "", err
	}
	return agentResultIn(ctx, live, job)
}
