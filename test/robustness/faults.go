package robustness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

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

// The local cluster's supervisor acts on a node agent when sent SIGUSR2 (test/cmd/localcluster:
// SignalRestartNode), for the request written in node-restart-request of its state
// directory; it says it takes the signal in node-restart-signal, and which requests it knows
// beyond the crash in node-faults (a supervisor of an older build would log an error and do
// nothing).
const localClusterDir = "/var/lib/etcd-operator-localcluster"

func localClusterFile(name string) string {
	dir := os.Getenv("LOCALCLUSTER_DIR")
	if dir == "" {
		dir = localClusterDir
	}
	return filepath.Join(dir, name)
}

// CrashNode crashes the node's agent, as the loss of its machine would: every container of
// every Pod on it killed at once, the Pod objects left as they were; the agent starts again
// after seconds, and with it the Pods, as after a reboot.
func CrashNode(node string, seconds int) error {
	if _, err := os.Stat(localClusterFile("node-restart-signal")); err != nil {
		return fmt.Errorf("the local cluster's supervisor cannot crash a node agent (%w): it was started by an older build; stop it with make local-down", err)
	}
	return askNode(fmt.Sprintf("%s %d", node, seconds))
}

// ShutDownNode shuts the node down gracefully, as a kubelet's graceful node shutdown does:
// the Node NotReady, every Pod on it stopped within its grace period and left Failed
// (reason Terminated); the agent starts again after seconds and starts none of those Pods.
func ShutDownNode(node string, seconds int) error {
	if err := supervisorKnows("shutdown"); err != nil {
		return err
	}
	return askNode(fmt.Sprintf("%s %d shutdown", node, seconds))
}

// EvictUnderPressure has the Pod's node evict it as a kubelet's eviction manager does when
// the node runs short of memory: its containers stopped within their grace period, the Pod
// left Failed (reason Evicted) and never started again.
func EvictUnderPressure(pod *corev1.Pod) error {
	if err := supervisorKnows("evict"); err != nil {
		return err
	}
	return askNode(fmt.Sprintf("%s evict %s/%s", pod.Spec.NodeName, pod.Namespace, pod.Name))
}

// RemoveNode removes the node for good, as a cloud deleting its VM does: every container of
// every Pod on it killed at once, its disks gone (the data of every local volume pinned to
// it), and the Node object deleted. The PersistentVolumes stay; kube-controller-manager's
// Pod garbage collector deletes the Pods bound to the Node. The node stays away until
// AddNode.
func RemoveNode(node string) error {
	if err := supervisorKnows("remove"); err != nil {
		return err
	}
	return askNode(node + " remove")
}

// AddNode has a new, empty machine join under the name of a node RemoveNode removed.
func AddNode(node string) error {
	if err := supervisorKnows("add"); err != nil {
		return err
	}
	return askNode(node + " add")
}

func supervisorKnows(fault string) error {
	known, err := os.ReadFile(localClusterFile("node-faults"))
	if err == nil && !slices.Contains(strings.Fields(string(known)), fault) {
		err = fmt.Errorf("it knows %q", strings.Fields(string(known)))
	}
	if err != nil {
		return fmt.Errorf("the local cluster's supervisor cannot %s (%w): it was started by an older build; stop it with make local-down", fault, err)
	}
	return nil
}

func askNode(request string) error {
	if err := os.WriteFile(localClusterFile("node-restart-request"), []byte(request+"\n"), 0o644); err != nil {
		return err
	}
	return SignalSupervisor(syscall.SIGUSR2)
}

// SignalSupervisor sends sig to the local cluster's supervisor.
func SignalSupervisor(sig syscall.Signal) error {
	path := localClusterFile("supervisor.pid")
	raw, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("the local cluster's supervisor: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return syscall.Kill(pid, sig)
}
