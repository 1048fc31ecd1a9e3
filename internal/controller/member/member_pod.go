package member

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller/children/retention"
	"github.com/quorumkeeper/etcd-operator/internal/controller/kit"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

func equalStatus(a, b *etcdv1.EtcdMember) bool {
	return equality.Semantic.DeepEqual(a.Status, b.Status)
}

// errDataLost says a member that etcd counts on has lost its data: it must not start again
// under its ID; the cluster controller replaces it.
var errDataLost = errors.New("data lost")

// ensurePVC creates the member's PVC, or takes back one kept from an EtcdMember deleted by
// hand, and records the member's etcd identity on it; it returns what it did with the PVC. A
// member that has started in etcd gets no new, empty PVC: errDataLost, with why etcd could not
// say whether it had when it could not be asked.
//
// The PVC is never owned by the EtcdMember: with the member as owner, `kubectl delete
// etcdmember --cascade=foreground` (or any deletion whose garbage collection wins the race
// with the member's finalizer) would take the data. Who owns it follows the cluster's
// retention policy (retention.OwnPerPolicy). The member's finalizer deletes the PVC itself,
// and only at the end of a deliberate removal from etcd.
func (r *Reconciler) ensurePVC(ctx context.Context, c *etcdv1.EtcdCluster, m *etcdv1.EtcdMember) (pvcFate, error) {
	have := &corev1.PersistentVolumeClaim{}
	err := kit.GetChild(ctx, r.Client, r.APIReader, types.NamespacedName{Namespace: m.Namespace, Name: specs.PVCName(m)}, have)
	if apierrors.IsNotFound(err) {
		return r.createPVC(ctx, c, m)
	}
	if err != nil {
		return pvcUnchanged, err
	}
	if !have.DeletionTimestamp.IsZero() {
		return pvcDeleting, nil // going with its data: the cluster controller replaces the member
	}
	if err := usable(have, c, m); err != nil {
		return pvcUnchanged, err
	}
	patch := client.MergeFrom(have.DeepCopy())
	changed, err := retention.OwnPerPolicy(c, have, r.Scheme())
	if err != nil {
		return pvcUnchanged, err
	}
	if recordIdentity(have, m) {
		changed = true
	}
	if retention.RecordDataVersion(have, m) {
		changed = true
	}
	fate := pvcUnchanged
	if changed {
		if err := r.Patch(ctx, have, patch); err != nil {
			return pvcUnchanged, err
		}
		fate = pvcUpdated
	}
	grown, err := r.growPVC(ctx, m, have)
	if grown {
		fate = pvcGrown
	}
	return fate, err
}

// createPVC creates the PVC of a member that has not joined etcd (errDataLost for one that
// has, or may have).
func (r *Reconciler) createPVC(ctx context.Context, c *etcdv1.EtcdCluster, m *etcdv1.EtcdMember) (pvcFate, error) {
	joined, err := r.joined(ctx, c, m)
	if err != nil {
		return pvcAbsent, fmt.Errorf("%w: etcd cannot say whether the member joined: %w", errDataLost, err)
	}
	if joined {
		return pvcAbsent, errDataLost
	}
	want := specs.PVC(c, m)
	if _, err := retention.OwnPerPolicy(c, want, r.Scheme()); err != nil {
		return pvcAbsent, err
	}
	if err := r.Create(ctx, want); err != nil && !apierrors.IsAlreadyExists(err) {
		return pvcAbsent, kit.RefusedByAPI(err, "PersistentVolumeClaim", want.Name)
	}
	r.event(ctx, m, corev1.EventTypeNormal, etcdv1.ReasonPVCCreated, "CreatePVC", "created PVC %s", want.Name)
	return pvcCreated, nil
}

// growPVC raises a bound PVC's storage request to the member's size (the cluster controller
// raises that only when the StorageClass allows expansion); a request never goes down, and
// an unbound claim cannot change. True when it asked the PVC to grow.
func (r *Reconciler) growPVC(ctx context.Context, m *etcdv1.EtcdMember, pvc *corev1.PersistentVolumeClaim) (bool, error) {
	want := m.Spec.Storage.Size
	have := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	if want == nil || want.Cmp(have) <= 0 || pvc.Status.Phase != corev1.ClaimBound {
		return false, nil
	}
	patch := client.MergeFrom(pvc.DeepCopy())
	if pvc.Spec.Resources.Requests == nil {
		pvc.Spec.Resources.Requests = corev1.ResourceList{}
	}
	pvc.Spec.Resources.Requests[corev1.ResourceStorage] = *want
	if err := r.Patch(ctx, pvc, patch); err != nil {
		return false, fmt.Errorf("expanding PVC %s to %s: %w", pvc.Name, want.String(), err)
	}
	r.event(ctx, m, corev1.EventTypeNormal, etcdv1.ReasonPVCExpanding, "ExpandPVC", "asked PVC %s to grow from %s to %s", pvc.Name, have.String(), want.String())
	return true, nil
}

// recordIdentity annotates the PVC with the member's etcd member and cluster IDs; true when
// it changed. The cluster ID is known only after the member ID for a member added by
// scale-out; it is recorded when it appears, so that kept PVCs tell which etcd cluster they
// belong to.
func recordIdentity(pvc *corev1.PersistentVolumeClaim, m *etcdv1.EtcdMember) bool {
	if m.Status.MemberID == "" || (pvc.Annotations[etcdv1.AnnotationMemberID] == m.Status.MemberID &&
		(m.Status.ClusterID == "" || pvc.Annotations[etcdv1.AnnotationClusterID] == m.Status.ClusterID)) {
		return false
	}
	if pvc.Annotations == nil {
		pvc.Annotations = map[string]string{}
	}
	pvc.Annotations[etcdv1.AnnotationMemberID] = m.Status.MemberID
	pvc.Annotations[etcdv1.AnnotationClusterID] = m.Status.ClusterID
	return true
}

// usable says why the member must not run on the PVC of its name: another application's
// (kit.NotOurs), or the data of a member a quorum-loss recovery discarded, which is kept for a
// person and never run again: under its old member ID and membership it would rejoin, or
// split, the recovered cluster. Nil when it is the member's.
func usable(pvc *corev1.PersistentVolumeClaim, c *etcdv1.EtcdCluster, m *etcdv1.EtcdMember) error {
	if retention.DiscardedData(pvc) {
		return kit.ChildProblem(etcdv1.ReasonNameConflict, "PVC %s holds the data of a member a quorum-loss recovery discarded (%s): no member starts on it; delete EtcdMember %s, or the PVC once its data is no longer needed",
			pvc.Name, etcdv1.AnnotationDiscardedByRecovery, m.Name)
	}
	if !retention.PVCOfMember(pvc, c, m.Name) {
		return kit.NotOurs(pvc, m, "PersistentVolumeClaim", "EtcdMember")
	}
	return nil
}

// ensurePod runs the member's Pod unless the member is paused or not yet added to etcd, and
// mirrors the Pod's state into the member's status.
func (r *Reconciler) ensurePod(ctx context.Context, c *etcdv1.EtcdCluster, m *etcdv1.EtcdMember) (kit.Step, ctrl.Result, error) {
	pod := &corev1.Pod{}
	err := r.Get(ctx, types.NamespacedName{Namespace: m.Namespace, Name: m.Name}, pod)
	if err != nil && !apierrors.IsNotFound(err) {
		return kit.Step{Name: "getPod"}, ctrl.Result{}, err
	}
	exists := err == nil
	switch {
	case m.Spec.Dormant:
		return r.pause(ctx, m, pod, exists)
	case m.Spec.Bootstrap.InitialClusterState == etcdv1.InitialClusterStateExisting && m.Status.MemberID == "":
		waits, err := r.waiting(ctx, m, "waitForMemberAdd", "", readyCondition(metav1.ConditionFalse, etcdv1.ReasonWaitingForMemberAdd, "waiting to be added to etcd as a learner"))
		return waits, ctrl.Result{}, err
	case !exists:
		return r.createPod(ctx, c, m)
	case !pod.DeletionTimestamp.IsZero():
		return kit.Step{Name: "waitForPodDeletion", Facts: podFacts(pod)}, ctrl.Result{RequeueAfter: time.Second}, nil
	case !podOfMember(pod, m):
		return kit.Step{Name: "ensurePod", Facts: podFacts(pod)}, ctrl.Result{}, kit.NotOurs(pod, m, "Pod", "EtcdMember")
	}
	step, res, err := r.tendPod(ctx, c, m, pod)
	step.Facts = append(step.Facts, podFacts(pod)...)
	return step, res, err
}

// pause deletes the Pod of a dormant member; its data and identity stay.
func (r *Reconciler) pause(ctx context.Context, m *etcdv1.EtcdMember, pod *corev1.Pod, exists bool) (kit.Step, ctrl.Result, error) {
	deleted := false
	if exists && pod.DeletionTimestamp.IsZero() {
		err := r.Delete(ctx, pod)
		if client.IgnoreNotFound(err) != nil {
			return kit.Step{Name: "paused", Facts: podFacts(pod)}, ctrl.Result{}, err
		}
		deleted = err == nil // not found: gone before this look
	}
	waits, err := r.waiting(ctx, m, "paused", "", readyCondition(metav1.ConditionFalse, etcdv1.ReasonPaused, "the cluster is paused; data and identity are kept"))
	waits.Changed = waits.Changed || deleted
	waits.Facts = []any{"podDeleted", deleted}
	return waits, ctrl.Result{}, err
}

// tendPod looks after the member's existing Pod: replaced when its node left it terminal, or
// while it cannot start and the spec changed; its role label and adoption stamp kept, its
// state mirrored into the member. No step applies when all of it is as it should be.
func (r *Reconciler) tendPod(ctx context.Context, c *etcdv1.EtcdCluster, m *etcdv1.EtcdMember, pod *corev1.Pod) (kit.Step, ctrl.Result, error) {
	if replaced, terminal, err := r.replaceTerminalPod(ctx, m, pod); terminal || err != nil {
		return replaced, ctrl.Result{}, err
	}
	if replaced, stuck, err := r.replaceStuckPod(ctx, c, m, pod); stuck || err != nil {
		return replaced, ctrl.Result{}, err
	}
	relabeled, relabelWaits, err := r.syncRoleLabel(ctx, c, pod, m)
	if err != nil {
		return kit.Step{Name: "labelRole"}, ctrl.Result{}, err
	}
	stamped, err := r.stampAdoptedPod(ctx, c, m, pod)
	if err != nil {
		return kit.Step{Name: "stampAdoptedPod"}, ctrl.Result{}, err
	}
	step, res, err := r.mirrorPodState(ctx, m, pod)
	if relabelWaits && (res.RequeueAfter == 0 || res.RequeueAfter > roleLabelRetry) {
		res.RequeueAfter = roleLabelRetry
		step.Facts = append(step.Facts, "roleLabelWaits", true)
	}
	if relabeled || stamped {
		step.Changed = true
		step.Facts = append(step.Facts, "roleLabeled", relabeled, "adoptedPodStamped", stamped)
	}
	if step.Name == podStateMirrored && !step.Changed && err == nil {
		step.Name = "" // the Pod is as it should be, and the member says so already
	}
	return step, res, err
}

// replaceStuckPod deletes the member's Pod when it cannot start under its template and the
// Pod the member would get now is another (its template hash): fixing the spec (a toleration
// added, spec.version set back from a release with no image, a bad option taken out) takes
// effect at once. A roll would not reach it: it waits for every member to be up, and during a
// bootstrap it does not run at all. The Pod is not serving, so nothing stops that served; the
// next look creates the Pod anew from the current spec (createPod), on the member's PVC.
// True when the Pod is stuck: its step then says why, and is the reconcile's.
func (r *Reconciler) replaceStuckPod(ctx context.Context, c *etcdv1.EtcdCluster, m *etcdv1.EtcdMember, pod *corev1.Pod) (kit.Step, bool, error) {
	want := specs.Pod(c, m, r.PodOptions)
	why := stuckAndOutdated(pod, want, m.Spec.Storage.Medium == etcdv1.StorageMediumMemory)
	if why == "" {
		return kit.Step{}, false, nil
	}
	replaced := kit.Step{Name: "replaceStuckPod", Facts: []any{"stuck", why}}
	if err := r.Delete(ctx, pod, client.Preconditions{UID: &pod.UID}); client.IgnoreNotFound(err) != nil {
		return replaced, true, err
	}
	r.event(ctx, m, corev1.EventTypeNormal, etcdv1.ReasonPodReplaced, "ReplacePod", "replaced Pod %s, %s, with one of the changed spec", pod.Name, why)
	replaced.Changed = true
	return replaced, true, nil
}

// stuckAndOutdated says why the Pod cannot start under its template ("" when it can, or when
// its template hash is the one of want, the Pod the member would get now):
//
//   - no node has taken it and the scheduler said none can;
//   - etcd never ran in it: its container waits for a reason other than being created (an
//     image that cannot be pulled, a config error) with no restart and no earlier exit. The
//     container status proves it, so it is never wrong;
//   - etcd crash-loops in it, unless the last exit was a data error (kit.DataError: the cluster
//     controller replaces such a member under a new ID; a new Pod would not help).
//
// Whether a crash-looping Pod was ever Ready the Pod does not tell: the kubelet keeps the
// last exit and a restart count, not the history of the Ready condition. It needs not: a
// crash-looping Pod serves nothing, the roll cannot reach it (it waits for every member to
// be up), and the new Pod, being current, is never replaced this way again, so a spec change
// costs at most one replacement per member. A tmpfs member (podHoldsData) keeps its data in
// the Pod, which a container restart keeps and a new Pod loses: its Pod is replaced only
// when etcd never ran in it, when it holds nothing.
func stuckAndOutdated(pod, want *corev1.Pod, podHoldsData bool) string {
	if pod.Annotations[etcdv1.AnnotationPodTemplateHash] == want.Annotations[etcdv1.AnnotationPodTemplateHash] || kit.PodReady(pod) {
		return ""
	}
	if kit.PodUnschedulable(pod) {
		return "which no node could take"
	}
	if pod.Spec.NodeName == "" {
		return ""
	}
	waiting := kit.StuckWaiting(pod)
	switch {
	case waiting == "":
		return ""
	case etcdNeverRan(pod):
		return "in which etcd never ran (" + waiting + ")"
	case waiting == "CrashLoopBackOff" && !podHoldsData && kit.DataError(pod) == "":
		return "in which etcd crash-loops"
	}
	return ""
}

// etcdNeverRan: no container of the Pod (etcd; init containers do not serve) has run: none
// runs, none ended, none restarted.
func etcdNeverRan(pod *corev1.Pod) bool {
	if len(pod.Status.ContainerStatuses) == 0 {
		return false // the kubelet has not said yet
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.RestartCount > 0 || cs.State.Running != nil || cs.State.Terminated != nil || cs.LastTerminationState.Terminated != nil {
			return false
		}
	}
	return true
}

// podOfMember: the Pod is this member's, or an earlier EtcdMember's of the same name that
// garbage collection is about to delete.
func podOfMember(pod *corev1.Pod, m *etcdv1.EtcdMember) bool {
	ref := metav1.GetControllerOf(pod)
	return ref != nil && ref.Kind == "EtcdMember" && ref.Name == m.Name
}

// podStateMirrored is the step of a member whose Pod is as it should be: its readiness, or why
// it cannot start, put into the member's status.
const podStateMirrored = "mirrorPodState"

// mirrorPodState puts the Pod's readiness, or why it cannot start, into the member's status.
func (r *Reconciler) mirrorPodState(ctx context.Context, m *etcdv1.EtcdMember, pod *corev1.Pod) (kit.Step, ctrl.Result, error) {
	ready := podReadiness(pod)
	if ready.Status != metav1.ConditionTrue && m.Spec.Storage.Medium != etcdv1.StorageMediumMemory {
		why, err := r.volumeProblem(ctx, m)
		if err != nil {
			return kit.Step{Name: podStateMirrored}, ctrl.Result{}, err
		}
		if why != nil {
			// Nothing the operator watches changes when the StorageClass appears.
			waits, err := r.waiting(ctx, m, "waitForStorageClass", pod.Name, *why)
			return waits, ctrl.Result{RequeueAfter: 10 * time.Second}, err
		}
	}
	changed, err := r.setStatus(ctx, m, pod.Name, ready)
	return kit.Step{Name: podStateMirrored, Changed: changed, Facts: []any{"readyReason", ready.Reason}}, ctrl.Result{}, err
}

// mustHaveData: the member's Pod must refuse an empty data directory (specs.RequireData).
// Unknown (etcd could not be asked) counts as joined, as a voter restarted empty must never
// rejoin under its ID, but for a learner that never ran: refusing it an empty directory would
// keep it from ever joining, and it has nothing to lose.
func mustHaveData(m *etcdv1.EtcdMember, joined bool, askErr error) bool {
	return joined || m.Status.Joined || (askErr != nil && !neverRan(m))
}

// neverRan: a learner that never had a Pod, and that etcd never listed as started
// (status.joined, which the cluster controller writes as soon as etcd lists it started, and
// in any case before it asks etcd to promote it). etcd never ran for it, so it holds no data,
// and it cannot have been promoted (etcd promotes only a learner that started and caught up).
// Started with its peers named, it fetches the membership from them and joins as the learner
// it is; named alone, as RequireData has it, it could never start. (etcd is asked whether it
// joined, but right after a quorum-loss recovery restarts the survivor, or while the cluster
// counts as silent, it may not answer for a moment.) status.podName alone does not say it:
// a learner that ran and published, whose Pod was deleted with its data, may have no Pod in
// its status while etcd already counts it as a voter (promoted, and the promotion not yet in
// status.role); started on empty data with its peers named it would rejoin under that ID.
func neverRan(m *etcdv1.EtcdMember) bool {
	return m.Status.PodName == "" && m.Status.Role == etcdv1.RoleLearner && !m.Status.Joined
}

// volumeProblem explains a member whose PVC cannot be bound because its StorageClass does not
// exist, which the Pod itself only shows as "unschedulable".
func (r *Reconciler) volumeProblem(ctx context.Context, m *etcdv1.EtcdMember) (*metav1.Condition, error) {
	pvc := &corev1.PersistentVolumeClaim{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: m.Namespace, Name: specs.PVCName(m)}, pvc); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	if pvc.Status.Phase != corev1.ClaimPending {
		return nil, nil
	}
	if pvc.Spec.StorageClassName == nil || *pvc.Spec.StorageClassName == "" {
		return nil, nil // the default class, or none: the PVC's own events say which
	}
	name := *pvc.Spec.StorageClassName
	err := r.Get(ctx, types.NamespacedName{Name: name}, &storagev1.StorageClass{})
	if !apierrors.IsNotFound(err) {
		return nil, err
	}
	cond := readyCondition(metav1.ConditionFalse, etcdv1.ReasonStorageClassNotFound, fmt.Sprintf(
		"PVC %s is pending: StorageClass %q does not exist; create it (spec.storage.storageClassName cannot change)", pvc.Name, name))
	return &cond, nil
}

// createPod starts the member. A member that has joined starts so that it refuses an empty
// data directory (specs.RequireData). A tmpfs member that has joined lost its data with its
// Pod: it gets no new Pod; the cluster controller replaces it under a new ID.
func (r *Reconciler) createPod(ctx context.Context, c *etcdv1.EtcdCluster, m *etcdv1.EtcdMember) (kit.Step, ctrl.Result, error) {
	tmpfs := m.Spec.Storage.Medium == etcdv1.StorageMediumMemory
	joined, err := r.joined(ctx, c, m)
	if err != nil && tmpfs {
		// Ask etcd again before starting it empty.
		unknown := kit.Waiting{Reason: etcdv1.ReasonUnreachable, Message: fmt.Sprintf("etcd cannot say whether tmpfs member %s joined, so it is not started empty yet: %v", m.Name, err)}
		return kit.Step{Name: "waitForEtcd", Why: unknown}, ctrl.Result{RequeueAfter: 2 * time.Second}, nil
	}
	if joined && tmpfs {
		lost, err := r.waiting(ctx, m, "dataLost", "", dataLostCondition("its tmpfs data went with its Pod"))
		return lost, ctrl.Result{}, err
	}
	if specs.Restores(c, m) && specs.RestoreSource(c, m) == nil {
		// Only a member whose snapshotRef was never resolved into it (the cluster controller
		// always does so when it creates one): without its source it would start empty.
		unresolved, err := r.waiting(ctx, m, "restoreUnresolved", "", readyCondition(metav1.ConditionFalse, etcdv1.ReasonRestoreFailed,
			"spec.bootstrap.restore of the cluster names a snapshotRef that was not resolved into this member: delete the member, the cluster controller creates it again with its snapshot"))
		return unresolved, ctrl.Result{}, err
	}
	pod := specs.Pod(c, m, r.PodOptions)
	requireData := mustHaveData(m, joined, err)
	if requireData {
		specs.RequireData(pod, c, m)
	}
	forceNew := m.Annotations[etcdv1.AnnotationForceNewCluster] == "true"
	if forceNew {
		specs.ForceNewCluster(pod) // a quorum-loss recovery from this member's data
	}
	if labels, _ := specs.RoleLabels(pod.Labels, m.Status.Role); !r.roleLabelWaits(ctx, c, labels) {
		pod.Labels = labels
	} // else created without it: syncRoleLabel adds it once the budget selects it
	created := kit.Step{Name: "createPod", Facts: []any{"pod", pod.Name, "requireData", requireData, "forceNewCluster", forceNew}}
	if err := controllerutil.SetControllerReference(m, pod, r.Scheme()); err != nil {
		return created, ctrl.Result{}, err
	}
	if err := r.Create(ctx, pod); err != nil && !apierrors.IsAlreadyExists(err) {
		if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
			// The namespace is going, and the member with it.
			return kit.Step{Name: "namespaceTerminating", Facts: []any{"pod", pod.Name}}, ctrl.Result{}, nil
		}
		return created, ctrl.Result{}, kit.RefusedByAPI(err, "Pod", pod.Name)
	}
	r.event(ctx, m, corev1.EventTypeNormal, etcdv1.ReasonPodCreated, "CreatePod", "created Pod %s", pod.Name)
	created.Changed = true
	_, err = r.setStatus(ctx, m, pod.Name, readyCondition(metav1.ConditionFalse, etcdv1.ReasonPodStarting, "the Pod was created"))
	return created, ctrl.Result{}, err
}

func dataLostCondition(why string) metav1.Condition {
	return readyCondition(metav1.ConditionFalse, etcdv1.ReasonDataLost,
		why+": the member is not started again under its ID; the operator replaces it when the quorum holds without it")
}

// roleLabelRetry is how soon a Pod whose role label waits for the cluster's budget is looked
// at again: the cluster controller widens the budget at its next reconcile.
const roleLabelRetry = 2 * time.Second

// syncRoleLabel keeps the Pod's role label as the member's role asks (specs.RoleLabels): the
// PDB counts voters. A Pod still labelled with an old value is relabelled in place (a label
// is no input of the Pod's template hash: nothing restarts). It waits while the cluster's
// budget would not select the Pod with its new label (specs.RoleLabelWaits). changed: it
// relabelled the Pod; wait: it did not, and looks again soon.
func (r *Reconciler) syncRoleLabel(ctx context.Context, c *etcdv1.EtcdCluster, pod *corev1.Pod, m *etcdv1.EtcdMember) (changed, wait bool, err error) {
	labels, differ := specs.RoleLabels(pod.Labels, m.Status.Role)
	if !differ {
		return false, false, nil
	}
	if r.roleLabelWaits(ctx, c, labels) {
		return false, true, nil
	}
	patch := client.MergeFrom(pod.DeepCopy())
	pod.Labels = labels
	err = r.Patch(ctx, pod, patch)
	return err == nil, false, err
}

// roleLabelWaits reads the cluster's PodDisruptionBudget for specs.RoleLabelWaits: one the
// cluster does not control, or none, holds nothing back. A read that fails holds back.
func (r *Reconciler) roleLabelWaits(ctx context.Context, c *etcdv1.EtcdCluster, podLabels map[string]string) bool {
	pdb := &policyv1.PodDisruptionBudget{}
	err := r.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: specs.PDBName(c.Name)}, pdb)
	switch {
	case apierrors.IsNotFound(err):
		return false
	case err != nil:
		return podLabels[etcdv1.LabelRole] == etcdv1.RoleLabelVoter
	case !metav1.IsControlledBy(pdb, c):
		return false
	}
	return specs.RoleLabelWaits(pdb, podLabels)
}

// imagePullReasons are the kubelet's reasons for an image it cannot get.
var imagePullReasons = map[string]bool{"ErrImagePull": true, "ImagePullBackOff": true, "InvalidImageName": true, "ErrImageNeverPull": true}

// podReadiness says why a member is not ready, in the words a person acts on.
func podReadiness(pod *corev1.Pod) metav1.Condition {
	for _, cs := range pod.Status.ContainerStatuses {
		w := cs.State.Waiting
		switch {
		case w == nil || w.Reason == "" || w.Reason == "ContainerCreating":
		case imagePullReasons[w.Reason]:
			return readyCondition(metav1.ConditionFalse, etcdv1.ReasonImagePullFailed, fmt.Sprintf(
				"image %s cannot be pulled (%s: %s): check spec.version, the operator's --etcd-image-repository and spec.imagePullSecrets",
				cs.Image, w.Reason, w.Message))
		case w.Reason == "CrashLoopBackOff" && cs.LastTerminationState.Terminated != nil:
			// Why it exits matters more than that it backs off: an OOM kill or a bad flag is
			// for a person; a data error gets the member replaced.
			return readyCondition(metav1.ConditionFalse, w.Reason, w.Message+"; last exit: "+exitSummary(cs.LastTerminationState.Terminated))
		default:
			return readyCondition(metav1.ConditionFalse, w.Reason, w.Message)
		}
	}
	for _, cond := range pod.Status.Conditions {
		if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse {
			return readyCondition(metav1.ConditionFalse, etcdv1.ReasonUnschedulable, cond.Message)
		}
		if cond.Type == corev1.PodReady {
			if cond.Status == corev1.ConditionTrue {
				return readyCondition(metav1.ConditionTrue, etcdv1.ReasonPodReady, "etcd answers its readiness check")
			}
		}
	}
	if pod.Status.Phase == corev1.PodPending {
		return readyCondition(metav1.ConditionFalse, etcdv1.ReasonPodPending, fmt.Sprintf("Pod %s is pending", pod.Name))
	}
	return readyCondition(metav1.ConditionFalse, etcdv1.ReasonPodNotReady, "etcd does not answer its readiness check yet")
}

// exitSummary says how a container ended: its reason and code, and, from the tail of its
// log, what etcd said last (the "msg" and "error" of its JSON line, without the timestamp,
// so that the same crash repeated does not rewrite the status).
func exitSummary(t *corev1.ContainerStateTerminated) string {
	out := fmt.Sprintf("%s, code %d", t.Reason, t.ExitCode)
	lines := strings.Split(strings.TrimSpace(t.Message), "\n")
	last := lines[len(lines)-1]
	var line struct{ Msg, Error string }
	switch {
	case last == "":
	case json.Unmarshal([]byte(last), &line) == nil && line.Msg != "":
		out += ": " + line.Msg
		if line.Error != "" {
			out += ": " + line.Error
		}
	default:
		if len(last) > 200 {
			last = last[:200]
		}
		out += ": " + last
	}
	return out
}
