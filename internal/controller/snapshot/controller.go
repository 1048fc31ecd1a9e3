// Package snapshot is the EtcdSnapshot controller: it runs one Job per snapshot (the
// operator's own image, `etcd-operator snapshot-agent`; package specs builds it), reads the
// Job's result from its Pod's termination message into the EtcdSnapshot's status, and removes
// the stored file with the EtcdSnapshot when its deletionPolicy is Delete.
package snapshot

import (
	"context"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/agent"
	"github.com/quorumkeeper/etcd-operator/internal/controller/kit"
	"github.com/quorumkeeper/etcd-operator/internal/metrics"
	"github.com/quorumkeeper/etcd-operator/internal/snapshotstore"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// Reconciler runs EtcdSnapshots.
type Reconciler struct {
	client.Client
	// APIReader reads what the manager's cache does not hold: the user's destination PVC
	// (the cache keeps only PVCs the operator labelled). The client when nil (tests).
	APIReader client.Reader
	Recorder  events.EventRecorder
	// AgentImage is the operator's own image: the Jobs run its snapshot-agent.
	AgentImage string
	// Now is the clock; time.Now outside tests.
	Now func() time.Time
	// Claims says which clusters are this operator's; it acts on every cluster when nil.
	Claims *kit.Claims
}

// live is the reader for objects the operator did not label.
func (r *Reconciler) live() client.Reader { return kit.Live(r.APIReader, r.Client) }

// +kubebuilder:rbac:groups=etcd-operator.cozystack.io,resources=etcdsnapshots,verbs=get;list;watch;update
// +kubebuilder:rbac:groups=etcd-operator.cozystack.io,resources=etcdsnapshots/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=etcd-operator.cozystack.io,resources=etcdsnapshots/finalizers,verbs=update
// +kubebuilder:rbac:groups=etcd-operator.cozystack.io,resources=etcdclusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=serviceaccounts,verbs=get;create;delete
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=roles;rolebindings,verbs=create;delete

// SetupWithManager watches EtcdSnapshots and their agent Jobs, found by label: the snapshot
// Job is owned by its EtcdSnapshot, but the delete Job must outlive it and is not, so an
// owner watch would never say that the stored file is gone and the finalizer may go.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Now == nil {
		r.Now = time.Now
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&etcdv1.EtcdSnapshot{}).
		Watches(&batchv1.Job{}, handler.EnqueueRequestsFromMapFunc(snapshotOfJob)).
		Watches(&etcdv1.EtcdCluster{}, handler.EnqueueRequestsFromMapFunc(restoredSnapshots)).
		Named("etcdsnapshot").
		Complete(r)
}

// snapshotOfJob maps an agent Job to the EtcdSnapshot named in its label.
func snapshotOfJob(_ context.Context, obj client.Object) []reconcile.Request {
	name := obj.GetLabels()[etcdv1.LabelSnapshot]
	if name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: name}}}
}

// Reconcile moves one EtcdSnapshot along Pending -> Started -> Complete | Failed, and says at
// V(1) which step it took: the phase the snapshot moves to from which, and why.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	s := &etcdv1.EtcdSnapshot{}
	if err := r.Get(ctx, req.NamespacedName, s); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	ctx = kit.WithCluster(ctx, s.Namespace, s.Spec.ClusterRef.Name)
	if leave, res, err := r.Claims.LeaveAlone(ctx, r.Client, s.Namespace, s.Spec.ClusterRef.Name); leave {
		return res, err
	}
	from := s.Status.Phase
	step, res, err := r.advance(ctx, s)
	step.Facts = append(step.Facts, "fromPhase", from, "phase", s.Status.Phase, "deleting", !s.DeletionTimestamp.IsZero())
	step.Log(ctx, err)
	return res, err
}

// advance takes the snapshot's next step: its holds and finalizers, then its Job.
func (r *Reconciler) advance(ctx context.Context, s *etcdv1.EtcdSnapshot) (kit.Step, ctrl.Result, error) {
	if controllerutil.ContainsFinalizer(s, etcdv1.FinalizerRestoreSource) {
		if step, done, err := r.releaseHold(ctx, s); done || err != nil {
			return step, ctrl.Result{}, err
		}
	}
	if !s.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, s)
	}
	if !controllerutil.ContainsFinalizer(s, etcdv1.FinalizerSnapshotFile) {
		controllerutil.AddFinalizer(s, etcdv1.FinalizerSnapshotFile)
		return kit.Step{Name: "addFinalizer", Changed: true}, ctrl.Result{}, r.Update(ctx, s)
	}
	if s.Status.Phase == etcdv1.SnapshotComplete || s.Status.Phase == etcdv1.SnapshotFailed {
		return kit.Step{}, ctrl.Result{}, nil
	}
	if etcdv1.SnapshotImported(s) {
		// Another operator's file, which kubectl etcd migrate records in the status: a
		// snapshot Job would write over it. Nothing is written here, so that the command's
		// status is the only one.
		return kit.Step{Name: "waitForImport", Why: kit.Waiting{Reason: etcdv1.ReasonImported,
			Message: "imported from " + s.Annotations[etcdv1.AnnotationImportedFrom] + ": kubectl etcd migrate writes where its file is; run it again if it was cut short"}}, ctrl.Result{}, nil
	}
	job, err := r.snapshotJob(ctx, s)
	if err != nil {
		return kit.Step{Name: "getJob"}, ctrl.Result{}, err
	}
	if job == nil {
		return r.start(ctx, s)
	}
	if !metav1.IsControlledBy(job, s) {
		// Left by an earlier EtcdSnapshot of the same name, not yet garbage-collected: its
		// result is not this snapshot's. Its deletion requeues this snapshot (the Job watch).
		bg := metav1.DeletePropagationBackground
		removed := kit.Step{Name: "removeStaleJob", Changed: true, Facts: []any{"job", job.Name}}
		return removed, ctrl.Result{}, client.IgnoreNotFound(r.Delete(ctx, job, &client.DeleteOptions{PropagationPolicy: &bg}))
	}
	return r.follow(ctx, s, job)
}

// releaseHold lets the hold a cluster took on the snapshot's file
// (etcdv1.FinalizerRestoreSource) go once no cluster may restore the snapshot any more; until
// then a deletion waits, and says for whom. True, with its step, when this reconcile ends
// here: the hold was let go (the update brings the snapshot back) or a deletion waits. The clusters are read
// live, after the snapshot; the release is written with the snapshot's resourceVersion, so a
// hold taken after that read (every hold writes) fails the release.
func (r *Reconciler) releaseHold(ctx context.Context, s *etcdv1.EtcdSnapshot) (kit.Step, bool, error) {
	clusters := &etcdv1.EtcdClusterList{}
	if err := r.live().List(ctx, clusters, client.InNamespace(s.Namespace)); err != nil {
		return kit.Step{Name: "listClusters"}, true, err
	}
	users := specs.SnapshotNeededBy(s.Name, s.Labels[etcdv1.LabelSnapshotSchedule], clusters.Items)
	switch {
	case len(users) == 0:
		controllerutil.RemoveFinalizer(s, etcdv1.FinalizerRestoreSource)
		delete(s.Annotations, etcdv1.AnnotationRestoreHeldBy)
		return kit.Step{Name: "releaseHold", Changed: true}, true, client.IgnoreNotFound(r.Update(ctx, s))
	case s.DeletionTimestamp.IsZero():
		return kit.Step{}, false, nil
	}
	msg := fmt.Sprintf("the deletion waits until no cluster may restore this snapshot any more: %s", strings.Join(users, "; "))
	waits, err := r.waitFor(ctx, s, "waitForRestores", etcdv1.ReasonRestoreInProgress, msg)
	return waits, true, err
}

// waitFor is the step that waits for reason: the Ready condition and a Warning event say why,
// once.
func (r *Reconciler) waitFor(ctx context.Context, s *etcdv1.EtcdSnapshot, step, reason, msg string) (kit.Step, error) {
	waits := kit.Step{Name: step, Why: kit.Waiting{Reason: reason, Message: msg}}
	if hasReady(s, reason, msg) {
		return waits, nil
	}
	setReady(s, metav1.ConditionFalse, reason, msg)
	r.event(ctx, s, corev1.EventTypeWarning, reason, "%s", msg)
	waits.Changed = true
	return waits, r.Status().Update(ctx, s)
}

// restoredSnapshots maps a cluster to the EtcdSnapshots it names as something to restore, so
// that a snapshot held for it is let go, or its deletion goes on, once the cluster no
// longer needs it (both the old and the new object of a change are mapped).
func restoredSnapshots(_ context.Context, obj client.Object) []reconcile.Request {
	c, ok := obj.(*etcdv1.EtcdCluster)
	if !ok {
		return nil
	}
	var out []reconcile.Request
	for _, name := range specs.SnapshotsNamedBy(c) {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: c.Namespace, Name: name}})
	}
	return out
}

// snapshotJob is the snapshot's Job, nil when there is none. A snapshot already Started whose
// Job the cache does not hold is looked up live before it is failed: the Job just created may
// not have reached the cache yet.
func (r *Reconciler) snapshotJob(ctx context.Context, s *etcdv1.EtcdSnapshot) (*batchv1.Job, error) {
	key := types.NamespacedName{Namespace: s.Namespace, Name: specs.SnapshotJobName(s.Name, specs.ActionSnapshot)}
	job := &batchv1.Job{}
	err := r.Get(ctx, key, job)
	if apierrors.IsNotFound(err) && s.Status.Phase == etcdv1.SnapshotStarted {
		err = r.live().Get(ctx, key, job)
	}
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return job, nil
}

// start checks what a person must provide (the cluster, the PVC, the Secret) and creates the Job.
func (r *Reconciler) start(ctx context.Context, s *etcdv1.EtcdSnapshot) (kit.Step, ctrl.Result, error) {
	if s.Status.Phase == etcdv1.SnapshotStarted {
		// The Job is gone before its result was read (deleted by hand, or its TTL ran out
		// while the operator was down): that attempt failed.
		return r.fail(ctx, s, etcdv1.ReasonClusterNotAvailable, "the snapshot Job disappeared before it reported a result; create a new EtcdSnapshot")
	}
	c := &etcdv1.EtcdCluster{}
	err := r.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: s.Spec.ClusterRef.Name}, c)
	if apierrors.IsNotFound(err) {
		return r.fail(ctx, s, etcdv1.ReasonClusterNotFound, fmt.Sprintf("EtcdCluster %s, named by spec.clusterRef, does not exist in namespace %s", s.Spec.ClusterRef.Name, s.Namespace))
	}
	if err != nil {
		return kit.Step{Name: "getCluster"}, ctrl.Result{}, err
	}
	if reason, msg, err := r.missingInput(ctx, s); err != nil || reason != "" {
		if err != nil {
			return kit.Step{Name: "checkInputs"}, ctrl.Result{}, err
		}
		return r.fail(ctx, s, reason, msg)
	}
	if !meta.IsStatusConditionTrue(c.Status.Conditions, etcdv1.ConditionAvailable) {
		return r.waitForCluster(ctx, s, c)
	}
	job := specs.SnapshotJob(s, c, r.AgentImage, specs.ActionSnapshot)
	started := kit.Step{Name: "startJob", Changed: true, Facts: []any{"job", job.Name, "serviceAccount", job.Spec.Template.Spec.ServiceAccountName}}
	if err := r.grantAgentAccess(ctx, s, c); err != nil {
		return kit.Step{Name: "grantAgentAccess"}, ctrl.Result{}, err
	}
	if err := controllerutil.SetControllerReference(s, job, r.Scheme()); err != nil {
		return started, ctrl.Result{}, err
	}
	if err := r.Create(ctx, job); err != nil && !apierrors.IsAlreadyExists(err) {
		return started, ctrl.Result{}, err
	}
	r.event(ctx, s, corev1.EventTypeNormal, etcdv1.ReasonStarted, "snapshot Job %s started", job.Name)
	return started, ctrl.Result{}, r.recordStarted(ctx, s, fmt.Sprintf("Job %s is taking the snapshot of %s", job.Name, c.Name))
}

// recordStarted writes that the snapshot's Job exists: from then on it may write the file.
// A snapshot deleted while it still reads Pending goes without the delete Job, so the record
// must not be lost to a conflict, above all the one its deletion makes when it comes just as
// the Job is created: the file the Job goes on to write would stay in the store, no
// snapshot's (kit.RecordAct). A snapshot the record finds finished is left as it is.
func (r *Reconciler) recordStarted(ctx context.Context, s *etcdv1.EtcdSnapshot, msg string) error {
	return kit.RecordAct(ctx, r.live(), s, func() error {
		if s.Status.Phase == etcdv1.SnapshotComplete || s.Status.Phase == etcdv1.SnapshotFailed {
			return nil
		}
		now := metav1.NewTime(r.Now())
		s.Status.Phase, s.Status.StartTime = etcdv1.SnapshotStarted, &now
		setReady(s, metav1.ConditionFalse, etcdv1.ReasonInProgress, msg)
		return r.Status().Update(ctx, s)
	})
}

// missingInput finds a PVC, credentials Secret or ServiceAccount that does not exist: the
// Job would otherwise wait for it until its deadline.
func (r *Reconciler) missingInput(ctx context.Context, s *etcdv1.EtcdSnapshot) (string, string, error) {
	d := s.Spec.Destination
	if d.PVC != nil {
		err := r.live().Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: d.PVC.ClaimName}, &corev1.PersistentVolumeClaim{})
		if apierrors.IsNotFound(err) {
			return etcdv1.ReasonPVCNotFound, fmt.Sprintf("PersistentVolumeClaim %s, named by spec.destination.pvc.claimName, does not exist: create it or name another", d.PVC.ClaimName), nil
		}
		return "", "", err
	}
	if name := d.S3.CredentialsSecretRef.Name; name != "" {
		err := r.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: name}, &corev1.Secret{})
		if apierrors.IsNotFound(err) {
			return etcdv1.ReasonCredentialsSecretNotFound, fmt.Sprintf("Secret %s, named by spec.destination.s3.credentialsSecretRef, does not exist: create it with AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or leave credentialsSecretRef out to use the Pod's cloud identity", name), nil
		}
		if err != nil {
			return "", "", err
		}
	}
	if name := d.S3.ServiceAccountName; name != "" {
		err := r.live().Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: name}, &corev1.ServiceAccount{})
		if apierrors.IsNotFound(err) {
			return etcdv1.ReasonServiceAccountNotFound, fmt.Sprintf("ServiceAccount %s, named by spec.destination.s3.serviceAccountName, does not exist: create it (with its cloud identity's annotation) or name another", name), nil
		}
		return "", "", err
	}
	return "", "", nil
}

// agentAccess is what lets the snapshot's agent write its progress (specs.SnapshotAgentAccess):
// the ServiceAccount first (when the operator makes it), the binding last. c is the cluster
// whose spec.additionalMetadata they carry; nil where only their names matter.
func agentAccess(s *etcdv1.EtcdSnapshot, c *etcdv1.EtcdCluster) []client.Object {
	sa, role, binding := specs.SnapshotAgentAccess(s, c)
	if sa == nil {
		return []client.Object{role, binding}
	}
	return []client.Object{sa, role, binding}
}

// grantAgentAccess makes the agent's access, owned by the snapshot so that it goes with it.
// One of an earlier EtcdSnapshot of the same name, not yet collected, grants the same.
func (r *Reconciler) grantAgentAccess(ctx context.Context, s *etcdv1.EtcdSnapshot, c *etcdv1.EtcdCluster) error {
	for _, obj := range agentAccess(s, c) {
		if err := controllerutil.SetControllerReference(s, obj, r.Scheme()); err != nil {
			return err
		}
		if err := r.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return nil
}

// revokeAgentAccess deletes the agent's access once the snapshot ended: a ServiceAccount the
// destination names keeps no grant beyond the Job. Only a snapshot that started has any.
func (r *Reconciler) revokeAgentAccess(ctx context.Context, s *etcdv1.EtcdSnapshot) error {
	if s.Status.Phase != etcdv1.SnapshotStarted {
		return nil
	}
	objs := agentAccess(s, nil)
	slices.Reverse(objs) // the binding first: from then on nothing is granted
	for _, obj := range objs {
		if err := r.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	return nil
}

// waitForCluster keeps the snapshot Pending while its cluster is not Available, and fails it
// once the deadline since its creation passed.
func (r *Reconciler) waitForCluster(ctx context.Context, s *etcdv1.EtcdSnapshot, c *etcdv1.EtcdCluster) (kit.Step, ctrl.Result, error) {
	msg := fmt.Sprintf("EtcdCluster %s is not Available; the snapshot starts when it is", c.Name)
	if cond := meta.FindStatusCondition(c.Status.Conditions, etcdv1.ConditionAvailable); cond != nil {
		msg = fmt.Sprintf("EtcdCluster %s is not Available (%s: %s); the snapshot starts when it is", c.Name, cond.Reason, cond.Message)
	}
	deadline := s.CreationTimestamp.Add(time.Duration(specs.SnapshotDeadlineSeconds(s)) * time.Second)
	if r.Now().After(deadline) {
		return r.fail(ctx, s, etcdv1.ReasonClusterNotAvailable, msg+"; gave up after spec.activeDeadlineSeconds")
	}
	waits := kit.Step{Name: "waitForCluster", Why: kit.Waiting{Reason: etcdv1.ReasonWaitingForCluster, Message: msg},
		Facts: []any{"deadline", deadline.UTC().Format(time.RFC3339)}}
	if s.Status.Phase != etcdv1.SnapshotPending || !hasReady(s, etcdv1.ReasonWaitingForCluster, msg) {
		s.Status.Phase = etcdv1.SnapshotPending
		setReady(s, metav1.ConditionFalse, etcdv1.ReasonWaitingForCluster, msg)
		waits.Changed = true
		if err := r.Status().Update(ctx, s); err != nil {
			return waits, ctrl.Result{}, err
		}
	}
	return waits, ctrl.Result{RequeueAfter: 5 * time.Second}, nil
}

// follow reads the finished Job's result into the status.
func (r *Reconciler) follow(ctx context.Context, s *etcdv1.EtcdSnapshot, job *batchv1.Job) (kit.Step, ctrl.Result, error) {
	done, failed, jobReason := jobFinished(job)
	if !done {
		running := fmt.Sprintf("Job %s is taking the snapshot", job.Name)
		waits := kit.Step{Name: "waitForJob", Why: kit.Waiting{Reason: etcdv1.ReasonInProgress, Message: running}, Facts: []any{"job", job.Name}}
		if s.Status.Phase != etcdv1.SnapshotStarted {
			waits.Changed = true
			return waits, ctrl.Result{}, r.recordStarted(ctx, s, running)
		}
		return waits, ctrl.Result{}, nil
	}
	res, found, end, err := r.agentResult(ctx, job)
	if err != nil {
		return kit.Step{Name: "readResult", Facts: []any{"job", job.Name}}, ctrl.Result{}, err
	}
	switch {
	case !failed && found && res.Reason == "":
		if problem := unverified(s, res); problem != "" {
			return r.fail(ctx, s, etcdv1.ReasonAgentFailed, fmt.Sprintf("the snapshot Job %s reported success, but %s: not trusting it; create a new EtcdSnapshot", job.Name, problem))
		}
		return r.complete(ctx, s, res)
	case found && res.Reason != "":
		return r.fail(ctx, s, res.Reason, res.Message)
	case jobReason == batchv1.JobReasonDeadlineExceeded:
		return r.fail(ctx, s, etcdv1.ReasonDeadlineExceeded, fmt.Sprintf("the snapshot did not finish within spec.activeDeadlineSeconds (%ds): raise it, or look at the cluster's and the store's speed", specs.SnapshotDeadlineSeconds(s)))
	default:
		return r.fail(ctx, s, etcdv1.ReasonAgentFailed, fmt.Sprintf("the snapshot Job %s failed without a result (%s; %s); see its Pod's events and log", job.Name, jobReason, end))
	}
}

// unverified says what is missing from an agent's successful result for the snapshot to be
// called Complete: the file where the spec and the name put it, its size and checksum as the
// agent read them back, and the revision read from the file. "" when nothing is.
func unverified(s *etcdv1.EtcdSnapshot, res agent.Result) string {
	// A Job made before an upgrade used the earlier key layout: LocationOf knows both.
	_, ours := snapshotstore.LocationOf(s.Spec.Destination, snapshotstore.Of(s), res.URI)
	switch {
	case !ours:
		return fmt.Sprintf("it names %q instead of %s", res.URI, snapshotstore.DestinationURI(s.Spec.Destination, snapshotstore.Of(s)))
	case res.SizeBytes <= 0:
		return "it gives no size"
	case !validChecksum(res.Checksum):
		return fmt.Sprintf("its checksum %q is no sha256", res.Checksum)
	case res.Revision <= 0:
		return "it gives no revision"
	}
	return ""
}

func validChecksum(sum string) bool {
	digest, ok := strings.CutPrefix(sum, snapshotstore.ChecksumPrefix)
	if !ok || len(digest) != 64 {
		return false
	}
	_, err := hex.DecodeString(digest)
	return err == nil
}

func jobFinished(job *batchv1.Job) (done, failed bool, reason string) {
	for _, c := range job.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			return true, false, c.Reason
		case batchv1.JobFailed:
			return true, true, c.Reason
		}
	}
	return false, false, ""
}

// agentResult reads the agent's termination message from the Job's Pod. The Pods are chosen by
// the Job's UID, not its name: a Pod of an earlier Job of the same name may still exist.
// Pods and Jobs come to the cache by separate watches, so a finished Job may be seen before
// its Pod's last status: when the cache holds no result, the Pods are read live before the
// snapshot is called failed for want of one.
func (r *Reconciler) agentResult(ctx context.Context, job *batchv1.Job) (agent.Result, bool, string, error) {
	return JobResult(ctx, r.Client, r.live(), job)
}

// agentResultIn reads the result from the Job's Pods in reader; when there is none, it says
// how the agent's container ended instead (agentEnd).
func agentResultIn(ctx context.Context, reader client.Reader, job *batchv1.Job) (agent.Result, bool, string, error) {
	pods := &corev1.PodList{}
	if err := reader.List(ctx, pods, client.InNamespace(job.Namespace), client.MatchingLabels{batchv1.ControllerUidLabel: string(job.UID)}); err != nil {
		return agent.Result{}, false, "", err
	}
	for _, p := range pods.Items {
		for _, cs := range p.Status.ContainerStatuses {
			if t := cs.State.Terminated; t != nil {
				if res, ok := agent.ParseResult(t.Message); ok {
					return res, true, "", nil
				}
			}
		}
	}
	return agent.Result{}, false, agentEnd(pods.Items), nil
}

// endExcerpt bounds how much of a container's own termination message a status repeats.
const endExcerpt = 200

// agentEnd says how the agent's container in each of pods ended, for a result that is
// missing: its exit code and reason (OOMKilled, StartError, Error) and the start of what it
// left as its message, or the Pod's phase and reason when the container never ran; the
// Pod's own reason and message too when it has one (Evicted, with the kubelet's word on the
// scratch volume that outgrew its limit).
func agentEnd(pods []corev1.Pod) string {
	if len(pods) == 0 {
		return "no Pod of the Job is left"
	}
	var ends []string
	for _, p := range pods {
		why := ""
		if p.Status.Reason != "" {
			why = " (" + p.Status.Reason
			if msg := strings.TrimSpace(p.Status.Message); msg != "" {
				why += ": " + excerpt(msg, endExcerpt)
			}
			why += ")"
		}
		end := fmt.Sprintf("Pod %s %s%s", p.Name, p.Status.Phase, why)
		for _, cs := range p.Status.ContainerStatuses {
			if t := cs.State.Terminated; t != nil {
				end = fmt.Sprintf("Pod %s%s: container %s exited with code %d (%s)", p.Name, why, cs.Name, t.ExitCode, t.Reason)
				if msg := strings.TrimSpace(t.Message); msg != "" {
					end += ": " + excerpt(msg, endExcerpt)
				}
			}
		}
		ends = append(ends, end)
	}
	return strings.Join(ends, "; ")
}

func excerpt(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

func (r *Reconciler) complete(ctx context.Context, s *etcdv1.EtcdSnapshot, res agent.Result) (kit.Step, ctrl.Result, error) {
	if err := r.revokeAgentAccess(ctx, s); err != nil {
		return kit.Step{Name: "revokeAgentAccess"}, ctrl.Result{}, err
	}
	now := metav1.NewTime(r.Now())
	s.Status.Phase, s.Status.CompletionTime = etcdv1.SnapshotComplete, &now
	s.Status.Progress = &etcdv1.SnapshotProgress{BytesExpected: res.SizeBytes, BytesWritten: res.SizeBytes, BytesVerified: res.SizeBytes, Percent: 100, UpdateTime: &now}
	s.Status.Artifact = &etcdv1.SnapshotArtifact{URI: res.URI, SizeBytes: res.SizeBytes, Checksum: res.Checksum}
	s.Status.Revision, s.Status.ClusterID, s.Status.Member, s.Status.EtcdVersion = res.Revision, res.ClusterID, res.Member, res.EtcdVersion
	setReady(s, metav1.ConditionTrue, etcdv1.ReasonSucceeded, fmt.Sprintf("stored and verified at %s: %d bytes, revision %d, from member %s", res.URI, res.SizeBytes, res.Revision, res.Member))
	r.event(ctx, s, corev1.EventTypeNormal, etcdv1.ReasonCompleted, "snapshot stored at %s (%d bytes, revision %d)", res.URI, res.SizeBytes, res.Revision)
	completed := kit.Step{Name: "complete", Changed: true, Facts: []any{"uri", res.URI, "sizeBytes", res.SizeBytes, "revision", res.Revision, "member", res.Member}}
	return completed, ctrl.Result{}, metrics.SnapshotFinished(s.Namespace, s.Spec.ClusterRef.Name, false, r.Status().Update(ctx, s))
}

// fail ends the snapshot Failed for reason; its step says why.
func (r *Reconciler) fail(ctx context.Context, s *etcdv1.EtcdSnapshot, reason, msg string) (kit.Step, ctrl.Result, error) {
	if err := r.revokeAgentAccess(ctx, s); err != nil {
		return kit.Step{Name: "revokeAgentAccess"}, ctrl.Result{}, err
	}
	now := metav1.NewTime(r.Now())
	s.Status.Phase, s.Status.CompletionTime, s.Status.Artifact = etcdv1.SnapshotFailed, &now, nil
	setReady(s, metav1.ConditionFalse, reason, msg)
	r.event(ctx, s, corev1.EventTypeWarning, reason, "%s", msg)
	log.FromContext(ctx).Info("snapshot failed", "reason", reason, "message", msg)
	failed := kit.Step{Name: "fail", Changed: true, Facts: []any{"reason", reason, "message", msg}}
	return failed, ctrl.Result{}, metrics.SnapshotFinished(s.Namespace, s.Spec.ClusterRef.Name, true, r.Status().Update(ctx, s))
}

// finalize deletes the stored file through a delete Job when the policy says so, then lets go.
func (r *Reconciler) finalize(ctx context.Context, s *etcdv1.EtcdSnapshot) (kit.Step, ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(s, etcdv1.FinalizerSnapshotFile) {
		return kit.Step{}, ctrl.Result{}, nil
	}
	if jobMade, err := r.snapshotJobMade(ctx, s); err != nil || jobMade {
		// Recorded before the Job is stopped: once that Job is gone, nothing else would say
		// that a file may have been written.
		recorded := kit.Step{Name: "recordStarted", Changed: true, Facts: []any{"why", "its Job was made before the operator could record it"}}
		if err == nil {
			err = r.recordStarted(ctx, s, "its Job was made before the operator stopped; the snapshot is being deleted")
		}
		return recorded, ctrl.Result{}, err
	}
	deletes := deletesStoredFile(s)
	if deletes {
		step, done, err := r.deleteStoredFile(ctx, s)
		if err != nil || !done {
			return step, ctrl.Result{}, err
		}
	}
	controllerutil.RemoveFinalizer(s, etcdv1.FinalizerSnapshotFile)
	released := kit.Step{Name: "removeFinalizer", Changed: true, Facts: []any{"deletionPolicy", s.Spec.DeletionPolicy, "storedFileDeleted", deletes}}
	return released, ctrl.Result{}, client.IgnoreNotFound(r.Update(ctx, s))
}

// snapshotJobMade says whether a snapshot not yet recorded as Started has its Job all the
// same: the operator stopped between creating the Job and recording it (recordStarted), and
// the Job may have written the file. Read live: this is the last look before the file would
// be forgotten.
func (r *Reconciler) snapshotJobMade(ctx context.Context, s *etcdv1.EtcdSnapshot) (bool, error) {
	if s.Status.Phase != etcdv1.SnapshotPending && s.Status.Phase != "" {
		return false, nil
	}
	key := types.NamespacedName{Namespace: s.Namespace, Name: specs.SnapshotJobName(s.Name, specs.ActionSnapshot)}
	err := r.live().Get(ctx, key, &batchv1.Job{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

// deletesStoredFile says whether a snapshot being deleted runs the delete Job: only with
// deletionPolicy Delete, once it may have written a file (not Pending), and not when its
// agent refused because the file was there already (SnapshotFileExists): that file is
// another snapshot's. The delete agent checks the owner recorded with the file as well
// (snapshotstore.MayDelete); this spares it the Job.
func deletesStoredFile(s *etcdv1.EtcdSnapshot) bool {
	if s.Spec.DeletionPolicy != etcdv1.SnapshotDelete || s.Status.Phase == etcdv1.SnapshotPending || s.Status.Phase == "" {
		return false
	}
	ready := meta.FindStatusCondition(s.Status.Conditions, etcdv1.SnapshotConditionReady)
	return s.Status.Phase != etcdv1.SnapshotFailed || ready == nil || ready.Reason != etcdv1.ReasonSnapshotFileExists
}

// clusterIfAny is the snapshot's cluster, for the spec.additionalMetadata of its delete Job;
// nil when it is gone (the Job deletes the file all the same).
func (r *Reconciler) clusterIfAny(ctx context.Context, s *etcdv1.EtcdSnapshot) *etcdv1.EtcdCluster {
	c := &etcdv1.EtcdCluster{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: s.Spec.ClusterRef.Name}, c); err != nil {
		return nil
	}
	return c
}

// deleteStoredFile runs the delete Job to its end; true once it ended well, and until then
// the step it took. A snapshot Job still running is stopped first, so it cannot complete a
// file after the delete.
func (r *Reconciler) deleteStoredFile(ctx context.Context, s *etcdv1.EtcdSnapshot) (kit.Step, bool, error) {
	running := &batchv1.Job{}
	err := r.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: specs.SnapshotJobName(s.Name, specs.ActionSnapshot)}, running)
	if err == nil {
		if done, _, _ := jobFinished(running); !done {
			fg := metav1.DeletePropagationForeground
			stopped := kit.Step{Name: "stopSnapshotJob", Changed: true, Facts: []any{"job", running.Name}}
			return stopped, false, client.IgnoreNotFound(r.Delete(ctx, running, &client.DeleteOptions{PropagationPolicy: &fg}))
		}
	} else if !apierrors.IsNotFound(err) {
		return kit.Step{Name: "getSnapshotJob"}, false, err
	}
	job := &batchv1.Job{}
	err = r.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: specs.SnapshotJobName(s.Name, specs.ActionDelete)}, job)
	if apierrors.IsNotFound(err) {
		job = specs.SnapshotJob(s, r.clusterIfAny(ctx, s), r.AgentImage, specs.ActionDelete)
		// Not owned by the snapshot: it must outlive the snapshot's deletion; its TTL cleans it.
		started := kit.Step{Name: "startDeleteJob", Changed: true, Facts: []any{"job", job.Name, "uri", artifactURI(s)}}
		err := r.Create(ctx, job)
		if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
			// No Job can be made in a namespace being deleted, and waiting for one would hold
			// the namespace forever. The file stays (a backup kept, never one lost), and says so.
			r.event(ctx, s, corev1.EventTypeWarning, etcdv1.ReasonStoredFileKept,
				"the namespace is being deleted, so no Job can delete the stored file %s: it is kept; delete it from the store if it is not wanted", artifactURI(s))
			return kit.Step{Name: "keepFileNamespaceTerminating", Facts: []any{"uri", artifactURI(s)}}, true, nil
		}
		return started, false, client.IgnoreAlreadyExists(err)
	}
	if err != nil {
		return kit.Step{Name: "getDeleteJob"}, false, err
	}
	if job.Labels[etcdv1.LabelSnapshotUID] != string(s.UID) {
		// Left by an earlier EtcdSnapshot of the same name: it says nothing about this one.
		bg := metav1.DeletePropagationBackground
		removed := kit.Step{Name: "removeStaleDeleteJob", Changed: true, Facts: []any{"job", job.Name}}
		return removed, false, client.IgnoreNotFound(r.Delete(ctx, job, &client.DeleteOptions{PropagationPolicy: &bg}))
	}
	done, failed, _ := jobFinished(job)
	if !done {
		return kit.Step{Name: "waitForDeleteJob", Why: kit.Waiting{Reason: etcdv1.ReasonInProgress, Message: fmt.Sprintf("Job %s is deleting the stored file", job.Name)}}, false, nil
	}
	if failed {
		return r.deleteFailed(ctx, s, job)
	}
	if res, found, _, err := r.agentResult(ctx, job); err == nil && found && res.Message != agent.MessageDeleted {
		r.event(ctx, s, corev1.EventTypeNormal, etcdv1.ReasonStoredFileKept, "%s", res.Message)
	}
	return kit.Step{}, true, nil
}

// deleteFailed records why the delete Job failed; the deletion waits for a person to fix it.
func (r *Reconciler) deleteFailed(ctx context.Context, s *etcdv1.EtcdSnapshot, job *batchv1.Job) (kit.Step, bool, error) {
	res, found, end, err := r.agentResult(ctx, job)
	if err != nil {
		return kit.Step{Name: "readDeleteResult"}, false, err
	}
	why := end
	if found {
		why = res.Reason + ": " + res.Message
	}
	msg := fmt.Sprintf("deleting the stored file %s failed (%s); fix it and delete Job %s to retry, or set deletionPolicy: Retain", artifactURI(s), why, job.Name)
	waits, err := r.waitFor(ctx, s, "waitForDeleteFix", etcdv1.ReasonDeleteFailed, msg)
	return waits, false, err
}

func artifactURI(s *etcdv1.EtcdSnapshot) string {
	if s.Status.Artifact != nil {
		return s.Status.Artifact.URI
	}
	return snapshotstore.URI(specs.StoredSnapshotFile(s))
}

func setReady(s *etcdv1.EtcdSnapshot, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&s.Status.Conditions, metav1.Condition{
		Type: etcdv1.SnapshotConditionReady, Status: status, Reason: reason, Message: msg, ObservedGeneration: s.Generation,
	})
}

func hasReady(s *etcdv1.EtcdSnapshot, reason, msg string) bool {
	c := meta.FindStatusCondition(s.Status.Conditions, etcdv1.SnapshotConditionReady)
	return c != nil && c.Reason == reason && c.Message == msg
}

func (r *Reconciler) event(ctx context.Context, s *etcdv1.EtcdSnapshot, kind, reason, format string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(s, nil, kind, reason, "Snapshot", format, args...)
	}
	kit.LogEvent(ctx, s, nil, kind, reason, format, args...)
}
