package schedule

import (
	"context"
	"fmt"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller/kit"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups="",resources=serviceaccounts,verbs=get;create;delete
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=roles;rolebindings,verbs=create;delete

// archiveLookAgain is how soon a schedule with an archive is looked at again: its window
// follows the archiver's reports.
const archiveLookAgain = 30 * time.Second

// syncArchive keeps the schedule's archiver and the operator's part of status.archive (the
// window, retainFromRevision, the Archived condition), and starts a full snapshot when the
// archive has no base (NeedsBase); it returns the snapshot it started, if any. Without
// spec.archive it removes the archiver and that status. held are the schedule's snapshots
// being deleted that a restore still holds: the segments after them are kept too.
func (r *Reconciler) syncArchive(ctx context.Context, sc *etcdv1.EtcdSnapshotSchedule, owned, held []*etcdv1.EtcdSnapshot, running string, now time.Time) (string, error) {
	if sc.Spec.Archive == nil {
		sc.Status.Archive = nil
		meta.RemoveStatusCondition(&sc.Status.Conditions, etcdv1.SnapshotScheduleConditionArchived)
		return "", r.removeArchiver(ctx, sc)
	}
	c := &etcdv1.EtcdCluster{}
	switch err := r.Get(ctx, types.NamespacedName{Namespace: sc.Namespace, Name: sc.Spec.ClusterRef.Name}, c); {
	case apierrors.IsNotFound(err):
		setArchived(sc, metav1.ConditionFalse, etcdv1.ReasonArchiveStarting, fmt.Sprintf("EtcdCluster %s does not exist: no archiver runs", sc.Spec.ClusterRef.Name))
		return "", nil
	case err != nil:
		return "", err
	}
	if err := r.runArchiver(ctx, sc, c); err != nil {
		return "", err
	}
	bases, newestStart := basesOf(owned)
	if sc.Status.Archive == nil {
		sc.Status.Archive = &etcdv1.ArchiveStatus{}
	}
	st := sc.Status.Archive
	heldBases, _ := basesOf(held)
	st.Window, st.RetainFromRevision = Window(st.Archived, bases), RetainFrom(append(heldBases, bases...))
	status, reason, msg := Archived(st, st.Window)
	setArchived(sc, status, reason, msg)
	if !NeedsBase(st.Archived, bases, running != "", newestStart, now) || sc.Spec.Suspend {
		return "", nil
	}
	return r.start(ctx, sc, now.Truncate(time.Second))
}

// held is the schedule's snapshots being deleted whose file a restore holds
// (etcdv1.FinalizerRestoreSource): a cluster restoring to a target may replay the archive
// from one of them.
func held(sc *etcdv1.EtcdSnapshotSchedule, items []etcdv1.EtcdSnapshot) []*etcdv1.EtcdSnapshot {
	var out []*etcdv1.EtcdSnapshot
	for i := range items {
		s := &items[i]
		if !s.DeletionTimestamp.IsZero() && s.Labels[etcdv1.LabelSnapshotSchedule] == sc.Name &&
			controllerutil.ContainsFinalizer(s, etcdv1.FinalizerRestoreSource) {
			out = append(out, s)
		}
	}
	return out
}

// basesOf is the schedule's Complete snapshots as bases, and when its newest snapshot (of
// any phase) was created.
func basesOf(owned []*etcdv1.EtcdSnapshot) ([]Base, time.Time) {
	var bases []Base
	var newest time.Time
	for _, s := range owned {
		if s.CreationTimestamp.After(newest) {
			newest = s.CreationTimestamp.Time
		}
		if s.Status.Phase == etcdv1.SnapshotComplete && s.Status.Revision > 0 && s.Status.CompletionTime != nil {
			bases = append(bases, Base{Name: s.Name, Revision: s.Status.Revision, Time: s.Status.CompletionTime.Time})
		}
	}
	return bases, newest
}

func setArchived(sc *etcdv1.EtcdSnapshotSchedule, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&sc.Status.Conditions, metav1.Condition{
		Type: etcdv1.SnapshotScheduleConditionArchived, Status: status, Reason: reason, Message: msg, ObservedGeneration: sc.Generation,
	})
}

// runArchiver makes the archiver's access, then its Deployment, both owned by the schedule,
// and brings a Deployment of an earlier spec up to date.
func (r *Reconciler) runArchiver(ctx context.Context, sc *etcdv1.EtcdSnapshotSchedule, c *etcdv1.EtcdCluster) error {
	for _, obj := range archiverAccess(sc, c) {
		if err := controllerutil.SetControllerReference(sc, obj, r.Scheme()); err != nil {
			return err
		}
		if err := r.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return kit.RefusedByAPI(err, obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName())
		}
	}
	want := specs.ArchiverDeployment(sc, c, r.AgentImage)
	if err := controllerutil.SetControllerReference(sc, want, r.Scheme()); err != nil {
		return err
	}
	have := &appsv1.Deployment{}
	err := kit.GetChild(ctx, r.Client, r.APIReader, client.ObjectKeyFromObject(want), have)
	switch {
	case apierrors.IsNotFound(err):
		return kit.RefusedByAPI(r.Create(ctx, want), "Deployment", want.Name)
	case err != nil:
		return err
	}
	if err := kit.NotOurs(have, sc, "Deployment", "EtcdSnapshotSchedule"); err != nil {
		return err
	}
	if equality.Semantic.DeepDerivative(want.Spec.Template, have.Spec.Template) && equality.Semantic.DeepDerivative(want.Labels, have.Labels) {
		return nil
	}
	have.Labels, have.Spec.Template, have.Spec.Strategy, have.Spec.Replicas = want.Labels, want.Spec.Template, want.Spec.Strategy, want.Spec.Replicas
	return kit.RefusedByAPI(r.Update(ctx, have), "Deployment", have.Name)
}

// archiverAccess is the archiver's access (specs.ArchiverAccess): the ServiceAccount first
// (when the operator makes it), the binding last.
func archiverAccess(sc *etcdv1.EtcdSnapshotSchedule, c *etcdv1.EtcdCluster) []client.Object {
	sa, role, binding := specs.ArchiverAccess(sc, c)
	if sa == nil {
		return []client.Object{role, binding}
	}
	return []client.Object{sa, role, binding}
}

// removeArchiver deletes the archiver's Deployment and access of the schedule, when they are
// its own; the archive's segments stay in the store.
func (r *Reconciler) removeArchiver(ctx context.Context, sc *etcdv1.EtcdSnapshotSchedule) error {
	d := &appsv1.Deployment{}
	err := r.Get(ctx, types.NamespacedName{Namespace: sc.Namespace, Name: specs.ArchiverName(sc.Name)}, d)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return err
	case !metav1.IsControlledBy(d, sc):
		return nil
	}
	if err := r.Delete(ctx, d); client.IgnoreNotFound(err) != nil {
		return err
	}
	objs := archiverAccess(sc, nil)
	slices.Reverse(objs) // the binding first: from then on nothing is granted
	for _, obj := range objs {
		if err := r.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	return nil
}
