package cluster

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/agent"
	"github.com/quorumkeeper/etcd-operator/internal/snapshotstore"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

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

// restoreProgress says where each founding member's restore is, from its Pod, while the
// cluster has not formed: for the Available condition's message while it bootstraps. The
// restore runs in the member's Pod, which has no API access, so what it says is what the
// kubelet reports of the restore init container: not started, restoring since when (and
// which attempt), done. It changes only when the restore does, so the status is not
// rewritten on every look.
func restoreProgress(c *etcdv1.EtcdCluster, members []*etcdv1.EtcdMember, pods map[string]*corev1.Pod) string {
	if c.Status.ClusterID != "" {
		return ""
	}
	var states []string
	for _, m := range members {
		restore := specs.RestoreSource(c, m)
		if restore == nil {
			continue
		}
		states = append(states, fmt.Sprintf("member %s %s", m.Name, restoreState(pods[m.Name], specs.SourceURI(restore.Source))))
	}
	return strings.Join(states, "; ")
}

// restoreState is where the restore of uri is in pod (nil: not created yet).
func restoreState(pod *corev1.Pod, uri string) string {
	if pod == nil {
		return "is to restore " + uri + " once its Pod is created"
	}
	for _, cs := range pod.Status.InitContainerStatuses {
		if cs.Name != specs.RestoreContainerName {
			continue
		}
		attempt := ""
		if cs.RestartCount > 0 {
			attempt = fmt.Sprintf(" (attempt %d)", cs.RestartCount+1)
		}
		switch {
		case cs.State.Running != nil:
			return fmt.Sprintf("is restoring %s since %s%s: downloading, verifying, etcdutl snapshot restore", uri, cs.State.Running.StartedAt.UTC().Format(time.RFC3339), attempt)
		case cs.State.Terminated != nil && cs.State.Terminated.ExitCode == 0:
			return "restored " + uri + "; etcd is starting"
		}
	}
	return fmt.Sprintf("is to restore %s once its Pod starts (Pod %s)", uri, pod.Status.Phase)
}

// restoreFailed reports whether Available says the bootstrap restore failed.
func restoreFailed(c *etcdv1.EtcdCluster) bool {
	cond := meta.FindStatusCondition(c.Status.Conditions, etcdv1.ConditionAvailable)
	return cond != nil && cond.Reason == etcdv1.ReasonRestoreFailed
}

// resolveRestore turns the cluster's restore source into what its founding member restores,
// or says why it cannot be used and what to do. s3 and pvc are used as they are (the restore
// agent checks the checksum recorded beside the file, when there is one). A snapshotRef must
// name a Complete EtcdSnapshot (snap; nil when none of that name exists): its file (its
// destination and its name) is restored, and must have the checksum its status.artifact
// recorded. The result is written into the founding member, so the member's Pod does not
// depend on the EtcdSnapshot afterwards.
func resolveRestore(c *etcdv1.EtcdCluster, snap *etcdv1.EtcdSnapshot) (*etcdv1.MemberRestore, string) {
	if c.Spec.Bootstrap == nil || c.Spec.Bootstrap.Restore == nil {
		return nil, ""
	}
	src := c.Spec.Bootstrap.Restore.Source
	if src.SnapshotRef == nil {
		loc := src.Location()
		return &etcdv1.MemberRestore{Source: *loc.DeepCopy()}, ""
	}
	name := src.SnapshotRef.Name
	// spec.bootstrap is immutable: a cluster that names the wrong snapshot is created again.
	const recreate = "or delete this EtcdCluster and create it again naming a Complete EtcdSnapshot (spec.bootstrap cannot change)"
	if snap == nil {
		return nil, fmt.Sprintf("spec.bootstrap.restore.source.snapshotRef: EtcdSnapshot %s does not exist in namespace %s: create it (the restore starts once it is Complete), %s",
			name, c.Namespace, recreate)
	}
	if !snap.DeletionTimestamp.IsZero() {
		return nil, fmt.Sprintf("spec.bootstrap.restore.source.snapshotRef: EtcdSnapshot %s is being deleted: %s", name, recreate)
	}
	switch snap.Status.Phase {
	case etcdv1.SnapshotComplete:
	case etcdv1.SnapshotFailed:
		why := "no reason recorded"
		if ready := meta.FindStatusCondition(snap.Status.Conditions, "Ready"); ready != nil {
			why = ready.Reason + ": " + ready.Message
		}
		return nil, fmt.Sprintf("spec.bootstrap.restore.source.snapshotRef: EtcdSnapshot %s failed (%s): delete it and create it again under the same name once its cause is fixed, %s",
			name, why, recreate)
	default:
		phase := string(snap.Status.Phase)
		if phase == "" {
			phase = string(etcdv1.SnapshotPending)
		}
		return nil, fmt.Sprintf("spec.bootstrap.restore.source.snapshotRef: EtcdSnapshot %s is %s, not Complete yet: the restore starts once it completes (see kubectl get etcdsnap %s)",
			name, phase, name)
	}
	restore := snapshotFile(snap)
	if restore == nil {
		return nil, fmt.Sprintf("spec.bootstrap.restore.source.snapshotRef: EtcdSnapshot %s is Complete but its status.artifact %s does not name its file %s with a sha256 checksum, so the file cannot be verified: restore from its s3 or pvc location instead, %s",
			name, describeArtifact(snap.Status.Artifact), snapshotstore.DestinationURI(snap.Spec.Destination, snapshotstore.Of(snap)), recreate)
	}
	return restore, ""
}

// snapshotFile is what a member restores from a Complete EtcdSnapshot: its file (its
// destination and its name), which must have the checksum its status.artifact recorded. Nil
// when the artifact does not name that file with a sha256 checksum: the file could not be
// verified.
func snapshotFile(snap *etcdv1.EtcdSnapshot) *etcdv1.MemberRestore {
	a := snap.Status.Artifact
	if a == nil || !strings.HasPrefix(a.Checksum, snapshotstore.ChecksumPrefix) {
		return nil
	}
	// The artifact's own URI, not the key this operator would choose now: a snapshot stored
	// under an earlier key layout keeps its file where it is.
	file, ok := snapshotstore.LocationOf(snap.Spec.Destination, snapshotstore.Of(snap), a.URI)
	if !ok {
		return nil
	}
	return &etcdv1.MemberRestore{Source: file, Checksum: a.Checksum, Snapshot: snap.Name}
}

func describeArtifact(a *etcdv1.SnapshotArtifact) string {
	if a == nil {
		return "(none)"
	}
	return fmt.Sprintf("{uri %q, checksum %q}", a.URI, a.Checksum)
}

// observeRestore resolves the restore source while the founding member is still to be
// created: afterwards the member holds what it restores. It reads the EtcdSnapshot a
// snapshotRef names from the cache.
func (r *Reconciler) observeRestore(ctx context.Context, c *etcdv1.EtcdCluster, members []*etcdv1.EtcdMember) (*etcdv1.MemberRestore, string, error) {
	if c.Spec.Bootstrap == nil || c.Spec.Bootstrap.Restore == nil || c.Status.ClusterID != "" || c.Status.SnapshotRecovery != nil {
		return nil, "", nil // formed already, or rebuilt from the snapshot a recovery names
	}
	for _, m := range members {
		if m.Spec.Bootstrap.InitialClusterState == etcdv1.InitialClusterStateNew {
			return nil, "", nil
		}
	}
	if c.Spec.Bootstrap.Restore.Source.ScheduleRef != nil && c.Spec.Bootstrap.Restore.Target != nil {
		return r.observeArchiveRestore(ctx, c)
	}
	var snap *etcdv1.EtcdSnapshot
	if ref := c.Spec.Bootstrap.Restore.Source.SnapshotRef; ref != nil {
		s := &etcdv1.EtcdSnapshot{}
		switch err := r.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: ref.Name}, s); {
		case err == nil:
			snap = s
		case !apierrors.IsNotFound(err):
			return nil, "", err
		}
	}
	src, failure := resolveRestore(c, snap)
	return src, failure, nil
}

// clustersRestoringFrom maps an EtcdSnapshot to the clusters of its namespace waiting to
// restore it, so that a snapshot completing (or created) starts their restore at once.
func (r *Reconciler) clustersRestoringFrom(ctx context.Context, obj client.Object) []reconcile.Request {
	return r.clustersUsing(ctx, obj, func(c *etcdv1.EtcdCluster, snapshot string) bool {
		return c.Status.ClusterID == "" && specs.BootstrapSnapshot(c) == snapshot
	})
}

// restoreSubject names the snapshot a bootstrap restores, for messages.
func restoreSubject(c *etcdv1.EtcdCluster) string {
	if r := c.Status.SnapshotRecovery; r != nil {
		return "restoring EtcdSnapshot " + r.Snapshot
	}
	return "restoring spec.bootstrap.restore"
}

// holdSnapshot makes EtcdSnapshot name hold its stored file for cluster c
// (etcdv1.FinalizerRestoreSource) before an act that makes a restore of it necessary; "" when
// it holds it, or why it cannot: the EtcdSnapshot is gone or being deleted. Read live and
// written with the resourceVersion read, every time (etcdv1.AnnotationRestoreHeldBy): a
// deletion that came in between fails the write (and no finalizer can be added to an object
// being deleted), so the act is refused rather than begun on a file about to go; a release
// the snapshot controller decided before this hold fails as well.
func (r *Reconciler) holdSnapshot(ctx context.Context, c *etcdv1.EtcdCluster, name string) (string, error) {
	s := &etcdv1.EtcdSnapshot{}
	if err := r.reader().Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: name}, s); apierrors.IsNotFound(err) {
		return fmt.Sprintf("EtcdSnapshot %s no longer exists", name), nil
	} else if err != nil {
		return "", err
	}
	if !s.DeletionTimestamp.IsZero() {
		return fmt.Sprintf("EtcdSnapshot %s is being deleted", name), nil
	}
	patch := client.MergeFromWithOptions(s.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.AddFinalizer(s, etcdv1.FinalizerRestoreSource)
	metav1.SetMetaDataAnnotation(&s.ObjectMeta, etcdv1.AnnotationRestoreHeldBy,
		fmt.Sprintf("EtcdCluster %s at %s", c.Name, r.now().UTC().Format(time.RFC3339Nano)))
	return "", r.Patch(ctx, s, patch)
}
