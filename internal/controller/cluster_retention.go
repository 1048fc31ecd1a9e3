package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller/kit"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// What happens to the data when an EtcdCluster is deleted (spec.persistentVolumeClaimRetentionPolicy).
//
// With whenDeleted Retain (the default) the members' PVCs have no owner at all, as a
// StatefulSet's PVCs under the same policy: garbage collection can never take them, also not
// `kubectl delete etcdcluster --cascade=foreground`, which deletes the dependents while the
// owner's finalizers still run (a release at that point would come too late: a PVC marked for
// deletion cannot be unmarked). With Delete the cluster controls them and garbage collection
// deletes them with the cluster. The cluster also carries the finalizer below, a second line
// for PVCs that still carry an owner reference from before a policy change or an older
// operator: it takes those references off before letting the cluster go; the member
// finalizer does the same for its own PVC.
// A new EtcdCluster of the same name in the same namespace finds the kept PVCs at its first
// bootstrap and recreates their members (adoptRetainedPVCs): same names, same member IDs
// (from the PVC annotations), same data, so the same etcd cluster ID.

// retainsPVCs is true when the cluster's PVCs outlive it. Absent means Retain: the data is
// kept unless someone asked otherwise.
func retainsPVCs(c *etcdv1.EtcdCluster) bool {
	if c.Spec.Storage.Medium == etcdv1.StorageMediumMemory {
		return false
	}
	p := c.Spec.PersistentVolumeClaimRetentionPolicy
	return p == nil || p.WhenDeleted != etcdv1.PVCDelete
}

// ensureRetention keeps the finalizer in line with the policy, also after it changed.
func (r *ClusterReconciler) ensureRetention(ctx context.Context, c *etcdv1.EtcdCluster) error {
	want := retainsPVCs(c)
	if controllerutil.ContainsFinalizer(c, etcdv1.FinalizerRetainPVCs) == want {
		return nil
	}
	patch := client.MergeFrom(c.DeepCopy())
	if want {
		controllerutil.AddFinalizer(c, etcdv1.FinalizerRetainPVCs)
	} else {
		controllerutil.RemoveFinalizer(c, etcdv1.FinalizerRetainPVCs)
	}
	return r.Patch(ctx, c, patch)
}

// ownPVCsPerPolicy applies ownPVCPerPolicy to the PVCs the operator made for this cluster,
// as the reconcile observed them (no list of its own), also after the policy changed.
func (r *ClusterReconciler) ownPVCsPerPolicy(ctx context.Context, c *etcdv1.EtcdCluster, pvcs map[string]*corev1.PersistentVolumeClaim) error {
	for _, pvc := range pvcs {
		if !pvc.DeletionTimestamp.IsZero() || pvc.Labels[etcdv1.LabelManagedBy] != specs.ManagerName {
			continue
		}
		patch := client.MergeFrom(pvc.DeepCopy())
		changed, err := ownPVCPerPolicy(c, pvc, r.Scheme())
		if err != nil {
			return err
		}
		if !changed {
			continue
		}
		if err := r.Patch(ctx, pvc, patch); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	return nil
}

// finalizeCluster releases the PVCs of a cluster being deleted with whenDeleted Retain, then
// lets the cluster go.
func (r *ClusterReconciler) finalizeCluster(ctx context.Context, c *etcdv1.EtcdCluster) error {
	if !controllerutil.ContainsFinalizer(c, etcdv1.FinalizerRetainPVCs) {
		return nil
	}
	if retainsPVCs(c) {
		list := &corev1.PersistentVolumeClaimList{}
		if err := r.List(ctx, list, client.InNamespace(c.Namespace), client.MatchingLabels{etcdv1.LabelCluster: c.Name}); err != nil {
			return err
		}
		kept := 0
		for i := range list.Items {
			released, err := releasePVC(ctx, r.Client, c, &list.Items[i])
			if err != nil {
				return err
			}
			if released {
				kept++
			}
		}
		if kept > 0 {
			r.event(ctx, c, corev1.EventTypeNormal, etcdv1.ReasonPVCsRetained, "DeleteCluster", "kept %d PVCs (whenDeleted Retain): an EtcdCluster named %s created in this namespace adopts them with their data; delete them to free the space", kept, c.Name)
		}
	}
	patch := client.MergeFrom(c.DeepCopy())
	controllerutil.RemoveFinalizer(c, etcdv1.FinalizerRetainPVCs)
	return client.IgnoreNotFound(r.Patch(ctx, c, patch))
}

// ownPVCPerPolicy sets a PVC's owners to what the retention policy asks: controlled by the
// cluster under Delete, owned by nothing of ours under Retain (owners that are not this
// cluster's stay). True when it changed the PVC, which the caller then writes.
func ownPVCPerPolicy(c *etcdv1.EtcdCluster, pvc *corev1.PersistentVolumeClaim, scheme *runtime.Scheme) (bool, error) {
	if retainsPVCs(c) {
		return dropOurOwners(c, pvc), nil
	}
	if metav1.IsControlledBy(pvc, c) {
		return false, nil
	}
	dropOurOwners(c, pvc)
	return true, controllerutil.SetControllerReference(c, pvc, scheme)
}

// dropOurOwners takes the owner references of cluster c and of its members off a PVC; true
// when there were any.
func dropOurOwners(c *etcdv1.EtcdCluster, pvc *corev1.PersistentVolumeClaim) bool {
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

// releasePVC takes the owner references of cluster c and of its members off a PVC, so that
// garbage collection leaves it; true when it changed the PVC. A PVC controlled by anything
// else is left alone.
func releasePVC(ctx context.Context, cl client.Client, c *etcdv1.EtcdCluster, pvc *corev1.PersistentVolumeClaim) (bool, error) {
	patch := client.MergeFrom(pvc.DeepCopy())
	if !dropOurOwners(c, pvc) {
		return false, nil
	}
	return true, client.IgnoreNotFound(cl.Patch(ctx, pvc, patch))
}

// retainedPVCs are PVCs kept from an earlier cluster of this name: no owner, this cluster's
// label, and the member ID the member recorded on them; not the data of members a recovery
// discarded, which is no member's. Sorted by name.
func (r *ClusterReconciler) retainedPVCs(ctx context.Context, c *etcdv1.EtcdCluster) ([]corev1.PersistentVolumeClaim, error) {
	list := &corev1.PersistentVolumeClaimList{}
	if err := r.List(ctx, list, client.InNamespace(c.Namespace), client.MatchingLabels{etcdv1.LabelCluster: c.Name}); err != nil {
		return nil, err
	}
	var out []corev1.PersistentVolumeClaim
	for _, pvc := range list.Items {
		if metav1.GetControllerOf(&pvc) == nil && pvc.Annotations[etcdv1.AnnotationMemberID] != "" &&
			(pvc.Labels[etcdv1.LabelMember] == pvc.Name || specs.AdoptionOf(&pvc) != nil) && pvc.DeletionTimestamp.IsZero() && !discardedData(&pvc) {
			out = append(out, pvc)
		}
	}
	slices.SortFunc(out, func(a, b corev1.PersistentVolumeClaim) int { return byOrdinal(a.Name, b.Name) })
	return out, nil
}

// retainedDataRefusal says why a first bootstrap must not adopt the kept PVCs, as a reason and
// a message naming them and the ways out; "" when it may. It is decided on the PVCs alone,
// before any member is made, so that a refusal leaves nothing half-applied.
func retainedDataRefusal(c *etcdv1.EtcdCluster, kept []corev1.PersistentVolumeClaim) (reason, message string) {
	clusterIDs := map[string]bool{}
	names := make([]string, 0, len(kept))
	for _, pvc := range kept {
		if id := pvc.Annotations[etcdv1.AnnotationClusterID]; id != "" {
			clusterIDs[id] = true
		}
		names = append(names, pvc.Name)
	}
	list := strings.Join(names, ", ")
	if len(clusterIDs) > 1 {
		return etcdv1.ReasonRetainedDataConflict, fmt.Sprintf("the kept PVCs %s come from %d different etcd clusters: the operator cannot tell which to bring back; delete the PVCs of the cluster you do not want",
			list, len(clusterIDs))
	}
	// The kept data would be served as if it were the snapshot, or the snapshot written over
	// data someone kept on purpose: neither without a person's word.
	if c.Spec.Bootstrap != nil && c.Spec.Bootstrap.Restore != nil {
		src := "spec.bootstrap.restore"
		if name := specs.BootstrapSnapshot(c); name != "" {
			src += " (EtcdSnapshot " + name + ")"
		}
		return etcdv1.ReasonRetainedDataBlocksRestore, fmt.Sprintf("%s asks for a new cluster from a snapshot, but PVCs %s kept from an earlier EtcdCluster %s (etcd cluster %s) hold data of their own: nothing is created. Delete those PVCs to restore from the snapshot, or delete this EtcdCluster and create it without spec.bootstrap.restore to bring the kept data back",
			src, list, c.Name, firstKey(clusterIDs))
	}
	if want, ok := parseVersion(c.Spec.Version); ok {
		for _, pvc := range kept {
			have, ok := parseVersion(pvc.Annotations[etcdv1.AnnotationEtcdVersion])
			if ok && newerMinor(have, want) {
				return etcdv1.ReasonRetainedDataNewer, fmt.Sprintf("PVC %s kept from an earlier EtcdCluster %s holds data etcd %s wrote (%s), and etcd cannot open data of a newer minor: nothing is created. Set spec.version to %d.%d or later to bring the kept data back, or delete the PVCs %s to start anew",
					pvc.Name, c.Name, have, etcdv1.AnnotationEtcdVersion, have.major, have.minor, list)
			}
		}
	}
	return "", ""
}

// newerMinor: a is of a later major or minor release than b (patches do not matter to the
// data's format).
func newerMinor(a, b version) bool {
	return a.major > b.major || (a.major == b.major && a.minor > b.minor)
}

// recordDataVersion annotates the PVC with the etcd version its member last reported; true
// when it changed. Only from now on: PVCs kept by an older operator carry none, and are
// adopted without the check.
func recordDataVersion(pvc *corev1.PersistentVolumeClaim, m *etcdv1.EtcdMember) bool {
	if m.Status.Version == "" || pvc.Annotations[etcdv1.AnnotationEtcdVersion] == m.Status.Version {
		return false
	}
	if pvc.Annotations == nil {
		pvc.Annotations = map[string]string{}
	}
	pvc.Annotations[etcdv1.AnnotationEtcdVersion] = m.Status.Version
	return true
}

// adoptRetainedPVCs is the first bootstrap of a cluster that finds PVCs kept from an earlier
// cluster of its name: instead of founding a new etcd cluster next to that data, it
// recreates the kept members, each on its PVC with the member ID annotated there
// (memberFromPVC). Their etcd starts from its data and the old cluster comes back with its
// cluster ID; scaling then goes on to spec.replicas. A crash halfway is finished next time:
// members made from kept PVCs do not count as a bootstrap already under way. It refuses,
// before any member is made, what retainedDataRefusal refuses.
func (r *ClusterReconciler) adoptRetainedPVCs(ctx context.Context, c *etcdv1.EtcdCluster, v *clusterView) (bool, error) {
	if c.Status.ClusterID != "" || v.reachable || c.Spec.Storage.Medium == etcdv1.StorageMediumMemory || foundingBegun(v.members) {
		return false, nil
	}
	// A PVC still being deleted (to let a restore go on, say) holds the name a founding
	// member's new PVC takes, and would be taken for it: wait until it is gone.
	if going := pvcsGoing(v.pvcs); len(going) > 0 {
		return true, waitFor(etcdv1.ReasonBootstrapping, "waiting for PVCs %s, being deleted, to be gone before the first members are made", strings.Join(going, ", "))
	}
	kept, err := r.retainedPVCs(ctx, c)
	if err != nil || len(kept) == 0 {
		return false, err
	}
	if reason, message := retainedDataRefusal(c, kept); reason != "" {
		return true, kit.ChildProblem(reason, "%s", message)
	}
	clusterID, names := "", make([]string, 0, len(kept))
	for _, pvc := range kept {
		if id := pvc.Annotations[etcdv1.AnnotationClusterID]; id != "" {
			clusterID = id
		}
		names = append(names, pvcMember(&pvc))
	}
	adopted := 0
	for i := range kept {
		have := memberNamed(v.members, pvcMember(&kept[i]))
		if !needsMemberFromPVC(have) {
			continue
		}
		if _, err := r.memberFromPVC(ctx, c, have, &kept[i], kept[i].Annotations[etcdv1.AnnotationClusterID], etcdv1.RoleVoter, ptrOr(c.Spec.Replicas, 3) == 0); err != nil {
			return true, err
		}
		adopted++
	}
	if adopted == 0 {
		return false, nil
	}
	r.event(ctx, c, corev1.EventTypeNormal, etcdv1.ReasonAdoptedRetainedPVCs, "Bootstrap", "found PVCs kept from an earlier cluster %s (etcd cluster %s): recreated members %s on them with their data",
		c.Name, clusterID, strings.Join(names, ", "))
	return true, nil
}

// pvcsGoing names the PVCs being deleted, in order.
func pvcsGoing(pvcs map[string]*corev1.PersistentVolumeClaim) []string {
	var out []string
	for _, pvc := range pvcs {
		if !pvc.DeletionTimestamp.IsZero() {
			out = append(out, pvc.Name)
		}
	}
	slices.SortFunc(out, byOrdinal)
	return out
}

// foundingBegun: a first bootstrap of a new etcd cluster has created its founding members.
func foundingBegun(members []*etcdv1.EtcdMember) bool {
	for _, m := range members {
		if m.Spec.Bootstrap.InitialClusterState == etcdv1.InitialClusterStateNew {
			return true
		}
	}
	return false
}

func firstKey(m map[string]bool) string {
	for k := range m {
		return k
	}
	return ""
}

// keepPVCOfDeletedCluster is the member finalizer's part of whenDeleted Retain: when the
// member goes because its cluster is being deleted (a foreground deletion removes members
// first), its PVC is released before garbage collection can take it. A member a quorum-loss
// recovery was discarding keeps its PVC as discarded data under either policy: the salvage
// copy is not the cluster's data, and goes only when a person deletes it.
func (r *MemberReconciler) keepPVCOfDeletedCluster(ctx context.Context, m *etcdv1.EtcdMember) error {
	c := &etcdv1.EtcdCluster{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: m.Namespace, Name: m.Spec.ClusterName}, c); err != nil {
		// Gone: its own finalizer released the PVCs first, if it was to keep them.
		return client.IgnoreNotFound(err)
	}
	if m.Annotations[etcdv1.AnnotationDiscardedByRecovery] == "true" || m.Annotations[etcdv1.AnnotationDiscard] == "true" {
		return r.keepDiscardedPVC(ctx, c, m)
	}
	if !retainsPVCs(c) {
		return nil
	}
	pvc := &corev1.PersistentVolumeClaim{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: m.Namespace, Name: specs.PVCName(m)}, pvc); err != nil {
		return client.IgnoreNotFound(err)
	}
	if _, err := releasePVC(ctx, r.Client, c, pvc); err != nil {
		return fmt.Errorf("keeping PVC %s of deleted cluster %s: %w", pvc.Name, c.Name, err)
	}
	return nil
}
