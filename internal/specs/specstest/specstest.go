// Package specstest helps the unit tests of specs and of the reconcilers build member Pods as
// earlier operator releases built them, which running clusters still have.
package specstest

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

// BuiltByAnEarlierRelease is pod, built by specs.Pod, as releases before
// AnnotationInitialCluster built it: the initial cluster in an --initial-cluster flag before
// --initial-cluster-state, no ETCD_INITIAL_CLUSTER variable, no annotation.
func BuiltByAnEarlierRelease(pod *corev1.Pod) *corev1.Pod {
	old := pod.DeepCopy()
	ctr := &old.Spec.Containers[0]
	at := slices.IndexFunc(ctr.Args, func(a string) bool { return strings.HasPrefix(a, "--initial-cluster-state=") })
	ctr.Args = slices.Insert(ctr.Args, at, "--initial-cluster="+old.Annotations[etcdv1.AnnotationInitialCluster])
	ctr.Env = nil
	delete(old.Annotations, etcdv1.AnnotationInitialCluster)
	return old
}
