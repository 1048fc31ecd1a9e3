package snapshot

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/agent"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// ActionVerify names the Job that reads a snapshot's stored file whole before a cluster is
// rebuilt from it (`etcd-operator verify-agent`).
const ActionVerify = "verify"

// VerifyJobName is the verify Job of cluster for the EtcdSnapshot named snapshot.
func VerifyJobName(cluster, snapshot string) string {
	return JobName(cluster+"-"+snapshot, ActionVerify)
}

// VerifyJob reads the file a member would restore (restore, as the recovery records it: the
// EtcdSnapshot's location, name and checksum) whole, with the restore's flags, credentials
// and read-only mount, so that what it proves readable is what the restore will read. It
// lives in the cluster's namespace and is owned by the cluster (the caller sets that).
func VerifyJob(c *etcdv1.EtcdCluster, s *etcdv1.EtcdSnapshot, restore etcdv1.MemberRestore, image string) *batchv1.Job {
	deadline := DeadlineSeconds(s)
	args := []string{"verify-agent",
		"--name=" + specs.SourceName(restore.Source),
		"--uri=" + specs.SourceURI(restore.Source),
		"--checksum=" + restore.Checksum,
		fmt.Sprintf("--timeout=%ds", max(deadline-10, 20)),
	}
	sa, env, mounts, vols := specs.SnapshotStoreArgs(restore.Source, snapshotDir, true)
	meta := metav1.ObjectMeta{
		Name: VerifyJobName(c.Name, s.Name), Namespace: c.Namespace,
		Labels: map[string]string{etcdv1.LabelVerifyCluster: c.Name, etcdv1.LabelVerifySnapshotUID: string(s.UID),
			etcdv1.LabelAction: ActionVerify, etcdv1.LabelManagedBy: specs.ManagerName},
		Annotations: map[string]string{etcdv1.AnnotationVerifiedSum: restore.Checksum},
	}
	return agentJob(meta, deadline, corev1.Container{Image: image, Args: append(args, sa...), Env: env, VolumeMounts: mounts}, vols, clusterPullSecrets(c))
}

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
// holds none yet, live (as the snapshot controller reads its own Jobs').
func JobResult(ctx context.Context, cached, live client.Reader, job *batchv1.Job) (agent.Result, bool, error) {
	res, found, err := agentResultIn(ctx, cached, job)
	if found || err != nil {
		return res, found, err
	}
	return agentResultIn(ctx, live, job)
}
