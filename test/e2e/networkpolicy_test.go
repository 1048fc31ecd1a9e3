package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// The local cluster enforces NetworkPolicy ingress between Pods (test/localcluster/netpolicy),
// so a cluster's spec.networkPolicy is seen at work: its members form and serve (peer traffic
// between members, the operator's Pod reaching every member), a Pod its clientSelector
// chooses reaches the client port while a Pod of the same namespace that no rule selects
// cannot open a connection to it, and a snapshot of the cluster completes (its agent's Pod is
// admitted by its snapshot-of label).
func TestNetworkPolicyAdmitsOnlyWhomItNames(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	create(t, &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "guarded", Namespace: ns}, Spec: etcdv1.EtcdClusterSpec{
		Replicas: ptr(int32(3)), Version: etcdVersion,
		NetworkPolicy: &etcdv1.NetworkPolicySpec{Enabled: true,
			ClientSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "etcd-client"}}}}})
	waitSettled(t, ns, "guarded", 3, 5*time.Minute)
	policy := &networkingv1.NetworkPolicy{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: specs.NetworkPolicyName("guarded")}, policy); err != nil {
		t.Fatalf("the cluster's NetworkPolicy: %v", err)
	}
	var member string
	for _, ip := range memberIPs(t, ns, "guarded") {
		member = ip
	}

	// The admitted probe may start before the policy's table knows its address: it retries.
	startProbe(t, ns, "admitted", member, map[string]string{"role": "etcd-client"}, corev1.RestartPolicyOnFailure)
	startProbe(t, ns, "refused", member, map[string]string{"role": "something-else"}, corev1.RestartPolicyNever)
	waitProbe(t, ns, "admitted", corev1.PodSucceeded) // etcdctl exits 0 only on a healthy endpoint
	if msg := waitProbe(t, ns, "refused", corev1.PodFailed); !strings.Contains(msg, "unhealthy") {
		t.Fatalf("refused probe failed otherwise than unhealthy: %q", msg)
	}

	create(t, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "backups", Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}})
	createSnapshot(t, ns, "snap", "guarded", etcdv1.SnapshotLocation{PVC: &etcdv1.PVCSnapshotLocation{ClaimName: "backups"}})
	waitSnapshotDone(t, ns, "snap", etcdv1.SnapshotComplete)
}

// startProbe runs etcdctl endpoint health against one member's client port in a Pod of its
// own with the given labels: whether the Pod succeeds says whether it could connect. The
// dial timeout leaves room for TCP's SYN retransmissions.
func startProbe(t *testing.T, ns, name, memberIP string, labels map[string]string, restart corev1.RestartPolicy) {
	t.Helper()
	create(t, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels}, Spec: corev1.PodSpec{
		RestartPolicy: restart,
		Containers: []corev1.Container{{Name: "etcdctl", Image: "quay.io/coreos/etcd:v" + etcdVersion,
			Command: []string{"/usr/local/bin/etcdctl", "--endpoints=http://" + memberIP + ":2379",
				"--dial-timeout=10s", "--command-timeout=15s", "endpoint", "health"},
			TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError}}}})
}

// waitProbe waits until the probe Pod ends in phase (the other end fails the test at once) and
// returns its container's last termination message.
func waitProbe(t *testing.T, ns, name string, phase corev1.PodPhase) string {
	t.Helper()
	var msg string
	eventually(t, 3*time.Minute, fmt.Sprintf("probe Pod %s %s", name, phase), func() error {
		pod := &corev1.Pod{}
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, pod); err != nil {
			return err
		}
		for _, s := range pod.Status.ContainerStatuses {
			if s.State.Terminated != nil {
				msg = s.State.Terminated.Message
			}
		}
		switch pod.Status.Phase {
		case phase:
			return nil
		case corev1.PodSucceeded, corev1.PodFailed:
			t.Fatalf("probe Pod %s ended %s, want %s: %q", name, pod.Status.Phase, phase, msg)
		}
		return fmt.Errorf("phase %s", pod.Status.Phase)
	})
	return msg
}
