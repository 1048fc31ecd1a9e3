package simnode

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"slices"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
	"github.com/quorumkeeper/etcd-operator/test/etcdsim"
)

const (
	nodeName = "sim-0"
	podIP    = "10.213.0.1"
	ns       = "ns"
)

var founders = []string{"db-0", "db-1", "db-2"}

// world is a sim node on a fake API, with its Sim served on a loopback listener.
type world struct {
	client kubernetes.Interface
	sim    *etcdsim.Sim
	addr   string // where the Sim listens
	node   *Node
}

func newWorld(t *testing.T) *world {
	t.Helper()
	w := &world{client: fake.NewClientset(), sim: etcdsim.New(etcdsim.Options{})}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := w.sim.Server()
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)
	w.addr = lis.Addr().String()
	w.node, err = Start(t.Context(), Config{
		Name: nodeName, PodIP: podIP, Sim: w.sim, Client: w.client,
		leaseRenew: 20 * time.Millisecond, backoffBase: 20 * time.Millisecond, backoffMax: 80 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.node.Stop(context.Background()) })
	return w
}

// etcdCluster is an EtcdCluster meant for sim nodes.
func etcdCluster() *etcdv1.EtcdCluster {
	size := resource.MustParse("64Mi")
	selector, tolerations := Placement()
	return &etcdv1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: ns},
		Spec: etcdv1.EtcdClusterSpec{
			Version: "3.6.16", Storage: etcdv1.StorageSpec{Size: &size, Medium: etcdv1.StorageMediumMemory},
			NodeSelector: selector, Tolerations: tolerations,
		},
	}
}

// memberPod is a member's Pod as the operator builds it, bound to the sim node.
func memberPod(name string, state etcdv1.InitialClusterState, initial []string) *corev1.Pod {
	c := etcdCluster()
	m := &etcdv1.EtcdMember{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: etcdv1.EtcdMemberSpec{
			ClusterName: c.Name, Version: c.Spec.Version, Storage: c.Spec.Storage,
			Bootstrap: etcdv1.MemberBootstrap{
				InitialCluster: specs.InitialCluster(c, initial), InitialClusterState: state, ClusterToken: "tok",
			},
		},
	}
	pod := specs.Pod(c, m, specs.PodOptions{})
	pod.UID = types.UID(name + "-uid") // an API server would set it; the fake does not
	pod.Spec.NodeName = nodeName
	return pod
}

func (w *world) create(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	if _, err := w.client.CoreV1().Pods(ns).Create(t.Context(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// runFounders creates the Pods of a new three-member cluster and waits until they run.
func (w *world) runFounders(t *testing.T) {
	t.Helper()
	for _, name := range founders {
		w.create(t, memberPod(name, etcdv1.InitialClusterStateNew, founders))
	}
	for _, name := range founders {
		w.waitPod(t, name, "running and ready", runningAndReady)
	}
}

// waitFor polls cond until it holds; its message says what was seen last.
func waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		ok, seen := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: %s", what, seen)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (w *world) waitPod(t *testing.T, name, what string, cond func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	waitFor(t, "pod "+name+" "+what, func() (bool, string) {
		var err error
		pod, err = w.client.CoreV1().Pods(ns).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return cond(pod), fmt.Sprintf("%+v", pod.Status)
	})
	return pod
}

func condition(pod *corev1.Pod, t corev1.PodConditionType) corev1.ConditionStatus {
	for _, c := range pod.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

func runningAndReady(pod *corev1.Pod) bool {
	if pod.Status.Phase != corev1.PodRunning || pod.Status.PodIP != podIP || pod.Status.HostIP != podIP ||
		len(pod.Status.PodIPs) != 1 || pod.Status.PodIPs[0].IP != podIP || pod.Status.StartTime == nil {
		return false
	}
	for _, t := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
		if condition(pod, t) != corev1.ConditionTrue {
			return false
		}
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.State.Running == nil || cs.State.Running.StartedAt.IsZero() || !cs.Ready || cs.Started == nil || !*cs.Started {
			return false
		}
	}
	return len(pod.Status.ContainerStatuses) == len(pod.Spec.Containers)
}

// dial connects to the member's etcd, as the operator would at its client URL: through the
// Sim, which tells members apart by the :authority.
func (w *world) dial(t *testing.T, member string) *grpc.ClientConn {
	t.Helper()
	u, err := url.Parse(specs.ClientURL(etcdCluster(), member))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := etcdsim.Conn(w.addr, u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func callCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// memberList asks the member's cluster for its members.
func (w *world) memberList(t *testing.T, member string) []*pb.Member {
	t.Helper()
	resp, err := pb.NewClusterClient(w.dial(t, member)).MemberList(callCtx(t), &pb.MemberListRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return resp.Members
}

// answers says whether the member's etcd answers. Plain gRPC does not retry as clientv3
// does, so a member that is not there fails at once, Unavailable.
func (w *world) answers(t *testing.T, member string) bool {
	t.Helper()
	_, err := pb.NewMaintenanceClient(w.dial(t, member)).Status(callCtx(t), &pb.StatusRequest{})
	if err != nil && status.Code(err) != codes.Unavailable {
		t.Fatalf("status of %s: %v; want an answer or Unavailable", member, err)
	}
	return err == nil
}

func TestNodeRegistersAndRenewsItsLease(t *testing.T) {
	w := newWorld(t)
	node, err := w.client.CoreV1().Nodes().Get(t.Context(), nodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkNode(t, node)
	leases := w.client.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	first, err := leases.Get(t.Context(), nodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s := first.Spec; s.HolderIdentity == nil || *s.HolderIdentity != nodeName || s.LeaseDurationSeconds == nil || *s.LeaseDurationSeconds != 40 ||
		s.RenewTime == nil || len(first.OwnerReferences) != 1 || first.OwnerReferences[0].Kind != "Node" || first.OwnerReferences[0].Name != nodeName {
		t.Fatalf("lease %+v", first)
	}
	waitFor(t, "the lease renewed", func() (bool, string) {
		l, err := leases.Get(t.Context(), nodeName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return l.Spec.RenewTime.After(first.Spec.RenewTime.Time), l.Spec.RenewTime.String()
	})

	if err := w.node.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	_, nodeErr := w.client.CoreV1().Nodes().Get(t.Context(), nodeName, metav1.GetOptions{})
	_, leaseErr := leases.Get(t.Context(), nodeName, metav1.GetOptions{})
	if !apierrors.IsNotFound(nodeErr) || !apierrors.IsNotFound(leaseErr) {
		t.Fatalf("after Stop: node %v, lease %v; want both gone", nodeErr, leaseErr)
	}
}

func checkNode(t *testing.T, node *corev1.Node) {
	t.Helper()
	if node.Labels[corev1.LabelHostname] != nodeName || node.Labels[Label] != "true" {
		t.Errorf("labels %v", node.Labels)
	}
	selector, tolerations := Placement()
	for k, v := range selector {
		if node.Labels[k] != v {
			t.Errorf("node labels %v do not match Placement's selector %v", node.Labels, selector)
		}
	}
	if len(node.Spec.Taints) != 1 || !tolerations[0].ToleratesTaint(klog.Background(), &node.Spec.Taints[0], false) || node.Spec.Taints[0].Effect != corev1.TaintEffectNoSchedule {
		t.Errorf("taints %v; want one NoSchedule taint Placement tolerates", node.Spec.Taints)
	}
	want := map[corev1.ResourceName]string{corev1.ResourcePods: "10k", corev1.ResourceCPU: "1k", corev1.ResourceMemory: "4Ti", corev1.ResourceEphemeralStorage: "10Ti"}
	for name, q := range want {
		c, a := node.Status.Capacity[name], node.Status.Allocatable[name]
		if c.Cmp(resource.MustParse(q)) != 0 || a.Cmp(c) != 0 {
			t.Errorf("%s: capacity %s, allocatable %s; want %s", name, c.String(), a.String(), q)
		}
	}
	wantConditions := map[corev1.NodeConditionType]corev1.ConditionStatus{
		corev1.NodeReady: corev1.ConditionTrue, corev1.NodeMemoryPressure: corev1.ConditionFalse,
		corev1.NodeDiskPressure: corev1.ConditionFalse, corev1.NodePIDPressure: corev1.ConditionFalse,
	}
	for _, c := range node.Status.Conditions {
		if wantConditions[c.Type] == c.Status {
			delete(wantConditions, c.Type)
		}
	}
	if len(wantConditions) != 0 {
		t.Errorf("conditions %v; missing %v", node.Status.Conditions, wantConditions)
	}
	if !slices.Contains(node.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: podIP}) {
		t.Errorf("addresses %v; want InternalIP %s", node.Status.Addresses, podIP)
	}
}

// The founding members' Pods run: Running and Ready at the node's address, and the Sim has
// their cluster with every member started.
func TestFoundingMembersRun(t *testing.T) {
	w := newWorld(t)
	restored := memberPod("db-0", etcdv1.InitialClusterStateNew, founders)
	restored.Spec.InitContainers = []corev1.Container{{Name: specs.RestoreContainerName, Image: "etcd"}}
	w.create(t, restored)
	for _, name := range founders[1:] {
		w.create(t, memberPod(name, etcdv1.InitialClusterStateNew, founders))
	}
	for _, name := range founders {
		w.waitPod(t, name, "running and ready", runningAndReady)
	}
	pod := w.waitPod(t, "db-0", "with its init container completed", func(p *corev1.Pod) bool {
		s := p.Status.InitContainerStatuses
		return len(s) == 1 && s[0].State.Terminated != nil && s[0].State.Terminated.ExitCode == 0 && s[0].State.Terminated.Reason == "Completed"
	})
	if pod.Status.ContainerStatuses[0].Name != specs.ContainerName {
		t.Fatalf("container statuses %+v", pod.Status.ContainerStatuses)
	}
	if w.sim.Clusters() != 1 {
		t.Fatalf("the Sim has %d clusters; want 1", w.sim.Clusters())
	}
	members := w.memberList(t, "db-1")
	for _, m := range members {
		if m.Name == "" || len(m.ClientURLs) == 0 || m.IsLearner {
			t.Errorf("member %v not started", m)
		}
	}
	if len(members) != 3 {
		t.Fatalf("members %v; want the 3 founders", members)
	}
}

// A joining member that was never added cannot start, as etcd exits: the Pod reports the exit
// and backs off, not Ready, and runs once the member has been added.
func TestJoinerNeverAddedCrashLoopsUntilAdded(t *testing.T) {
	w := newWorld(t)
	w.runFounders(t)
	joiner := append(slices.Clone(founders), "db-3")
	w.create(t, memberPod("db-3", etcdv1.InitialClusterStateExisting, joiner))
	pod := w.waitPod(t, "db-3", "crash-looping, restarted", func(p *corev1.Pod) bool {
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount >= 2
	})
	cs := pod.Status.ContainerStatuses[0]
	exit := cs.LastTerminationState.Terminated
	if cs.State.Waiting == nil || cs.State.Waiting.Reason != "CrashLoopBackOff" || cs.Ready || exit == nil ||
		exit.ExitCode != 1 || exit.Reason != "Error" || exit.Message == "" {
		t.Fatalf("etcd container %+v; want it waiting in CrashLoopBackOff after an Error exit with a message", cs)
	}
	if condition(pod, corev1.PodReady) != corev1.ConditionFalse || condition(pod, corev1.ContainersReady) != corev1.ConditionFalse {
		t.Fatalf("conditions %+v; want not Ready", pod.Status.Conditions)
	}

	add := &pb.MemberAddRequest{PeerURLs: []string{specs.PeerURL(etcdCluster(), "db-3")}, IsLearner: true}
	if _, err := pb.NewClusterClient(w.dial(t, "db-0")).MemberAdd(callCtx(t), add); err != nil {
		t.Fatal(err)
	}
	w.waitPod(t, "db-3", "running once added", runningAndReady)
}

// A Pod marked for deletion has its member stopped and is deleted; a Pod deleted outright
// has its member stopped.
func TestDeletedPodsStopTheirMembers(t *testing.T) {
	w := newWorld(t)
	w.runFounders(t)
	for _, name := range founders {
		if !w.answers(t, name) {
			t.Fatalf("member %s does not answer while its Pod runs", name)
		}
	}
	pods := w.client.CoreV1().Pods(ns)
	pod, err := pods.Get(t.Context(), "db-2", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.DeletionTimestamp = new(metav1.Now())
	pod.DeletionGracePeriodSeconds = new(int64(30))
	if _, err := pods.Update(t.Context(), pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "db-2 deleted", func() (bool, string) {
		_, err := pods.Get(t.Context(), "db-2", metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	if w.answers(t, "db-2") {
		t.Fatal("db-2's member answers after its Pod was deleted")
	}

	if err := pods.Delete(t.Context(), "db-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "db-1's member stopped", func() (bool, string) { return !w.answers(t, "db-1"), "it answers" })
	if !w.answers(t, "db-0") {
		t.Fatal("db-0's member stopped with the others")
	}
}
