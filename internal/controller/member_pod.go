package controller

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

func equalStatus(a, b *etcdv1.EtcdMember) bool {
	return equality.Semantic.DeepEqual(a.Status, b.Status)
}

// ensurePVC creates the member's PVC, or takes back one kept from an EtcdMember deleted by
// hand, and records the member's etcd identity on it.
func (r *MemberReconciler) ensurePVC(ctx context.Context, c *etcdv1.EtcdCluster, m *etcdv1.EtcdMember) error {
	have := &corev1.PersistentVolumeClaim{}
	err := r.Get(ctx, types.NamespacedName{Namespace: m.Namespace, Name: m.Name}, have)
	if apierrors.IsNotFound(err) {
		want := specs.PVC(c, m)
		if err := controllerutil.SetControllerReference(m, want, r.Scheme()); err != nil {
			return err
		}
		if err := r.Create(ctx, want); err != nil && !apierrors.IsAlreadyExists(err) {
			return refusedByAPI(err, "PersistentVolumeClaim", want.Name)
		}
		r.event(m, corev1.EventTypeNormal, "PVCCreated", "CreatePVC", "created PVC %s", want.Name)
		return nil
	}
	if err != nil {
		return err
	}
	if !pvcOfMember(have, c, m) {
		return notOurs(have, m, "PersistentVolumeClaim", "EtcdMember")
	}
	patch := client.MergeFrom(have.DeepCopy())
	changed := false
	if !metav1.IsControlledBy(have, m) {
		have.OwnerReferences = nil
		if err := controllerutil.SetControllerReference(m, have, r.Scheme()); err != nil {
			return err
		}
		changed = true
	}
	// The cluster ID is known only after the member ID for a member added by scale-out; it
	// is recorded when it appears, so that kept PVCs tell which etcd cluster they belong to.
	if m.Status.MemberID != "" && (have.Annotations[specs.AnnotationMemberID] != m.Status.MemberID ||
		(m.Status.ClusterID != "" && have.Annotations[specs.AnnotationClusterID] != m.Status.ClusterID)) {
		if have.Annotations == nil {
			have.Annotations = map[string]string{}
		}
		have.Annotations[specs.AnnotationMemberID] = m.Status.MemberID
		have.Annotations[specs.AnnotationClusterID] = m.Status.ClusterID
		changed = true
	}
	if !changed {
		return nil
	}
	return r.Patch(ctx, have, patch)
}

// pvcOfMember says whether an existing PVC holds this member's data, and may be taken over:
// it is controlled by this member or an earlier EtcdMember of the same name (deleted by
// hand), by the cluster (the member finalizer's rescue), or by nothing while its labels name
// this cluster and member (kept when an EtcdCluster of this name was deleted with
// whenDeleted Retain). Anything else is someone else's and is never taken.
func pvcOfMember(pvc *corev1.PersistentVolumeClaim, c *etcdv1.EtcdCluster, m *etcdv1.EtcdMember) bool {
	ref := metav1.GetControllerOf(pvc)
	switch {
	case ref == nil:
		return pvc.Labels[specs.LabelCluster] == c.Name && pvc.Labels[specs.LabelMember] == m.Name &&
			pvc.Labels[specs.LabelManagedBy] == specs.ManagerName
	case ref.Kind == "EtcdMember":
		return ref.Name == m.Name
	case ref.Kind == "EtcdCluster":
		return ref.UID == c.UID
	}
	return false
}

// ensurePod runs the member's Pod unless the member is paused or not yet added to etcd, and
// mirrors the Pod's state into the member's status.
func (r *MemberReconciler) ensurePod(ctx context.Context, c *etcdv1.EtcdCluster, m *etcdv1.EtcdMember) (ctrl.Result, error) {
	pod := &corev1.Pod{}
	err := r.Get(ctx, types.NamespacedName{Namespace: m.Namespace, Name: m.Name}, pod)
	if err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, err
	}
	exists := err == nil
	switch {
	case m.Spec.Dormant:
		if exists && pod.DeletionTimestamp.IsZero() {
			if err := r.Delete(ctx, pod); client.IgnoreNotFound(err) != nil {
				return ctrl.Result{}, err
			}
		}
		return ctrl.Result{}, r.setStatus(ctx, m, "", readyCondition(metav1.ConditionFalse, "Paused", "the cluster is paused; data and identity are kept"))
	case m.Spec.Bootstrap.InitialClusterState == etcdv1.InitialClusterStateExisting && m.Status.MemberID == "":
		return ctrl.Result{}, r.setStatus(ctx, m, "", readyCondition(metav1.ConditionFalse, "WaitingForMemberAdd", "waiting to be added to etcd as a learner"))
	case !exists:
		return r.createPod(ctx, c, m)
	case !pod.DeletionTimestamp.IsZero():
		return ctrl.Result{RequeueAfter: time.Second}, nil
	case !podOfMember(pod, m):
		return ctrl.Result{}, notOurs(pod, m, "Pod", "EtcdMember")
	}
	if err := r.syncRoleLabel(ctx, pod, m); err != nil {
		return ctrl.Result{}, err
	}
	return r.mirrorPodState(ctx, m, pod)
}

// podOfMember: the Pod is this member's, or an earlier EtcdMember's of the same name that
// garbage collection is about to delete.
func podOfMember(pod *corev1.Pod, m *etcdv1.EtcdMember) bool {
	ref := metav1.GetControllerOf(pod)
	return ref != nil && ref.Kind == "EtcdMember" && ref.Name == m.Name
}

// mirrorPodState puts the Pod's readiness, or why it cannot start, into the member's status.
func (r *MemberReconciler) mirrorPodState(ctx context.Context, m *etcdv1.EtcdMember, pod *corev1.Pod) (ctrl.Result, error) {
	ready := podReadiness(pod)
	if ready.Status != metav1.ConditionTrue && m.Spec.Storage.Medium != etcdv1.StorageMediumMemory {
		why, err := r.volumeProblem(ctx, m)
		if err != nil {
			return ctrl.Result{}, err
		}
		if why != nil {
			// Nothing the operator watches changes when the StorageClass appears.
			return ctrl.Result{RequeueAfter: 10 * time.Second}, r.setStatus(ctx, m, pod.Name, *why)
		}
	}
	return ctrl.Result{}, r.setStatus(ctx, m, pod.Name, ready)
}

// volumeProblem explains a member whose PVC cannot be bound because its StorageClass does not
// exist, which the Pod itself only shows as "unschedulable".
func (r *MemberReconciler) volumeProblem(ctx context.Context, m *etcdv1.EtcdMember) (*metav1.Condition, error) {
	pvc := &corev1.PersistentVolumeClaim{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: m.Namespace, Name: m.Name}, pvc); err != nil {
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
	cond := readyCondition(metav1.ConditionFalse, "StorageClassNotFound", fmt.Sprintf(
		"PVC %s is pending: StorageClass %q does not exist; create it (spec.storage.storageClassName cannot change)", pvc.Name, name))
	return &cond, nil
}

// createPod starts the member. A tmpfs member whose Pod is gone after it had served lost its
// data: it is replaced (removed from etcd and created anew) rather than restarted empty.
func (r *MemberReconciler) createPod(ctx context.Context, c *etcdv1.EtcdCluster, m *etcdv1.EtcdMember) (ctrl.Result, error) {
	if m.Spec.Storage.Medium == etcdv1.StorageMediumMemory && meta.IsStatusConditionTrue(m.Status.Conditions, etcdv1.MemberConditionJoined) {
		return ctrl.Result{}, r.replace(ctx, m, "its tmpfs data went with its Pod")
	}
	pod := specs.Pod(c, m, r.PodOptions)
	pod.Labels[specs.LabelRole] = string(m.Status.Role)
	if err := controllerutil.SetControllerReference(m, pod, r.Scheme()); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.Create(ctx, pod); err != nil && !apierrors.IsAlreadyExists(err) {
		if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
			return ctrl.Result{}, nil // the namespace is going, and the member with it
		}
		return ctrl.Result{}, refusedByAPI(err, "Pod", pod.Name)
	}
	r.event(m, corev1.EventTypeNormal, "PodCreated", "CreatePod", "created Pod %s", pod.Name)
	return ctrl.Result{}, r.setStatus(ctx, m, pod.Name, readyCondition(metav1.ConditionFalse, "PodStarting", "the Pod was created"))
}

// replace marks the member for removal and deletes it; the cluster controller adds a new one.
func (r *MemberReconciler) replace(ctx context.Context, m *etcdv1.EtcdMember, why string) error {
	patch := client.MergeFrom(m.DeepCopy())
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	m.Annotations[AnnotationRemove] = "true"
	if err := r.Patch(ctx, m, patch); err != nil {
		return err
	}
	r.event(m, corev1.EventTypeWarning, "MemberReplaced", "ReplaceMember", "replacing member %s: %s", m.Name, why)
	return client.IgnoreNotFound(r.Delete(ctx, m))
}

// syncRoleLabel keeps the Pod's role label equal to the member's role: the PDB counts voters.
func (r *MemberReconciler) syncRoleLabel(ctx context.Context, pod *corev1.Pod, m *etcdv1.EtcdMember) error {
	if m.Status.Role == "" || pod.Labels[specs.LabelRole] == string(m.Status.Role) {
		return nil
	}
	patch := client.MergeFrom(pod.DeepCopy())
	pod.Labels[specs.LabelRole] = string(m.Status.Role)
	return r.Patch(ctx, pod, patch)
}

// ReasonImagePullFailed is a member's Ready reason while its etcd image cannot be pulled.
const ReasonImagePullFailed = "ImagePullFailed"

// imagePullReasons are the kubelet's reasons for an image it cannot get.
var imagePullReasons = map[string]bool{"ErrImagePull": true, "ImagePullBackOff": true, "InvalidImageName": true, "ErrImageNeverPull": true}

// podReadiness says why a member is not ready, in the words a person acts on.
func podReadiness(pod *corev1.Pod) metav1.Condition {
	for _, cs := range pod.Status.ContainerStatuses {
		w := cs.State.Waiting
		switch {
		case w == nil || w.Reason == "" || w.Reason == "ContainerCreating":
		case imagePullReasons[w.Reason]:
			return readyCondition(metav1.ConditionFalse, ReasonImagePullFailed, fmt.Sprintf(
				"image %s cannot be pulled (%s: %s): check spec.version, the operator's --etcd-image-repository and spec.imagePullSecrets",
				cs.Image, w.Reason, w.Message))
		default:
			return readyCondition(metav1.ConditionFalse, w.Reason, w.Message)
		}
	}
	for _, cond := range pod.Status.Conditions {
		if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse {
			return readyCondition(metav1.ConditionFalse, "Unschedulable", cond.Message)
		}
		if cond.Type == corev1.PodReady {
			if cond.Status == corev1.ConditionTrue {
				return readyCondition(metav1.ConditionTrue, "PodReady", "etcd answers its readiness check")
			}
		}
	}
	if pod.Status.Phase == corev1.PodPending {
		return readyCondition(metav1.ConditionFalse, "PodPending", fmt.Sprintf("Pod %s is pending", pod.Name))
	}
	return readyCondition(metav1.ConditionFalse, "PodNotReady", "etcd does not answer its readiness check yet")
}
