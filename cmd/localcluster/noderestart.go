package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

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

// SignalRestartNode, sent to the supervisor, crashes the node agent named in the file
// nodeRestartRequestFile ("<node> <seconds down>") and starts it again after that long: the
// robustness scenarios' node-crash fault. The supervisor says it takes the signal in
// nodeRestartSignalFile, as for SignalRestartAPIServer.
const SignalRestartNode = syscall.SIGUSR2

func nodeRestartSignalFile(dir string) string  { return filepath.Join(dir, "node-restart-signal") }
func nodeRestartRequestFile(dir string) string { return filepath.Join(dir, "node-restart-request") }

// restartNodeOnSignal serves SignalRestartNode, one restart at a time, until ctx ends.
func restartNodeOnSignal(ctx context.Context, wg *sync.WaitGroup, dir string, nodes []*nodeSlot) error {
	return onSignal(ctx, SignalRestartNode, nodeRestartSignalFile(dir), func() {
		if err := restartNode(ctx, wg, dir, nodes); err != nil {
			klog.ErrorS(err, "restarting a node agent")
		}
	})
}

func restartNode(ctx context.Context, wg *sync.WaitGroup, dir string, nodes []*nodeSlot) error {
	name, down, err := readNodeRestartRequest(nodeRestartRequestFile(dir))
	if err != nil {
		return err
	}
	for _, n := range nodes {
		if n.cfg.NodeName != name {
			continue
		}
		klog.InfoS("crashing a node agent on request", "node", name, "down", down)
		n.crash()
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(down):
		}
		klog.InfoS("starting the node agent again", "node", name)
		return n.start(ctx, wg)
	}
	return fmt.Errorf("no node %q", name)
}

// readNodeRestartRequest parses "<node> <seconds down>".
func readNodeRestartRequest(path string) (string, time.Duration, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", 0, err
	}
	fields := strings.Fields(string(raw))
	if len(fields) != 2 {
		return "", 0, fmt.Errorf("%s: want \"<node> <seconds down>\", got %q", path, raw)
	}
	seconds, err := strconv.Atoi(fields[1])
	if err != nil || seconds < 0 || seconds > 600 {
		return "", 0, fmt.Errorf("%s: seconds down %q: want 0 to 600", path, fields[1])
	}
	return fields[0], time.Duration(seconds) * time.Second, nil
}
