// Package node is the local cluster's node agent: a Node in the API (through virtual-kubelet's
// node library) whose Pods run as local processes, each Pod in its own network namespace,
// with volumes, probes, restart policy, status, logs, exec and port-forward.
package node

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/node"
	"github.com/virtual-kubelet/virtual-kubelet/node/nodeutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/kubernetes"

	"github.com/quorumkeeper/etcd-operator/test/localcluster/netsetup"
)

// Config is one node agent.
type Config struct {
	NodeName string
	Zone     string // topology.kubernetes.io/zone
	Client   kubernetes.Interface
	Dir      string // this node's state: pods/<uid>/...

	Network netsetup.Config
	PodCIDR netip.Prefix // this node's share of the bridge network
	HostIP  netip.Addr   // the bridge address: the node's InternalIP, the apiserver and DNS
	APIPort int

	ListenPort      int    // kubelet API (logs, exec, port-forward) on HostIP
	ServingCertFile string // its serving certificate
	ServingKeyFile  string
	ClientCAFile    string // CA of the apiserver's kubelet-client certificate: nobody else gets in

	ImagesFile string // image map, read at every container start
	Marker     string // KEY=VALUE in every process's environment, for the sweep
}

// Agent is a running node agent.
type Agent struct {
	node     *nodeutil.Node
	provider *provider
	crashed  atomic.Bool // set by Crash: stop the Pods as a machine failure would
}

// New registers the node's machinery; Run starts it.
func New(cfg Config) (*Agent, error) {
	tlsConfig, err := serverTLS(cfg)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	a := &Agent{}
	n, err := nodeutil.NewNode(cfg.NodeName,
		func(pc nodeutil.ProviderConfig) (nodeutil.Provider, node.NodeProvider, error) {
			a.provider = newProvider(cfg, volumeSources{client: cfg.Client, secrets: pc.Secrets, configMaps: pc.ConfigMaps})
			describeNode(pc.Node, cfg)
			return a.provider, nil, nil
		},
		func(nc *nodeutil.NodeConfig) error {
			nc.Client = cfg.Client
			nc.HTTPListenAddr = net.JoinHostPort(cfg.HostIP.String(), strconv.Itoa(cfg.ListenPort))
			nc.TLSConfig = tlsConfig
			nc.Handler = mux
			nc.NumWorkers = 4
			nc.StreamIdleTimeout = 30 * time.Minute
			nc.StreamCreationTimeout = 30 * time.Second
			return nil
		},
		nodeutil.AttachProviderRoutes(mux),
	)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", cfg.NodeName, err)
	}
	a.node = n
	return a, nil
}

// Run serves until ctx ends, then stops every Pod of the node: each within its grace
// period, or, after Crash, at once.
func (a *Agent) Run(ctx context.Context) error {
	err := a.node.Run(ctx)
	stopCtx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a.provider.stopAll(stopCtx, a.crashed.Load())
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// Crash makes the end of Run kill the node's containers with no grace period, as the loss
// of the machine would; call it before ending Run's context.
func (a *Agent) Crash() { a.crashed.Store(true) }

// WaitReady waits until the Node is registered and Ready.
func (a *Agent) WaitReady(ctx context.Context, timeout time.Duration) error {
	return a.node.WaitReady(ctx, timeout)
}

func serverTLS(cfg Config) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(cfg.ServingCertFile, cfg.ServingKeyFile)
	if err != nil {
		return nil, fmt.Errorf("node %s serving certificate: %w", cfg.NodeName, err)
	}
	caPEM, err := os.ReadFile(cfg.ClientCAFile)
	if err != nil {
		return nil, fmt.Errorf("node %s client CA: %w", cfg.NodeName, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("node %s client CA %s holds no certificate", cfg.NodeName, cfg.ClientCAFile)
	}
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientCAs:    pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		MinVersion:   tls.VersionTLS12,
	}, nil
}

// describeNode fills the Node object: the labels scheduling uses, the address and port the
// apiserver reaches the agent on, and room for the Pods the tests run.
func describeNode(n *corev1.Node, cfg Config) {
	n.Labels = map[string]string{
		corev1.LabelHostname:               cfg.NodeName,
		corev1.LabelTopologyZone:           cfg.Zone,
		corev1.LabelOSStable:               "linux",
		corev1.LabelArchStable:             "amd64",
		"node.kubernetes.io/local-cluster": "true",
	}
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:              resource.MustParse("8"),
		corev1.ResourceMemory:           resource.MustParse("16Gi"),
		corev1.ResourcePods:             resource.MustParse("110"),
		corev1.ResourceEphemeralStorage: resource.MustParse("50Gi"),
	}
	n.Status.Capacity = capacity
	n.Status.Allocatable = capacity
	n.Status.Addresses = []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: cfg.HostIP.String()},
		{Type: corev1.NodeHostName, Address: cfg.NodeName},
	}
	n.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(cfg.ListenPort)
	n.Status.NodeInfo.KubeletVersion = "v1.37.2-local"
	n.Status.NodeInfo.OperatingSystem = "linux"
	n.Status.NodeInfo.Architecture = "amd64"
	n.Status.NodeInfo.ContainerRuntimeVersion = "local-process://1"
	n.Spec.PodCIDR = cfg.PodCIDR.String()
	n.Spec.PodCIDRs = []string{cfg.PodCIDR.String()}
}
