// Package retention keeps what happens to an EtcdCluster's data when the cluster is deleted
// (spec.persistentVolumeClaimRetentionPolicy): who owns the members' PVCs, the cluster's
// finalizer that releases them, and the annotations a later cluster of the same name reads
// to adopt them; and, for the member and cluster reconcilers alike, whose a PVC is
// (PVCOfMember) and the mark of data a quorum-loss recovery discarded (MarkDiscarded), which
// no policy lets go with the cluster.
//
// With whenDeleted Retain (the default) the members' PVCs have no owner at all, as a
// StatefulSet's PVCs under the same policy: garbage collection can never take them, also not
// `kubectl delete etcdcluster --cascade=foreground`, which deletes the dependents while the
// owner's finalizers still run (a release at that point would come too late: a PVC marked for
// deletion cannot be unmarked). With Delete the cluster controls them and garbage collection
// deletes them with the cluster. The cluster also carries the finalizer
// etcdv1.FinalizerRetainPVCs, a second line for PVCs that still carry an owner reference from
// before a policy change or an older operator: it takes those references off before letting
// the cluster go; the member finalizer does the same for its own PVC (Release).
// A new EtcdCluster of the same name in the same namespace finds the kept PVCs at its first
// bootstrap and recreates their members: same names, same member IDs (from the PVC
// annotations), same data, so the same etcd cluster ID. That is a bootstrap, so the cluster
// reconciler's.
package retention

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller/kit"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// The member controller creates and deletes the PVCs; this component only reads and patches
// them.
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get;list;watch;patch

// Component keeps the members' PVCs' owners and the cluster's retention finalizer.
type Component struct {
	objects  kit.Objects
	recorder events.EventRecorder
}

// New is the component over the cluster's child objects, recording its events with recorder
// (none when nil).
func New(objects kit.Objects, recorder events.EventRecorder) *Component {
	return &Component{objects: objects, recorder: recorder}
}

// Retains is true when the cluster's PVCs outlive it. Absent means Retain: the data is kept
// unless someone asked otherwise.
func Retains(c *etcdv1.EtcdCluster) bool {
	if c.Spec.Storage.Medium == etcdv1.StorageMediumMemory {
		return false
	}
	p := c.Spec.PersistentVolumeClaimRetentionPolicy
	return p == nil || p.WhenDeleted != etcdv1.PVCDelete
}

// Mark keeps the finalizer in line with the policy, also after it changed. A conflict says
// the cluster changed since c was read (see setFinalizer).
func (p *Component) Mark(ctx context.Context, c *etcdv1.EtcdCluster) error {
	want := Retains(c)
	if controllerutil.ContainsFinalizer(c, etcdv1.FinalizerRetainPVCs) == want {
		return nil
	}
	return p.setFinalizer(ctx, c, want)
}

// setFinalizer puts the retention finalizer on c, or takes it off, and writes c's finalizers.
// A merge patch replaces the whole list, so one made from a copy read before someone else
// added a finalizer would drop theirs: the patch holds c's resourceVersion, and the API
// server refuses it with a conflict when the cluster changed since. The caller lets the
// conflict go: the change that caused it brings the next reconcile, which reads the cluster
// anew.
func (p *Component) setFinalizer(ctx context.Context, c *etcdv1.EtcdCluster, on bool) error {
	patch := client.MergeFromWithOptions(c.DeepCopy(), client.MergeFromWithOptimisticLock{})
	if on {
		controllerutil.AddFinalizer(c, etcdv1.FinalizerRetainPVCs)
	} else {
		controllerutil.RemoveFinalizer(c, etcdv1.FinalizerRetainPVCs)
	}
	return p.objects.Client.Patch(ctx, c, patch)
}

// Sync applies OwnPerPolicy to the PVCs the operator made for this cluster, as the reconcile
// observed them (facts.PVCs, no list of its own), also after the policy changed.
func (p *Component) Sync(ctx context.Context, c *etcdv1.EtcdCluster, facts kit.Facts) error {
	for _, pvc := range facts.PVCs {
		if !pvc.DeletionTimestamp.IsZero() || pvc.Labels[etcdv1.LabelManagedBy] != specs.ManagerName {
			continue
		}
		patch := client.MergeFrom(pvc.DeepCopy())
		changed, err := OwnPerPolicy(c, pvc, p.objects.Client.Scheme())
		if err != nil {
			return err
		}
		if !changed {
			continue
		}
		if err := p.objects.Client.Patch(ctx, pvc, patch); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	return nil
}

// Finalize releases the PVCs of a cluster being deleted with whenDeleted Retain, then lets
// the cluster go. A conflict says the cluster changed since c was read (see setFinalizer), or
// a PVC since it was listed (see Release); either change brings the next reconcile (the
// cluster's PVCs are watched by its label), and releasing the PVCs again is harmless.
func (p *Component) Finalize(ctx context.Context, c *etcdv1.EtcdCluster) error {
	if !controllerutil.ContainsFinalizer(c, etcdv1.FinalizerRetainPVCs) {
		return nil
	}
	if Retains(c) {
		if err := p.releaseAll(ctx, c); err != nil {
			return err
		}
	}
	return client.IgnoreNotFound(p.setFinalizer(ctx, c, false))
}

// releaseAll releases every PVC labelled as the cluster's and says how many it kept.
func (p *Component) releaseAll(ctx context.Context, c *etcdv1.EtcdCluster) error {
	list := &corev1.PersistentVolumeClaimList{}
	if err := p.objects.Client.List(ctx, list, client.InNamespace(c.Namespace), client.MatchingLabels{etcdv1.LabelCluster: c.Name}); err != nil {
		return err
	}
	kept := 0
	for i := range list.Items {
		released, err := Release(ctx, p.objects.Client, c, &list.Items[i])
		if client.IgnoreNotFound(err) != nil {
			return err
		}
		if released {
			kept++
		}
	}
	if kept > 0 {
		kit.Emit(ctx, p.recorder, c, nil, corev1.EventTypeNormal, etcdv1.ReasonPVCsRetained, "DeleteCluster", "kept %d PVCs (whenDeleted Retain): an EtcdCluster named %s created in this namespace adopts them with their data; delete them to free the space", kept, c.Name)
	}
	return nil
}

// OwnPerPolicy sets a PVC's owners to what the retention policy asks: controlled by the
// cluster under Delete, owned by nothing of ours under Retain (owners that are not this
// cluster's stay). True when it changed the PVC, which the caller then writes.
func OwnPerPolicy(c *etcdv1.EtcdCluster, pvc *corev1.PersistentVolumeClaim, scheme *runtime.Scheme) (bool, error) {
	if Retains(c) {
		return dropClusterOwners(c, pvc), nil
	}
	if metav1.IsControlledBy(pvc, c) {
		return false, nil
	}
	dropClusterOwners(c, pvc)
	return true, controllerutil.SetControllerReference(c, pvc, scheme)
}

// dropClusterOwners takes the owner references of cluster c and of its members off a PVC;
// true when there were any.
func dropClusterOwners(c *etcdv1.EtcdCluster, pvc *corev1.PersistentVolumeClaim) bool {
	var keep []metav1.OwnerReference
	for _, ref := range pvc.OwnerReferences {
		ours := (ref.Kind == "EtcdCluster" && ref.APIVersion == etcdv1.GroupVersion.String() && ref.Name == c.Name) ||
			(ref.Kind == "EtcdMember" && ref.APIVersion == etcdv1.GroupVersion.String() && pvc.Labels[etcdv1.LabelCluster] == c.Name)
		if !ours {
			keep = append(keep, ref)
		}
	}
	if len(keep) == len(pvc.OwnerReferences) {
		return false
	}
	pvc.OwnerReferences = keep
	return true
}

// Release takes the owner references of cluster c and of its members off a PVC, so that
// garbage collection leaves it; true when it took any off, false with the error when the
// API server refused. A PVC controlled by anything else is left alone. A merge patch
// replaces the whole list of owners, so one made from a PVC read before someone else changed
// its owners would undo their change: the patch holds the PVC's resourceVersion, and the API
// server refuses it with a conflict, which the caller returns for its reconcile to read the
// PVC anew. A PVC gone since it was read comes back as NotFound, not as released: whether
// that matters (a count of kept PVCs, a member's log line) is the caller's to say.
func Release(ctx context.Context, cl client.Client, c *etcdv1.EtcdCluster, pvc *corev1.PersistentVolumeClaim) (bool, error) {
	patch := client.MergeFromWithOptions(pvc.DeepCopy(), client.MergeFromWithOptimisticLock{})
	if !dropClusterOwners(c, pvc) {
		return false, nil
	}
	if err := cl.Patch(ctx, pvc, patch); err != nil {
		return false, err
	}
	return true, nil
}

// RecordDataVersion annotates the PVC with the etcd version its member last reported; true
// when it changed. Only from now on: PVCs kept by an older operator carry none, and are
// adopted without the check.
func RecordDataVersion(pvc *corev1.PersistentVolumeClaim, m *etcdv1.EtcdMember) bool {
	if m.Status.Version == "" || pvc.Annotations[etcdv1.AnnotationEtcdVersion] == m.Status.Version {
		return false
	}
	if pvc.Annotations == nil {
		pvc.Annotations = map[string]string{}
	}
	pvc.Annotations[etcdv1.AnnotationEtcdVersion] = m.Status.Version
	return true
}
