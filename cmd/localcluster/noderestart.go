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
)

// nodeRequest is one request of nodeRestartRequestFile.
type nodeRequest struct {
	node, fault string
	down        time.Duration // crash, shutdown
	pod         types.NamespacedName
}

// restartNodeOnSignal serves SignalRestartNode, one request at a time, until ctx ends.
func restartNodeOnSignal(ctx context.Context, wg *sync.WaitGroup, dir string, nodes []*nodeSlot) error {
	err := onSignal(ctx, SignalRestartNode, nodeRestartSignalFile(dir), func() {
		if err := actOnNode(ctx, wg, dir, nodes); err != nil {
			klog.ErrorS(err, "acting on a node agent on request")
		}
	})
	if err != nil {
		return err
	}
	return os.WriteFile(nodeFaultsFile(dir), []byte(strings.Join([]string{faultCrash, faultShutdown, faultEvict}, "\n")+"\n"), 0o644)
}

func actOnNode(ctx context.Context, wg *sync.WaitGroup, dir string, nodes []*nodeSlot) error {
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
	switch req.fault {
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
	const want = `want "<node> <seconds down> [shutdown]" or "<node> evict <namespace>/<pod>"`
	switch {
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
