package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/agent"
	"github.com/quorumkeeper/etcd-operator/internal/controller/kit"
	"github.com/quorumkeeper/etcd-operator/internal/controller/snapshot"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// verdictTrusted is how long a finished verification of a snapshot's stored file counts.
// The verdict is the verify Job itself (labelled with the EtcdSnapshot's UID, annotated with
// the checksum it checked, its result naming the checksum it read): durable in the API, so
// an operator that died between the verification and the record of the recovery trusts it
// on its next look rather than reading a file of gigabytes again; bounded, so that a verdict
// left from an earlier request (the same snapshot asked for again days later) is not, and a
// failed verification is tried again once the person had time to fix the store.
const verdictTrusted = 2 * time.Minute

// verifyPoll is how often a running verification is looked at without a Job event.
const verifyPoll = 10 * time.Second

// verifyAct is what a recovery from a snapshot does next about verifying the stored file.
type verifyAct int

const (
	verifyStart   verifyAct = iota // no verify Job: create one
	verifyReplace                  // a Job of another file, or a verdict too old to trust: delete it
	verifyWait                     // a Job is running, or going away
	verifyPassed                   // this very file was read whole with the recorded checksum
	verifyFailed                   // it was not: refuse, nothing changed
)

// verifyTarget is the file a recovery is to restore, as its EtcdSnapshot recorded it.
type verifyTarget struct {
	snapshotUID types.UID
	checksum    string
	uri         string
}

// verification is the verdict on a verify Job; why says, for verifyFailed, what failed and
// what to do, and retryIn when a verdict stops being trusted.
type verification struct {
	act     verifyAct
	why     string
	retryIn time.Duration
}

// judgeVerification decides, from the verify Job (nil when there is none) and its agent's
// result, whether the file may be restored. Only a Job made for this EtcdSnapshot (UID) and
// checksum, finished within verdictTrusted, whose agent read the whole file and reported that
// very checksum and uri, passes; anything less is no proof and nothing is discarded on it.
func judgeVerification(want verifyTarget, job *batchv1.Job, res agent.Result, found bool, end string, now time.Time) verification {
	if job == nil {
		return verification{act: verifyStart}
	}
	if !job.DeletionTimestamp.IsZero() {
		return verification{act: verifyWait}
	}
	if job.Labels[etcdv1.LabelVerifySnapshotUID] != string(want.snapshotUID) || job.Annotations[etcdv1.AnnotationVerifiedSum] != want.checksum {
		return verification{act: verifyReplace} // another EtcdSnapshot's of that name, or another file
	}
	done, failed, reason, at := snapshot.JobFinished(job)
	if !done {
		return verification{act: verifyWait}
	}
	age := now.Sub(at.Time)
	if at.IsZero() || age > verdictTrusted || age < -verdictTrusted {
		return verification{act: verifyReplace}
	}
	retry := verdictTrusted - max(age, 0)
	switch {
	case found && res.Reason != "":
		return verification{act: verifyFailed, retryIn: retry, why: fmt.Sprintf("%s: %s", res.Reason, res.Message)}
	case failed || !found:
		return verification{act: verifyFailed, retryIn: retry, why: fmt.Sprintf("the verify Job %s ended without a result (%s; %s); see its Pod's events and log", job.Name, reason, end)}
	case res.Checksum != want.checksum || res.URI != want.uri:
		return verification{act: verifyFailed, retryIn: retry, why: fmt.Sprintf("the verify Job %s reported %s with checksum %q, not %s with %s: not trusting it", job.Name, res.URI, res.Checksum, want.uri, want.checksum)}
	}
	return verification{act: verifyPassed}
}

// verifySnapshotFile runs, or reads the verdict of, the verify Job of the file the recovery
// would restore; nil once that file was read whole with the checksum snap recorded, else the
// wait or the refusal to report. Nothing of the cluster is changed here.
func (r *Reconciler) verifySnapshotFile(ctx context.Context, c *etcdv1.EtcdCluster, snap *etcdv1.EtcdSnapshot, plan snapshotRecoveryPlan) error {
	restore := plan.record.Restore
	want := verifyTarget{snapshotUID: snap.UID, checksum: restore.Checksum, uri: specs.SourceURI(restore.Source)}
	job, err := r.verifyJob(ctx, c, snap.Name)
	if err != nil {
		return err
	}
	var res agent.Result
	var found bool
	var end string
	if job != nil {
		if done, _, _, _ := snapshot.JobFinished(job); done {
			if res, found, end, err = snapshot.JobResult(ctx, r.Client, r.reader(), job); err != nil {
				return err
			}
		}
	}
	verdict := judgeVerification(want, job, res, found, end, r.now())
	// Not the loss statement yet: that comes once the file is known good (kubectl etcd
	// recover waits for it, or for the refusal). The Job's end wakes the cluster (it owns the
	// Job); the retry is only a safety net, not the every-second look of a recovery's other
	// waits: reading a large file takes minutes.
	verifying := func(what string) error {
		return kit.Waiting{Reason: etcdv1.ReasonQuorumRecovery, RetryIn: verifyPoll, Message: fmt.Sprintf(
			"%s %s of EtcdSnapshot %s, read whole and checked against its recorded checksum before anything is decided or discarded", what, want.uri, snap.Name)}
	}
	switch verdict.act {
	case verifyStart:
		job = specs.VerifyJob(c, snap, restore, r.PodOptions.AgentImage)
		if err := controllerutil.SetControllerReference(c, job, r.Scheme()); err != nil {
			return err
		}
		if err := r.Create(ctx, job); apierrors.IsAlreadyExists(err) {
			return verifying("waiting for an earlier verify Job to go before verifying")
		} else if err != nil {
			return err
		}
		r.event(ctx, c, corev1.EventTypeNormal, etcdv1.ReasonVerifyingSnapshot, "RecoverQuorum", "Job %s reads %s of EtcdSnapshot %s whole and checks its checksum %s before any member's data is discarded", job.Name, want.uri, snap.Name, want.checksum)
		return verifying("verifying (Job " + job.Name + ")")
	case verifyReplace:
		bg := metav1.DeletePropagationBackground
		if err := r.Delete(ctx, job, client.Preconditions{UID: &job.UID}, &client.DeleteOptions{PropagationPolicy: &bg}); client.IgnoreNotFound(err) != nil {
			return err
		}
		return verifying("replacing an old verify Job before verifying")
	case verifyWait:
		return verifying("verifying (Job " + job.Name + ")")
	case verifyFailed:
		err := r.refuseRecovery(ctx, c, c.Annotations[etcdv1.AnnotationRecoverFromSnapshot], fmt.Sprintf(
			"the stored file %s of EtcdSnapshot %s cannot be restored: %s; nothing was changed, every member keeps its data. Fix the store (the file, the bucket, the credentials Secret) and it is verified again within %s, or name another snapshot",
			want.uri, snap.Name, verdict.why, verdictTrusted))
		var w kit.Waiting
		if errors.As(err, &w) {
			w.RetryIn = verdict.retryIn
			return w
		}
		return err
	}
	return nil
}

// verifyJob is the cluster's verify Job for the snapshot, nil when there is none.
func (r *Reconciler) verifyJob(ctx context.Context, c *etcdv1.EtcdCluster, snap string) (*batchv1.Job, error) {
	job := &batchv1.Job{}
	err := r.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: specs.VerifyJobName(c.Name, snap)}, job)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return job, err
}
