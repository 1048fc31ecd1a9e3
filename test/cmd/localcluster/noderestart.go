package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/quorumkeeper/etcd-operator/test/localcluster/node"
)

// nodeSlot is one node agent and what it takes to start it again after a crash.
type nodeSlot struct {
	cfg node.Config

	mu     sync.Mutex
	agent  *node.Agent
	cancel context.CancelFunc
	done   chan struct{}
	// removed: the node is gone for good (remove) until a new machine of its name joins
	// (add).
	removed bool
}

// start runs a new agent for the slot's node until ctx ends or crash.
func (n *nodeSlot) start(ctx context.Context, wg *sync.WaitGroup) error {
	agent, err := node.New(n.cfg)
	if err != nil {
		return err
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	n.mu.Lock()
	n.agent, n.cancel, n.done = agent, cancel, done
	n.mu.Unlock()
	wg.Go(func() {
		defer close(done)
		if err := agent.Run(runCtx); err != nil {
			klog.ErrorS(err, "node agent stopped", "node", n.cfg.NodeName)
		}
	})
	return nil
}

func (n *nodeSlot) current() *node.Agent {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.agent
}

// crash ends the agent as the loss of its machine would: every container of its Pods is
// killed at once. The Pod objects stay, as they do for a node that stops answering.
func (n *nodeSlot) crash() {
	n.mu.Lock()
	agent, cancel, done := n.agent, n.cancel, n.done
	n.mu.Unlock()
	agent.Crash()
	cancel()
	<-done
}

// shutDown does what a graceful shutdown of the machine does: the kubelet stops every Pod
// within its grace period and leaves it Failed (node.Agent.Shutdown), then the agent ends.
func (n *nodeSlot) shutDown(ctx context.Context) error {
	n.mu.Lock()
	agent, cancel, done := n.agent, n.cancel, n.done
	n.mu.Unlock()
	err := agent.Shutdown(ctx)
	cancel()
	<-done
	return err
}

// SignalRestartNode, sent to the supervisor, acts on the node agent named in the file
// nodeRestartRequestFile, one request at a time:
//
//	<node> <seconds down>            crash it, and start it again after that long (node-crash)
//	<node> <seconds down> shutdown   shut it down gracefully, and start it again after that long
//	<node> evict <namespace>/<pod>   evict that Pod as under node pressure
//	<node> remove                    remove it for good, as a cloud deleting its VM (removeNode)
//	<node> add                       a new, empty machine of that name joins after a remove
//
// The supervisor says it takes the signal in nodeRestartSignalFile, as for
// SignalRestartAPIServer, and which requests it knows in nodeFaultsFile (a supervisor of an
// older build knows only the crash).
const SignalRestartNode = syscall.SIGUSR2

func nodeRestartSignalFile(dir string) string  { return filepath.Join(dir, "node-restart-signal") }
func nodeRestartRequestFile(dir string) string { return filepath.Join(dir, "node-restart-request") }
func nodeFaultsFile(dir string) string         { return filepath.Join(dir, "node-faults") }

// The requests of nodeRestartRequestFile.
const (
	faultCrash    = "crash"
	faultShutdown = "shutdown"
	faultEvict    = "evict"
	faultRemove   = "remove"
	faultAdd      = "add"
)

// nodeRequest is one request of nodeRestartRequestFile.
type nodeRequest struct {
	node, fault string
	down        time.Duration // crash, shutdown
	pod         types.NamespacedName
}

// nodeFaults is what the supervisor acts on for SignalRestartNode: its node agents, and what
// the loss of a machine takes besides its agent (the data of its local volumes).
type nodeFaults struct {
	dir   string
	nodes []*nodeSlot
	wg    *sync.WaitGroup
	// wipeVolumes removes the data of every local volume pinned to the node.
	wipeVolumes func(ctx context.Context, node string) ([]string, error)
}

// restartNodeOnSignal serves SignalRestartNode, one request at a time, until ctx ends.
func restartNodeOnSignal(ctx context.Context, f nodeFaults) error {
	err := onSignal(ctx, SignalRestartNode, nodeRestartSignalFile(f.dir), func() {
		if err := f.act(ctx); err != nil {
			klog.ErrorS(err, "acting on a node agent on request")
		}
	})
	if err != nil {
		return err
	}
	known := []string{faultCrash, faultShutdown, faultEvict, faultRemove, faultAdd}
	return os.WriteFile(nodeFaultsFile(f.dir), []byte(strings.Join(known, "\n")+"\n"), 0o644)
}

func (f nodeFaults) act(ctx context.Context) error {
	dir, nodes, wg := f.dir, f.nodes, f.wg
	raw, err := os.ReadFile(nodeRestartRequestFile(dir))
	if err != nil {
		return err
	}
	req, err := parseNodeRequest(string(raw))
	if err != nil {
		return fmt.Errorf("%s: %w", nodeRestartRequestFile(dir), err)
	}
	i := slices.IndexFunc(nodes, func(n *nodeSlot) bool { return n.cfg.NodeName == req.node })
	if i < 0 {
		return fmt.Errorf("no node %q", req.node)
	}
	n := nodes[i]
	if removed := n.isRemoved(); removed != (req.fault == faultAdd) {
		return fmt.Errorf("node %s: %s asked while removed is %v", req.node, req.fault, removed)
	}
	switch req.fault {
	case faultRemove:
		return f.removeNode(ctx, n)
	case faultAdd:
		klog.InfoS("a new machine joins under a removed node's name", "node", req.node)
		n.setRemoved(false)
		return n.start(ctx, wg)
	case faultEvict:
		klog.InfoS("evicting a Pod on request, as under node pressure", "node", req.node, "pod", req.pod)
		return n.current().Evict(ctx, req.pod.Namespace, req.pod.Name)
	case faultShutdown:
		klog.InfoS("shutting a node down gracefully on request", "node", req.node, "down", req.down)
		if err := n.shutDown(ctx); err != nil {
			klog.ErrorS(err, "graceful node shutdown", "node", req.node)
		}
	default:
		klog.InfoS("crashing a node agent on request", "node", req.node, "down", req.down)
		n.crash()
	}
	select {
	case <-ctx.Done():
		return nil
	case <-time.After(req.down):
	}
	klog.InfoS("starting the node agent again", "node", req.node)
	return n.start(ctx, wg)
}

// parseNodeRequest parses a request of nodeRestartRequestFile.
func parseNodeRequest(raw string) (nodeRequest, error) {
	fields := strings.Fields(raw)
	const want = `want "<node> <seconds down> [shutdown]", "<node> evict <namespace>/<pod>", "<node> remove" or "<node> add"`
	switch {
	case len(fields) == 2 && (fields[1] == faultRemove || fields[1] == faultAdd):
		return nodeRequest{node: fields[0], fault: fields[1]}, nil
	case len(fields) == 3 && fields[1] == faultEvict:
		ns, name, ok := strings.Cut(fields[2], "/")
		if !ok || ns == "" || name == "" {
			return nodeRequest{}, fmt.Errorf("pod %q: want <namespace>/<pod>", fields[2])
		}
		return nodeRequest{node: fields[0], fault: faultEvict, pod: types.NamespacedName{Namespace: ns, Name: name}}, nil
	case len(fields) == 2, len(fields) == 3 && fields[2] == faultShutdown:
		seconds, err := strconv.Atoi(fields[1])
		if err != nil || seconds < 0 || seconds > 600 {
			return nodeRequest{}, fmt.Errorf("seconds down %q: want 0 to 600", fields[1])
		}
		req := nodeRequest{node: fields[0], fault: faultCrash, down: time.Duration(seconds) * time.Second}
		if len(fields) == 3 {
			req.fault = faultShutdown
		}
		return req, nil
	}
	return nodeRequest{}, fmt.Errorf("%s, got %q", want, raw)
}

func (n *nodeSlot) isRemoved() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.removed
}

func (n *nodeSlot) setRemoved(removed bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.removed = removed
}

// removeNode does what a cloud deleting the node's VM does: the machine stops at once (every
// container killed, as in crash), its disks go (the node's state and the data of every
// local volume pinned to it), and the cloud's node controller deletes the Node object. The
// PersistentVolumes stay; kube-controller-manager's Pod garbage collector deletes the Pods
// bound to the Node, as on a real cluster. The node stays away until add.
func (f nodeFaults) removeNode(ctx context.Context, n *nodeSlot) error {
	name := n.cfg.NodeName
	klog.InfoS("removing a node for good on request", "node", name)
	n.crash()
	n.setRemoved(true)
	wiped, err := f.wipeVolumes(ctx, name)
	if err != nil {
		return fmt.Errorf("wiping the local volumes of %s: %w", name, err)
	}
	if err := os.RemoveAll(n.cfg.Dir); err != nil {
		return err
	}
	err = n.cfg.Client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting Node %s: %w", name, err)
	}
	klog.InfoS("node removed for good", "node", name, "wipedVolumes", wiped)
	return nil
}
