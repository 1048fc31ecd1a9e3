package main

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/quorumkeeper/etcd-operator/test/localcluster"
	"github.com/quorumkeeper/etcd-operator/test/localcluster/netpolicy"
	"github.com/quorumkeeper/etcd-operator/test/localcluster/netsetup"
	"github.com/quorumkeeper/etcd-operator/test/localcluster/node"
	"github.com/quorumkeeper/etcd-operator/test/localcluster/provisioner"
)

const (
	apiPort       = 6443
	firstNodePort = 10250
	serviceCIDR   = "10.214.0.0/16"
)

var zones = []string{"zone-a", "zone-b", "zone-c", "zone-d", "zone-e"}

func kubeconfigPath(dir string) string  { return filepath.Join(dir, "kubeconfig") }
func readyFile(dir string) string       { return filepath.Join(dir, "ready") }
func pidFile(dir string) string         { return filepath.Join(dir, "supervisor.pid") }
func imagesFile(dir string) string      { return filepath.Join(dir, "images.yaml") }
func pulledImagesDir(dir string) string { return filepath.Join(dir, "pulled-images") }

// supervise runs the whole local cluster in this process until SIGTERM or SIGINT, then stops
// it in order: Pods, node agents, control plane, network.
func supervise(o options) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := prepareStateDir(o); err != nil {
		return err
	}
	netCfg := netsetup.DefaultConfig()
	if err := netsetup.SetUp(netCfg); err != nil {
		return err
	}
	defer func() {
		if err := netsetup.TearDown(netCfg); err != nil {
			klog.ErrorS(err, "tearing down the network")
		}
	}()
	hostIP := netCfg.BridgeCIDR.Addr()
	dns := netsetup.NewDNS()
	go func() {
		if err := dns.Serve(ctx, netip.AddrPortFrom(hostIP, 53).String()); err != nil {
			klog.ErrorS(err, "DNS server stopped")
		}
	}()

	cp, err := localcluster.Start(ctx, localcluster.Config{
		Dir: o.dir, KubeBinDir: o.kubeBinDir, EtcdBin: o.etcdBin,
		APIAddress: hostIP, APIPort: apiPort, ServiceCIDR: serviceCIDR, Marker: marker(o.dir),
	})
	if err != nil {
		return err
	}
	defer cp.Stop()
	if cp.KubeconfigPath() != kubeconfigPath(o.dir) {
		return fmt.Errorf("the control plane wrote its kubeconfig to %s, not %s", cp.KubeconfigPath(), kubeconfigPath(o.dir))
	}
	// The provisioner and the DNS records are controllers: a controller-manager's default
	// limits (20 requests/s, bursts of 30), not client-go's 5/s.
	controllersConfig := cp.RESTConfig()
	controllersConfig.QPS, controllersConfig.Burst = 20, 30
	client, err := kubernetes.NewForConfig(controllersConfig)
	if err != nil {
		return err
	}
	if err := startAddons(ctx, o, cp, client, hostIP); err != nil {
		return err
	}
	prov := provisioner.New(client, filepath.Join(o.dir, "volumes"))
	if err := prov.EnsureStorageClass(ctx); err != nil {
		return fmt.Errorf("default StorageClass: %w", err)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { prov.Run(ctx) })
	wg.Go(func() { localcluster.ServeRecords(ctx, client, dns) })
	if err := enforceNetworkPolicies(ctx, &wg, client); err != nil {
		return err
	}

	nodes, err := startAgents(ctx, &wg, o, cp, netCfg)
	if err != nil {
		return err
	}
	if err := announceReady(ctx, o, nodes); err != nil {
		return err
	}
	if err := serveFaultSignals(ctx, o.dir, cp, nodeFaults{dir: o.dir, nodes: nodes, wg: &wg, wipeVolumes: prov.WipeNode}); err != nil {
		return err
	}
	<-ctx.Done()
	klog.InfoS("stopping the local cluster")
	return nil
}

// serveFaultSignals lets the robustness scenarios and the end-to-end tests restart
// kube-apiserver and act on nodes (crash, shut down, evict, remove, add).
func serveFaultSignals(ctx context.Context, dir string, cp *localcluster.ControlPlane, nodes nodeFaults) error {
	if err := restartAPIServerOnSignal(ctx, dir, cp); err != nil {
		return err
	}
	return restartNodeOnSignal(ctx, nodes)
}

// SignalRestartAPIServer, sent to the supervisor (its pid is in supervisor.pid), restarts
// kube-apiserver: the robustness scenarios' apiserver-restart fault. The supervisor says it
// takes the signal in the file apiServerRestartFile, so that nobody sends it to a supervisor
// of an older build, which the signal would end.
const SignalRestartAPIServer = syscall.SIGUSR1

func apiServerRestartFile(dir string) string { return filepath.Join(dir, "apiserver-restart-signal") }

// restartAPIServerOnSignal restarts kube-apiserver each time the supervisor gets
// SignalRestartAPIServer, one restart at a time, until ctx ends.
func restartAPIServerOnSignal(ctx context.Context, dir string, cp *localcluster.ControlPlane) error {
	return onSignal(ctx, SignalRestartAPIServer, apiServerRestartFile(dir), func() {
		klog.InfoS("restarting kube-apiserver on request")
		restartCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		if err := cp.RestartAPIServer(restartCtx); err != nil {
			klog.ErrorS(err, "restarting kube-apiserver")
		}
	})
}

// onSignal runs do each time the supervisor gets sig, one at a time, until ctx ends. It
// first writes marker, which tells senders that this supervisor takes sig (one of an older
// build would end on it).
func onSignal(ctx context.Context, sig os.Signal, marker string, do func()) error {
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, sig)
	if err := os.WriteFile(marker, []byte(sig.String()+"\n"), 0o644); err != nil {
		signal.Stop(signals)
		return err
	}
	go func() {
		defer signal.Stop(signals)
		for {
			select {
			case <-ctx.Done():
				return
			case <-signals:
				do()
			}
		}
	}()
	return nil
}

// prepareStateDir records this supervisor's pid and takes a copy of the image map.
func prepareStateDir(o options) error {
	if err := os.MkdirAll(o.dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(pidFile(o.dir), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return err
	}
	if err := copyFile(o.images, imagesFile(o.dir)); err != nil {
		return fmt.Errorf("image map: %w", err)
	}
	return nil
}

func marker(dir string) string { return localcluster.MarkerFor(dir) }

// startAgents starts one node agent per zone; each gets a /24 of the bridge network and its
// own kubelet port on the bridge address.
func startAgents(ctx context.Context, wg *sync.WaitGroup, o options, cp *localcluster.ControlPlane, netCfg netsetup.Config) ([]*nodeSlot, error) {
	hostIP := netCfg.BridgeCIDR.Addr()
	base := hostIP.As4()
	var nodes []*nodeSlot
	for i := range o.nodes {
		name := fmt.Sprintf("node-%d", i+1)
		serving, key, err := cp.IssueServingCert(name, []netip.Addr{hostIP}, []string{name})
		if err != nil {
			return nil, err
		}
		podCIDR := netip.PrefixFrom(netip.AddrFrom4([4]byte{base[0], base[1], byte(i + 1), 0}), 24)
		agentClient, err := kubeletClient(cp)
		if err != nil {
			return nil, err
		}
		n := &nodeSlot{cfg: node.Config{
			NodeName: name, Zone: zones[i%len(zones)], Client: agentClient,
			Dir:     filepath.Join(o.dir, "nodes", name),
			Network: netCfg, PodCIDR: podCIDR, HostIP: hostIP, APIPort: apiPort,
			ListenPort: firstNodePort + i, ServingCertFile: serving, ServingKeyFile: key, ClientCAFile: cp.CAFile(),
			ImagesFile: imagesFile(o.dir), PullDir: pulledImagesDir(o.dir), Marker: marker(o.dir),
		}}
		if err := n.start(ctx, wg); err != nil {
			return nil, err
		}
		nodes = append(nodes, n)
	}
	return nodes, nil
}

// kubeletClient is a node agent's own API client, with a kubelet's default limits (50
// requests/s, bursts of 100). Sharing the supervisor's client, with client-go's default 5/s,
// the three agents' Pod status updates, volume reads and Secret refreshes queued behind each
// other: with some twenty Pods running, a Pod's start waited a second or more for the client.
func kubeletClient(cp *localcluster.ControlPlane) (kubernetes.Interface, error) {
	cfg := cp.RESTConfig()
	cfg.QPS, cfg.Burst = 50, 100
	return kubernetes.NewForConfig(cfg)
}

func copyFile(from, to string) error {
	if from == "" {
		return fmt.Errorf("no --images given")
	}
	data, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, data, 0o644)
}

// announceReady waits until every node agent is ready, then writes the ready file that
// local-up waits for.
func announceReady(ctx context.Context, o options, nodes []*nodeSlot) error {
	for _, n := range nodes {
		if err := n.current().WaitReady(ctx, 2*time.Minute); err != nil {
			return fmt.Errorf("node agent not ready: %w", err)
		}
	}
	if err := os.WriteFile(readyFile(o.dir), []byte(time.Now().Format(time.RFC3339)), 0o644); err != nil {
		return err
	}
	klog.InfoS("local cluster ready", "kubeconfig", kubeconfigPath(o.dir), "nodes", o.nodes)
	return nil
}

// enforceNetworkPolicies starts the NetworkPolicy controller. An empty table first: a machine
// that cannot enforce NetworkPolicies fails here, not with tests of a policy that pass because
// nothing is enforced.
func enforceNetworkPolicies(ctx context.Context, wg *sync.WaitGroup, client kubernetes.Interface) error {
	if err := netpolicy.Apply(netpolicy.DefaultTable, netpolicy.Ruleset{}); err != nil {
		return err
	}
	wg.Go(func() { netpolicy.Run(ctx, client, netpolicy.DefaultTable) })
	return nil
}
