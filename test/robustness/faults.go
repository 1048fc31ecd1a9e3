package robustness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Faults on the local cluster, shared by the end-to-end tests and the robustness scenarios.

// OperatorNamespace is where config/default deploys the operator.
const OperatorNamespace = "etcd-operator-system"

// KillOperator deletes the operator's Pods at once (no grace), as a crash would; it returns
// how many it deleted.
func KillOperator(ctx context.Context, k8s client.Client) (int, error) {
	pods := &corev1.PodList{}
	if err := k8s.List(ctx, pods, client.InNamespace(OperatorNamespace), client.MatchingLabels{"app.kubernetes.io/name": "etcd-operator"}); err != nil {
		return 0, err
	}
	if len(pods.Items) == 0 {
		return 0, fmt.Errorf("no operator Pod in %s to kill", OperatorNamespace)
	}
	for i := range pods.Items {
		if err := k8s.Delete(ctx, &pods.Items[i], client.GracePeriodSeconds(0)); client.IgnoreNotFound(err) != nil {
			return i, err
		}
	}
	return len(pods.Items), nil
}

// Evict asks the eviction API to evict the Pod, as kubectl drain does: a PodDisruptionBudget
// that forbids it answers 429 (apierrors.IsTooManyRequests).
func Evict(ctx context.Context, k8s client.Client, pod *corev1.Pod) error {
	ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace}}
	return k8s.SubResource("eviction").Create(ctx, pod, ev)
}

// EmptyVolume removes everything in the PVC's volume: a local directory of this machine on
// the local cluster, whose provisioner makes local PersistentVolumes.
func EmptyVolume(ctx context.Context, k8s client.Reader, pvc *corev1.PersistentVolumeClaim) error {
	pv := &corev1.PersistentVolume{}
	if err := k8s.Get(ctx, client.ObjectKey{Name: pvc.Spec.VolumeName}, pv); err != nil {
		return err
	}
	if pv.Spec.Local == nil {
		return fmt.Errorf("volume %s of %s is no local directory: this needs the local cluster's provisioner", pv.Name, pvc.Name)
	}
	entries, err := os.ReadDir(pv.Spec.Local.Path)
	if err != nil {
		return err
	}
	for _, entry := range entries {
		if err := os.RemoveAll(filepath.Join(pv.Spec.Local.Path, entry.Name())); err != nil {
			return err
		}
	}
	return nil
}
