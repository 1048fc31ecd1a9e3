// Package volumes grows an EtcdCluster's members' volumes when spec.storage.size grows, and
// says how far they are in the VolumesResized condition.
//
// A larger spec.storage.size reaches the members through their EtcdMembers' spec: the
// member controller raises its PVC's request to it (Kubernetes and the storage driver expand
// the volume online, etcd keeps running), and a tmpfs member's Pod gets the new size limit
// through the rolling restart. A PVC can grow only when its StorageClass allows expansion:
// otherwise no member is touched (nothing half-applied) and the VolumesResized condition says
// why and what to do; members created later get the new size.
package volumes

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller/kit"
)

// The StorageClass says whether the volumes may grow; the members' spec.storage.size is what
// this component writes (the member controller then asks its PVC to grow).
// +kubebuilder:rbac:groups=storage.k8s.io,resources=storageclasses,verbs=get;list;watch

// Component moves the members' sizes to the cluster's.
type Component struct {
	objects  kit.Objects
	recorder events.EventRecorder
}

// New is the component over the cluster's child objects, recording its events with recorder
// (none when nil).
func New(objects kit.Objects, recorder events.EventRecorder) *Component {
	return &Component{objects: objects, recorder: recorder}
}

// volumeFacts is what the growth decision knows of one member.
type volumeFacts struct {
	member   string
	specSize resource.Quantity // its EtcdMember's spec.storage.size
	// hasPVC: the PVC exists; requested is its request, capacity its size once bound.
	hasPVC              bool
	requested, capacity resource.Quantity
	// resizePending: the driver expanded the volume and waits for the Pod to restart to
	// grow the filesystem.
	resizePending bool
}

// classFacts is what the cluster's StorageClass allows.
type classFacts struct {
	name       string // "" when the PVCs name no class
	found      bool
	expandable bool
}

// volumePlan is what to do: the members whose spec moves to the new size, and the condition.
type volumePlan struct {
	grow []string
	cond *metav1.Condition // nil when no member has a PVC yet
}

// planVolumes decides, from spec.storage.size and each member's PVC, which members move to
// the new size, and what VolumesResized says.
func planVolumes(want resource.Quantity, class classFacts, vols []volumeFacts) volumePlan {
	var plan volumePlan
	var behindWithPVC []string
	anyPVC := false
	for _, f := range vols {
		anyPVC = anyPVC || f.hasPVC
		if f.specSize.Cmp(want) >= 0 {
			continue
		}
		if f.hasPVC && f.requested.Cmp(want) < 0 {
			behindWithPVC = append(behindWithPVC, f.member)
			continue
		}
		plan.grow = append(plan.grow, f.member) // its PVC is still to come, at the new size
	}
	if !anyPVC {
		return plan
	}
	if len(behindWithPVC) > 0 {
		if refusal := expansionRefusal(want, class, vols); refusal != nil {
			plan.cond = refusal
			return plan
		}
		plan.grow = append(plan.grow, behindWithPVC...)
	}
	plan.cond = growthProgress(want, vols)
	return plan
}

// expansionRefusal is the condition when the class cannot expand the members' volumes.
func expansionRefusal(want resource.Quantity, class classFacts, vols []volumeFacts) *metav1.Condition {
	have := smallestRequest(vols)
	keep := fmt.Sprintf("the members keep their %s volumes (members created from now on get %s); spec.storage.size cannot go back down", have.String(), want.String())
	switch {
	case class.name == "":
		return volumesCondition(etcdv1.ReasonExpansionNotAllowed, "spec.storage.size is %s, but the PVCs have no StorageClass and Kubernetes expands only volumes of a class with allowVolumeExpansion: %s", want.String(), keep)
	case !class.found:
		return volumesCondition(etcdv1.ReasonStorageClassNotFound, "spec.storage.size is %s, but the PVCs' StorageClass %s does not exist, so it cannot say whether volumes may grow: %s", want.String(), class.name, keep)
	case !class.expandable:
		return volumesCondition(etcdv1.ReasonExpansionNotAllowed, "spec.storage.size is %s, but StorageClass %s does not allow volume expansion: %s. Set allowVolumeExpansion: true on %s if its provisioner can expand volumes, and the PVCs grow", want.String(), class.name, keep, class.name)
	}
	return nil
}

// growthProgress is the condition while the PVCs grow to want, or once they all hold it.
func growthProgress(want resource.Quantity, vols []volumeFacts) *metav1.Condition {
	var small, pending []string
	for _, f := range vols {
		if !f.hasPVC || (f.capacity.IsZero() && f.requested.Cmp(want) >= 0) {
			continue // not bound yet, and asked at the new size
		}
		if f.capacity.Cmp(want) >= 0 {
			continue
		}
		small = append(small, fmt.Sprintf("%s (%s)", f.member, f.capacity.String()))
		if f.resizePending {
			pending = append(pending, f.member)
		}
	}
	switch {
	case len(pending) > 0:
		return volumesCondition(etcdv1.ReasonFileSystemResizePending, "the volumes of %s were expanded to %s; their storage driver grows the filesystem only when the Pod restarts: delete each member's Pod, one at a time", strings.Join(pending, ", "), want.String())
	case len(small) > 0:
		return volumesCondition(etcdv1.ReasonVolumesExpanding, "expanding the members' PVCs to %s: %s", want.String(), strings.Join(small, ", "))
	}
	cond := volumesCondition(etcdv1.ReasonVolumesAsRequested, "every member's PVC holds %s", want.String())
	cond.Status = metav1.ConditionTrue
	return cond
}

func volumesCondition(reason, format string, args ...any) *metav1.Condition {
	return &metav1.Condition{Type: etcdv1.ConditionVolumesResized, Status: metav1.ConditionFalse, Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// smallestRequest is the smallest request of the members' PVCs.
func smallestRequest(vols []volumeFacts) resource.Quantity {
	var least resource.Quantity
	for _, f := range vols {
		if f.hasPVC && (least.IsZero() || f.requested.Cmp(least) < 0) {
			least = f.requested
		}
	}
	return least
}

// volumeFactsOf reads each live member's size and PVC from the facts.
func volumeFactsOf(facts kit.Facts) []volumeFacts {
	out := make([]volumeFacts, 0, len(facts.Members))
	for _, m := range facts.Members {
		if !m.DeletionTimestamp.IsZero() {
			continue
		}
		f := volumeFacts{member: m.Name}
		if m.Spec.Storage.Size != nil {
			f.specSize = *m.Spec.Storage.Size
		}
		if pvc := facts.PVCs[m.Name]; pvc != nil && pvc.DeletionTimestamp.IsZero() {
			f.hasPVC = true
			f.requested = pvc.Spec.Resources.Requests[corev1.ResourceStorage]
			f.capacity = pvc.Status.Capacity[corev1.ResourceStorage]
			f.resizePending = pvcCondition(pvc, corev1.PersistentVolumeClaimFileSystemResizePending)
		}
		out = append(out, f)
	}
	return out
}

func pvcCondition(pvc *corev1.PersistentVolumeClaim, t corev1.PersistentVolumeClaimConditionType) bool {
	for _, c := range pvc.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// classOf looks up the StorageClass of the cluster's PVCs (the one the apiserver resolved at
// creation), or the spec's when no PVC names one.
func (g *Component) classOf(ctx context.Context, c *etcdv1.EtcdCluster, observed kit.Facts) (classFacts, error) {
	var facts classFacts
	for _, m := range observed.Members {
		if pvc := observed.PVCs[m.Name]; pvc != nil && pvc.Spec.StorageClassName != nil {
			facts.name = *pvc.Spec.StorageClassName
			break
		}
	}
	if facts.name == "" && c.Spec.Storage.StorageClassName != nil {
		facts.name = *c.Spec.Storage.StorageClassName
	}
	if facts.name == "" {
		return facts, nil
	}
	class := &storagev1.StorageClass{}
	err := g.objects.Client.Get(ctx, types.NamespacedName{Name: facts.name}, class)
	if apierrors.IsNotFound(err) {
		return facts, nil
	}
	if err != nil {
		return facts, err
	}
	facts.found = true
	facts.expandable = class.AllowVolumeExpansion != nil && *class.AllowVolumeExpansion
	return facts, nil
}

// Sync moves the members' spec.storage.size to the cluster's when it grew, and returns the
// VolumesResized condition (nil for tmpfs clusters, and before any PVC exists) for the
// cluster reconciler to set in its status write.
func (g *Component) Sync(ctx context.Context, c *etcdv1.EtcdCluster, observed kit.Facts) (*metav1.Condition, error) {
	if c.Spec.Storage.Size == nil {
		return nil, nil
	}
	want := *c.Spec.Storage.Size
	facts := volumeFactsOf(observed)
	class := classFacts{found: true, expandable: true} // tmpfs: a Pod's size limit can always grow
	if c.Spec.Storage.Medium != etcdv1.StorageMediumMemory && needsExpansion(want, facts) {
		var err error
		if class, err = g.classOf(ctx, c, observed); err != nil {
			return nil, err
		}
	}
	plan := planVolumes(want, class, facts)
	if err := g.grow(ctx, c, observed.Members, plan.grow, want); err != nil {
		return plan.cond, err
	}
	if c.Spec.Storage.Medium == etcdv1.StorageMediumMemory {
		return nil, nil
	}
	return plan.cond, nil
}

// grow moves the members named in names, in that order, to size.
func (g *Component) grow(ctx context.Context, c *etcdv1.EtcdCluster, members []*etcdv1.EtcdMember, names []string, size resource.Quantity) error {
	if len(names) == 0 {
		return nil
	}
	byName := make(map[string]*etcdv1.EtcdMember, len(members))
	for _, m := range members {
		byName[m.Name] = m
	}
	for _, name := range names {
		if err := g.setMemberSize(ctx, c, byName[name], size); err != nil {
			return err
		}
	}
	return nil
}

// needsExpansion: some member's existing PVC asks for less than want.
func needsExpansion(want resource.Quantity, facts []volumeFacts) bool {
	for _, f := range facts {
		if f.hasPVC && f.specSize.Cmp(want) < 0 && f.requested.Cmp(want) < 0 {
			return true
		}
	}
	return false
}

func (g *Component) setMemberSize(ctx context.Context, c *etcdv1.EtcdCluster, m *etcdv1.EtcdMember, size resource.Quantity) error {
	from := "unset"
	if m.Spec.Storage.Size != nil {
		from = m.Spec.Storage.Size.String()
	}
	patch := client.MergeFrom(m.DeepCopy())
	m.Spec.Storage.Size = &size
	if err := g.objects.Client.Patch(ctx, m, patch); err != nil {
		return kit.IgnoreConflict(err)
	}
	kit.Emit(ctx, g.recorder, c, m, corev1.EventTypeNormal, etcdv1.ReasonGrowingVolume, "GrowVolume", "member %s: storage size %s -> %s", m.Name, from, size.String())
	return nil
}
