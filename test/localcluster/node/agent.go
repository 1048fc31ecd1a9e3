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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	// PullDir caches the images pulled from a registry on the loopback (an image the map
	// does not have); "" = no pulling, such an image is ErrImagePull.
	PullDir string
	Marker  string // KEY=VALUE in every process's environment, for the sweep
}

// Agent is a running node agent.
type Agent struct {
	node     *nodeutil.Node
	provider *provider
	crashed  atomic.Bool // set by Crash: stop the Pods as a machine failure would

	// status takes the Node's status to virtual-kubelet's node controller, which writes it
	// and keeps writing it; spec is the Node as described, each status is made from it.
	status      *node.NaiveNodeProviderV2
	spec        *corev1.Node
	readyPosted chan struct{}
}

// New registers the node's machinery; Run starts it.
func New(cfg Config) (*Agent, error) {
	tlsConfig, err := serverTLS(cfg)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	// A node provider of its own, rather than nodeutil's, which can only say Ready once: a
	// graceful shutdown says NotReady first (Shutdown).
	a := &Agent{status: node.NewNaiveNodeProvider(), readyPosted: make(chan struct{})}
	n, err := nodeutil.NewNode(cfg.NodeName,
		func(pc nodeutil.ProviderConfig) (nodeutil.Provider, node.NodeProvider, error) {
			a.provider = newProvider(cfg, volumeSources{client: cfg.Client, secrets: pc.Secrets, configMaps: pc.ConfigMaps}, pc.Pods)
			describeNode(pc.Node, cfg)
			a.spec = pc.Node
			return a.provider, a.status, nil
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
	go a.postReady(ctx)
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
	if err := a.node.WaitReady(ctx, timeout); err != nil {
		return err
	}
	select {
	case <-a.readyPosted:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// postReady says the Node is Ready once its controllers run, as nodeutil does for a node
// with no provider of its own.
func (a *Agent) postReady(ctx context.Context) {
	select {
	case <-ctx.Done():
		return
	case <-a.node.Ready():
	}
	if err := a.reportReady(ctx, true, "KubeletReady", "kubelet is posting ready status"); err == nil {
		close(a.readyPosted)
	}
}

// reportReady sets the Node's Ready condition, with a kubelet's reason and message.
func (a *Agent) reportReady(ctx context.Context, ready bool, reason, message string) error {
	n := a.spec.DeepCopy()
	n.Status.Phase = corev1.NodeRunning
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	now := metav1.Now()
	for i, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			n.Status.Conditions[i] = corev1.NodeCondition{Type: corev1.NodeReady, Status: status, Reason: reason, Message: message,
				LastHeartbeatTime: now, LastTransitionTime: now}
		}
	}
	return a.status.UpdateStatus(ctx, n)
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
