package member

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// stampAdoptedPod records on an adopted member's original Pod the template hash of the Pod
// this operator builds for the spec as it is now, so that a later change of the spec restarts
// it with this operator's Pod, one member at a time like any other change. Only metadata
// changes: the Pod is not restarted. True when it stamped the Pod.
func (r *Reconciler) stampAdoptedPod(ctx context.Context, c *etcdv1.EtcdCluster, m *etcdv1.EtcdMember, pod *corev1.Pod) (bool, error) {
	if !specs.AdoptedPodIsCurrent(m, pod) {
		return false, nil
	}
	patch := client.MergeFrom(pod.DeepCopy())
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[etcdv1.AnnotationPodTemplateHash] = specs.Pod(c, m, r.PodOptions).Annotations[etcdv1.AnnotationPodTemplateHash]
	if err := r.Patch(ctx, pod, patch); err != nil {
		return false, fmt.Errorf("recording the template hash on adopted Pod %s: %w", pod.Name, err)
	}
	r.event(ctx, m, corev1.EventTypeNormal, etcdv1.ReasonPodAdopted, "AdoptPod", "took over Pod %s as it runs; a later change of the cluster's spec restarts it with this operator's Pod", pod.Name)
	return true, nil
}
