// Package simnode is a simulated node: a Node in the API whose Pods run no process, so that
// one etcd operator can be measured against thousands of EtcdClusters. A member Pod bound to
// the node "runs" etcd by starting its member in an etcdsim.Sim, which answers etcd's client
// API for every member at the node's one address.
//
// What it does as a kubelet would:
//
//   - registers the Node (labels, a taint, capacity, Ready and the pressure conditions, its
//     InternalIP) and keeps its Lease in kube-node-lease renewed, so that kube-controller-
//     manager's node lifecycle controller neither taints it nor evicts its Pods;
//   - starts a Pod bound to it once: init containers are reported completed at once, the etcd
//     container (specs.ContainerName) starts the member in the Sim with the flags of its args
//     and the initial cluster read from the Pod at that start (specs.InitialClusterOf, as the
//     downward API would), and the Pod is reported Running and Ready with the node's address
//     as its IP;
//   - when that start fails (etcd would exit: a joining member never added, a cluster that
//     exists already), reports the etcd container in CrashLoopBackOff with the exit (code 1,
//     reason Error, the message) as its last termination, and retries with the kubelet's
//     back-off, 10 s doubling to 5 min;
//   - a Pod marked for deletion has its member stopped and is then deleted with grace 0 and
//     its UID as precondition, as a kubelet's status manager does once nothing of it runs; a
//     Pod deleted outright has its member stopped if it ran;
//   - a Pod already Succeeded or Failed is never started.
//
// What it leaves out: volumes (no PVC is ever bound or mounted, so clusters on sim nodes
// must use spec.storage.medium Memory), probes (the member is Ready as soon as it starts,
// even before its cluster has a leader), exec, logs, port-forward and the kubelet API (the
// Node names no kubelet port), resource accounting, eviction, and images. Containers other
// than etcd are reported running and ready and do nothing, so a Job's Pod never finishes:
// do not let snapshot Jobs land on sim nodes. Every Pod reports the same IP, the address the
// Sim listens on: the Sim tells members apart by the :authority the client dialled. The node
// never forgets a cluster: a member whose Pod is deleted keeps its place in the Sim, as if
// its data survived, and whoever deletes an EtcdCluster calls Sim.DeleteCluster, so that a
// new one of the same name starts afresh.
//
// API calls go through the client the caller gives, with its rate limits: at 5,000 Pods the
// node writes one status per Pod start, so give it a client with a generous QPS.
package simnode

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/quorumkeeper/etcd-operator/test/etcdsim"
)

// Label marks a sim node (value "true"); it is also the key of the node's NoSchedule taint,
// so that only Pods meant for it land there (see Placement).
const Label = "etcd-operator.test/simulated"

// What a kubelet uses for its Lease: kube-node-lease, 40 s, renewed every 10 s.
const (
	leaseNamespace       = corev1.NamespaceNodeLease
	leaseDurationSeconds = 40
	defaultLeaseRenew    = 10 * time.Second
)

// The kubelet's container restart back-off.
const (
	defaultBackoffBase = 10 * time.Second
	defaultBackoffMax  = 5 * time.Minute
)

// workers is how many Pods are synced at once: each sync is a few map look-ups and at most
// one API write, so a few workers keep up with thousands of Pods.
const workers = 4

// Config is one sim node.
type Config struct {
	Name   string // the Node's name, e.g. "sim-0"
	PodIP  string // the address every Pod on this node reports: where the Sim listens
	Sim    *etcdsim.Sim
	Client kubernetes.Interface

	// Tests shorten these; zero means the kubelet's.
	leaseRenew              time.Duration
	backoffBase, backoffMax time.Duration
}

func (c Config) withDefaults() Config {
	c.leaseRenew = cmp.Or(c.leaseRenew, defaultLeaseRenew)
	c.backoffBase = cmp.Or(c.backoffBase, defaultBackoffBase)
	c.backoffMax = cmp.Or(c.backoffMax, defaultBackoffMax)
	return c
}

// Placement is what an EtcdCluster's spec.nodeSelector and spec.tolerations need for its
// members to land on sim nodes, and on nothing else.
func Placement() (nodeSelector map[string]string, tolerations []corev1.Toleration) {
	return map[string]string{Label: "true"}, []corev1.Toleration{{
		Key: Label, Operator: corev1.TolerationOpEqual, Value: "true", Effect: corev1.TaintEffectNoSchedule,
	}}
}

// Node is a running sim node.
type Node struct {
	cfg    Config
	pods   *podRunner
	cancel context.CancelFunc
	done   sync.WaitGroup
}

// Start registers the Node, keeps its Lease renewed and runs the Pods bound to it until ctx
// ends or Stop is called; it returns once it has seen every Pod bound to the node.
func Start(ctx context.Context, cfg Config) (*Node, error) {
	if cfg.Name == "" || cfg.PodIP == "" || cfg.Sim == nil || cfg.Client == nil {
		return nil, errors.New("simnode: a node needs a name, a Pod IP, a Sim and a client")
	}
	cfg = cfg.withDefaults()
	node, err := register(ctx, cfg)
	if err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	n := &Node{cfg: cfg, cancel: cancel, pods: newPodRunner(cfg)}
	lease, err := n.renew(ctx, node, nil)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("simnode: lease of node %s: %w", cfg.Name, err)
	}
	n.done.Go(func() { n.keepLease(runCtx, node, lease) })
	if err := n.pods.start(runCtx, &n.done); err != nil {
		cancel()
		n.done.Wait()
		return nil, err
	}
	return n, nil
}

// Stop ends the node as a machine that is switched off: its loops stop, every member it runs
// stops answering, and its Node and Lease are deleted. The Pods stay until their owners or
// the Pod garbage collector delete them.
func (n *Node) Stop(ctx context.Context) error {
	n.cancel()
	n.pods.shutDown()
	n.done.Wait()
	n.pods.stopAll()
	leases := n.cfg.Client.CoordinationV1().Leases(leaseNamespace)
	return errors.Join(
		ignoreNotFound(leases.Delete(ctx, n.cfg.Name, metav1.DeleteOptions{})),
		ignoreNotFound(n.cfg.Client.CoreV1().Nodes().Delete(ctx, n.cfg.Name, metav1.DeleteOptions{})),
	)
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// register creates the Node, or takes over one left by an earlier run, and reports it Ready.
func register(ctx context.Context, cfg Config) (*corev1.Node, error) {
	nodes := cfg.Client.CoreV1().Nodes()
	want := describeNode(cfg, metav1.Now().Rfc3339Copy())
	node, err := nodes.Create(ctx, want, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		node, err = takeOver(ctx, cfg, want)
	}
	if err != nil {
		return nil, fmt.Errorf("simnode: registering node %s: %w", cfg.Name, err)
	}
	// The status an API server keeps on create is not a promise: write it as the kubelet does.
	// kube-controller-manager writes the new Node too (its Pod CIDR, taints), so a write may
	// meet a conflict: it is made again onto the Node as it now is.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node.Status = want.Status
		updated, err := nodes.UpdateStatus(ctx, node, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			if fresh, getErr := nodes.Get(ctx, cfg.Name, metav1.GetOptions{}); getErr == nil {
				node = fresh
			}
			return err
		}
		node = updated
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("simnode: reporting node %s ready: %w", cfg.Name, err)
	}
	return node, nil
}

// takeOver gives an existing Node of this name the labels and taint of a sim node.
func takeOver(ctx context.Context, cfg Config, want *corev1.Node) (*corev1.Node, error) {
	nodes := cfg.Client.CoreV1().Nodes()
	node, err := nodes.Get(ctx, cfg.Name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	if node.Labels == nil {
		node.Labels = map[string]string{}
	}
	for k, v := range want.Labels {
		node.Labels[k] = v
	}
	node.Spec.Taints = withTaint(node.Spec.Taints, want.Spec.Taints[0])
	return nodes.Update(ctx, node, metav1.UpdateOptions{})
}

func withTaint(taints []corev1.Taint, t corev1.Taint) []corev1.Taint {
	for _, have := range taints {
		if have.MatchTaint(&t) {
			return taints
		}
	}
	return append(taints, t)
}

// describeNode is the Node a sim node registers: room for thousands of Pods, Ready, and the
// address the Sim listens on.
func describeNode(cfg Config, now metav1.Time) *corev1.Node {
	capacity := corev1.ResourceList{
		corev1.ResourcePods:             resource.MustParse("10000"),
		corev1.ResourceCPU:              resource.MustParse("1000"),
		corev1.ResourceMemory:           resource.MustParse("4Ti"),
		corev1.ResourceEphemeralStorage: resource.MustParse("10Ti"),
	}
	condition := func(t corev1.NodeConditionType, status corev1.ConditionStatus, reason, message string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: t, Status: status, Reason: reason, Message: message, LastHeartbeatTime: now, LastTransitionTime: now}
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: cfg.Name, Labels: map[string]string{
			corev1.LabelHostname: cfg.Name, corev1.LabelOSStable: "linux", corev1.LabelArchStable: "amd64", Label: "true",
		}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: Label, Value: "true", Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{
			Capacity:    capacity,
			Allocatable: capacity.DeepCopy(),
			Phase:       corev1.NodeRunning,
			Conditions: []corev1.NodeCondition{
				condition(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
				condition(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
				condition(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
				condition(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status"),
			},
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: cfg.PodIP},
				{Type: corev1.NodeHostName, Address: cfg.Name},
			},
			NodeInfo: corev1.NodeSystemInfo{
				KubeletVersion: "v0.0.0-simnode", OperatingSystem: "linux", Architecture: "amd64",
				ContainerRuntimeVersion: "simnode://1",
			},
		},
	}
}

// keepLease renews the node's Lease every leaseRenew until ctx ends; after a failed renewal
// the next one reads the Lease afresh.
func (n *Node) keepLease(ctx context.Context, node *corev1.Node, last *coordinationv1.Lease) {
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		var err error
		if last, err = n.renew(ctx, node, last); err != nil {
			last = nil
		}
	}, n.cfg.leaseRenew)
}

// renew moves the Lease's renew time to now: an update of the Lease last written, or, when
// there is none, of the stored one, created if missing. It is owned by the Node, as the
// kubelet's, so that it goes with it.
func (n *Node) renew(ctx context.Context, node *corev1.Node, last *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	leases := n.cfg.Client.CoordinationV1().Leases(leaseNamespace)
	if last == nil {
		stored, err := leases.Get(ctx, n.cfg.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return leases.Create(ctx, renewed(nil, node, time.Now()), metav1.CreateOptions{})
		}
		if err != nil {
			return nil, err
		}
		last = stored
	}
	return leases.Update(ctx, renewed(last, node, time.Now()), metav1.UpdateOptions{})
}

// renewed is lease (or a new one when nil) held by the node and renewed at now.
func renewed(lease *coordinationv1.Lease, node *corev1.Node, now time.Time) *coordinationv1.Lease {
	if lease == nil {
		lease = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: node.Name, Namespace: leaseNamespace}}
	} else {
		lease = lease.DeepCopy()
	}
	lease.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}}
	lease.Spec.HolderIdentity = &node.Name
	lease.Spec.LeaseDurationSeconds = new(int32(leaseDurationSeconds))
	lease.Spec.RenewTime = &metav1.MicroTime{Time: now}
	return lease
}
