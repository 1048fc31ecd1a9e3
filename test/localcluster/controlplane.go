// Package localcluster runs a real Kubernetes control plane (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler) as child processes on this machine, issues its
// certificates, and cleans up after crashes. See DESIGN.md for addresses and layout.
package localcluster

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

const (
	// DefaultEtcdClientPort and DefaultEtcdPeerPort are off etcd's usual 2379/2380 so that
	// the apiserver's own etcd never collides with an etcd a test runs on the host.
	DefaultEtcdClientPort = 2479
	DefaultEtcdPeerPort   = 2480
	// DefaultStartTimeout bounds the whole of Start; a cold kube-apiserver on 2 cores needs
	// most of a minute before /readyz turns ok.
	DefaultStartTimeout = 3 * time.Minute

	serviceAccountIssuer = "https://kubernetes.default.svc.cluster.local"
	pollInterval         = 300 * time.Millisecond
)

// Config describes where the control plane keeps its state and where it listens.
type Config struct {
	Dir         string     // state dir, e.g. /var/lib/etcd-operator-localcluster; everything goes below it
	KubeBinDir  string     // directory with kube-apiserver, kube-controller-manager, kube-scheduler
	EtcdBin     string     // path of the etcd binary for the apiserver's own etcd
	APIAddress  netip.Addr // the only address the apiserver binds to (10.213.0.1 in the real cluster)
	APIPort     int        // 6443 in the real cluster
	ServiceCIDR string     // "10.214.0.0/16"
	Marker      string     // "LOCALCLUSTER_DIR=<Dir>": put into every child's environment; defaulted from Dir

	EtcdClientPort int           // on 127.0.0.1; 0 means DefaultEtcdClientPort
	EtcdPeerPort   int           // on 127.0.0.1; 0 means DefaultEtcdPeerPort
	StartTimeout   time.Duration // 0 means DefaultStartTimeout
}

// ControlPlane is a running control plane. Stop it when done.
type ControlPlane struct {
	cfg        Config
	pki        *pki
	files      clusterFiles
	restConfig *rest.Config

	mu       sync.Mutex // guards children and serializes issuing certificates
	children []*child
}

// clusterFiles are the certificates, keys and kubeconfigs the components are started with.
type clusterFiles struct {
	apiserverCert, apiserverKey         string
	kubeletClientCert, kubeletClientKey string
	saPrivateKey, saPublicKey           string
	adminKubeconfig                     string
	controllerManagerKubeconfig         string
	schedulerKubeconfig                 string
}

// Start brings up etcd, kube-apiserver, kube-controller-manager and kube-scheduler and
// returns once the apiserver is ready and kube-controller-manager has published the cluster
// CA into the default namespace. Existing PKI and etcd data in cfg.Dir are reused, so a
// kubeconfig from an earlier run stays valid. Leftovers of a crashed run must be removed
// with Sweep before. On error, every child started so far is stopped again.
func Start(ctx context.Context, cfg Config) (*ControlPlane, error) {
	cfg, err := withDefaults(cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.StartTimeout)
	defer cancel()

	cp := &ControlPlane{cfg: cfg}
	if err := cp.prepareFiles(); err != nil {
		return nil, err
	}
	if err := cp.startAll(ctx); err != nil {
		cp.Stop()
		return nil, err
	}
	return cp, nil
}

func withDefaults(cfg Config) (Config, error) {
	if !filepath.IsAbs(cfg.Dir) || filepath.Clean(cfg.Dir) == "/" {
		return cfg, fmt.Errorf("localcluster: Dir must be an absolute path below /, got %q", cfg.Dir)
	}
	cfg.Dir = filepath.Clean(cfg.Dir)
	if !cfg.APIAddress.IsValid() || cfg.APIPort <= 0 || cfg.APIPort > 65535 {
		return cfg, fmt.Errorf("localcluster: APIAddress and APIPort are required")
	}
	if _, err := firstServiceIP(cfg.ServiceCIDR); err != nil {
		return cfg, err
	}
	for _, bin := range []string{cfg.EtcdBin, cfg.kubeBin("kube-apiserver"),
		cfg.kubeBin("kube-controller-manager"), cfg.kubeBin("kube-scheduler")} {
		if _, err := os.Stat(bin); err != nil {
			return cfg, fmt.Errorf("localcluster: binary missing: %w", err)
		}
	}
	if cfg.Marker == "" {
		cfg.Marker = MarkerFor(cfg.Dir)
	}
	if cfg.Marker != MarkerFor(cfg.Dir) {
		// Sweep(Dir) could not find children carrying any other marker.
		return cfg, fmt.Errorf("localcluster: Marker must be %q, got %q", MarkerFor(cfg.Dir), cfg.Marker)
	}
	if cfg.EtcdClientPort == 0 {
		cfg.EtcdClientPort = DefaultEtcdClientPort
	}
	if cfg.EtcdPeerPort == 0 {
		cfg.EtcdPeerPort = DefaultEtcdPeerPort
	}
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = DefaultStartTimeout
	}
	return cfg, nil
}

// MarkerFor is the environment entry that tags every process of the cluster in dir; Sweep
// looks for exactly this entry.
func MarkerFor(dir string) string { return markerPrefix + dir }

const markerPrefix = "LOCALCLUSTER_DIR="

func (cfg Config) kubeBin(name string) string { return filepath.Join(cfg.KubeBinDir, name) }

func (cfg Config) apiServerURL() string {
	return "https://" + netip.AddrPortFrom(cfg.APIAddress, uint16(cfg.APIPort)).String()
}

func (cfg Config) etcdClientURL() string {
	return "http://127.0.0.1:" + strconv.Itoa(cfg.EtcdClientPort)
}

func (cfg Config) etcdPeerURL() string {
	return "http://127.0.0.1:" + strconv.Itoa(cfg.EtcdPeerPort)
}

func (cfg Config) logDir() string { return filepath.Join(cfg.Dir, "logs") }

func firstServiceIP(cidr string) (netip.Addr, error) {
	prefix, err := netip.ParsePrefix(cidr)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("localcluster: ServiceCIDR: %w", err)
	}
	return prefix.Masked().Addr().Next(), nil
}

// prepareFiles creates (or reuses) all certificates and writes the kubeconfigs.
func (cp *ControlPlane) prepareFiles() error {
	for _, dir := range []string{cp.cfg.Dir, cp.cfg.logDir()} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	p, err := loadOrCreatePKI(filepath.Join(cp.cfg.Dir, "pki"))
	if err != nil {
		return err
	}
	cp.pki = p
	if err := cp.issueComponentCerts(); err != nil {
		return err
	}
	if err := cp.writeKubeconfigs(); err != nil {
		return err
	}
	cp.restConfig, err = clientcmd.BuildConfigFromFlags("", cp.files.adminKubeconfig)
	if err != nil {
		return err
	}
	cp.restConfig.Proxy = noProxy
	return nil
}

func (cp *ControlPlane) issueComponentCerts() error {
	serviceIP, _ := firstServiceIP(cp.cfg.ServiceCIDR) // validated in withDefaults
	f := &cp.files
	var err error
	f.apiserverCert, f.apiserverKey, err = cp.pki.ensureLeaf(serverSpec("apiserver", "kube-apiserver",
		[]netip.Addr{cp.cfg.APIAddress, netip.MustParseAddr("127.0.0.1"), serviceIP},
		[]string{"kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc.cluster.local", "localhost"}))
	if err != nil {
		return err
	}
	f.kubeletClientCert, f.kubeletClientKey, err = cp.pki.ensureLeaf(clientSpec(
		"apiserver-kubelet-client", "kube-apiserver-kubelet-client", "system:masters"))
	if err != nil {
		return err
	}
	f.saPrivateKey, f.saPublicKey, err = cp.pki.ensureServiceAccountKey()
	return err
}

// writeKubeconfigs writes one kubeconfig per identity; the admin one is Dir/kubeconfig, the
// components' ones live next to their keys in Dir/pki.
func (cp *ControlPlane) writeKubeconfigs() error {
	identities := []struct {
		spec certSpec
		file *string
		path string
	}{
		{clientSpec("admin", "admin", "system:masters"), &cp.files.adminKubeconfig,
			filepath.Join(cp.cfg.Dir, "kubeconfig")},
		{clientSpec("kube-controller-manager", "system:kube-controller-manager"),
			&cp.files.controllerManagerKubeconfig, filepath.Join(cp.pki.dir, "kube-controller-manager.kubeconfig")},
		{clientSpec("kube-scheduler", "system:kube-scheduler"),
			&cp.files.schedulerKubeconfig, filepath.Join(cp.pki.dir, "kube-scheduler.kubeconfig")},
	}
	for _, id := range identities {
		certFile, keyFile, err := cp.pki.ensureLeaf(id.spec)
		if err != nil {
			return err
		}
		if err := writeKubeconfig(id.path, cp.cfg.apiServerURL(), cp.pki.caFile(), certFile, keyFile, id.spec.cn); err != nil {
			return err
		}
		*id.file = id.path
	}
	return nil
}

// startAll starts the components in dependency order and waits for each to be usable.
func (cp *ControlPlane) startAll(ctx context.Context) error {
	etcd, err := cp.startChild("etcd", cp.cfg.EtcdBin, cp.etcdArgs())
	if err != nil {
		return err
	}
	if err := cp.waitUntil(ctx, etcd, "etcd is healthy", cp.etcdHealthy); err != nil {
		return err
	}
	client, err := cp.startAPIServer(ctx)
	if err != nil {
		return err
	}
	kcm, err := cp.startChild("kube-controller-manager", cp.cfg.kubeBin("kube-controller-manager"), cp.controllerManagerArgs())
	if err != nil {
		return err
	}
	if _, err := cp.startChild("kube-scheduler", cp.cfg.kubeBin("kube-scheduler"), cp.schedulerArgs()); err != nil {
		return err
	}
	return cp.waitUntil(ctx, kcm, "namespace default has ConfigMap kube-root-ca.crt", rootCAPublished(client))
}

func (cp *ControlPlane) etcdArgs() []string {
	return []string{
		"--name=apiserver-etcd",
		"--data-dir=" + filepath.Join(cp.cfg.Dir, "etcd"),
		"--listen-client-urls=" + cp.cfg.etcdClientURL(),
		"--advertise-client-urls=" + cp.cfg.etcdClientURL(),
		"--listen-peer-urls=" + cp.cfg.etcdPeerURL(),
		"--initial-advertise-peer-urls=" + cp.cfg.etcdPeerURL(),
		"--initial-cluster=apiserver-etcd=" + cp.cfg.etcdPeerURL(),
		"--initial-cluster-state=new",
	}
}

func (cp *ControlPlane) apiserverArgs() []string {
	addr := cp.cfg.APIAddress.String()
	f := cp.files
	return []string{
		"--bind-address=" + addr,
		"--advertise-address=" + addr,
		"--secure-port=" + strconv.Itoa(cp.cfg.APIPort),
		"--etcd-servers=" + cp.cfg.etcdClientURL(),
		"--service-cluster-ip-range=" + cp.cfg.ServiceCIDR,
		"--service-account-issuer=" + serviceAccountIssuer,
		"--service-account-key-file=" + f.saPublicKey,
		"--service-account-signing-key-file=" + f.saPrivateKey,
		"--client-ca-file=" + cp.pki.caFile(),
		"--tls-cert-file=" + f.apiserverCert,
		"--tls-private-key-file=" + f.apiserverKey,
		"--kubelet-client-certificate=" + f.kubeletClientCert,
		"--kubelet-client-key=" + f.kubeletClientKey,
		// Node agents serve certificates from IssueServingCert, so they can be verified.
		"--kubelet-certificate-authority=" + cp.pki.caFile(),
		"--kubelet-preferred-address-types=InternalIP",
		"--authorization-mode=Node,RBAC",
		"--allow-privileged=true",
		"--endpoint-reconciler-type=" + endpointReconciler(cp.cfg.APIAddress),
		"--profiling=false",
		// Only used if a serving certificate were missing; keeps it out of /var/run/kubernetes.
		"--cert-dir=" + filepath.Join(cp.pki.dir, "generated"),
	}
}

// endpointReconciler is "lease" (the production default) except for a loopback APIAddress,
// which the apiserver refuses to publish as the kubernetes Service's endpoint; tests that
// run on 127.0.0.1 then get no endpoints for the kubernetes Service, which nothing here uses.
func endpointReconciler(apiAddress netip.Addr) string {
	if apiAddress.IsLoopback() {
		return "none"
	}
	return "lease"
}

func (cp *ControlPlane) controllerManagerArgs() []string {
	return []string{
		"--kubeconfig=" + cp.files.controllerManagerKubeconfig,
		"--service-account-private-key-file=" + cp.files.saPrivateKey,
		"--root-ca-file=" + cp.pki.caFile(),
		"--use-service-account-credentials=true",
		"--controllers=*",
		"--cluster-signing-cert-file=" + cp.pki.caFile(),
		"--cluster-signing-key-file=" + cp.pki.path("ca", "key"),
		"--service-cluster-ip-range=" + cp.cfg.ServiceCIDR,
		"--cluster-name=localcluster",
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port=0", // nothing scrapes it; a fixed port could collide between clusters
		"--profiling=false",
	}
}

func (cp *ControlPlane) schedulerArgs() []string {
	return []string{
		"--kubeconfig=" + cp.files.schedulerKubeconfig,
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port=0",
		"--profiling=false",
	}
}

// pollingClient is an admin client with a short per-request timeout, so that one hung
// request cannot eat the whole start budget.
func (cp *ControlPlane) pollingClient() (*kubernetes.Clientset, error) {
	cfg := cp.RESTConfig()
	cfg.Timeout = 5 * time.Second
	return kubernetes.NewForConfig(cfg)
}

func readyzOK(client *kubernetes.Clientset) func(context.Context) error {
	return func(ctx context.Context) error {
		_, err := client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err
	}
}

func rootCAPublished(client *kubernetes.Clientset) func(context.Context) error {
	return func(ctx context.Context) error {
		if _, err := client.CoreV1().Namespaces().Get(ctx, metav1.NamespaceDefault, metav1.GetOptions{}); err != nil {
			return err
		}
		_, err := client.CoreV1().ConfigMaps(metav1.NamespaceDefault).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		return err
	}
}

// waitUntil polls check until it succeeds. It fails early when any child has exited and on
// ctx's deadline, both times with the tail of the relevant component's log, because that is
// where the reason is.
func (cp *ControlPlane) waitUntil(ctx context.Context, blame *child, what string, check func(context.Context) error) error {
	ticker := time.NewTicker(pollInterval)
	defer ticker.Stop()
	var lastErr error
	for {
		if dead := cp.exitedChild(); dead != nil {
			return fmt.Errorf("localcluster: %s exited (%w) while waiting until %s; %s:\n%s",
				dead.name, dead.waitErr, what, dead.logPath, logTail(dead.logPath))
		}
		if lastErr = check(ctx); lastErr == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("localcluster: waiting until %s: %w (last error: %w); %s:\n%s",
				what, ctx.Err(), lastErr, blame.logPath, logTail(blame.logPath))
		case <-ticker.C:
		}
	}
}

func (cp *ControlPlane) exitedChild() *child {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	for _, c := range cp.children {
		if c.hasExited() {
			return c
		}
	}
	return nil
}

// KubeconfigPath is the admin kubeconfig (Dir/kubeconfig). Certificates are embedded, so it
// can be copied elsewhere.
func (cp *ControlPlane) KubeconfigPath() string { return cp.files.adminKubeconfig }

// RESTConfig returns a fresh copy of the admin client configuration.
func (cp *ControlPlane) RESTConfig() *rest.Config { return rest.CopyConfig(cp.restConfig) }

// CAFile is the cluster CA: it signs the apiserver's serving certificate, every client
// certificate and the node agents' serving certificates.
func (cp *ControlPlane) CAFile() string { return cp.pki.caFile() }

// KubeletClientCert is the client certificate the apiserver presents to node agents; they
// should trust CAFile for client authentication.
func (cp *ControlPlane) KubeletClientCert() (certFile, keyFile string) {
	return cp.files.kubeletClientCert, cp.files.kubeletClientKey
}

// IssueServingCert issues (or reuses, when it still fits) a serving certificate signed by the
// cluster CA, stored as Dir/pki/serving-<name>.{crt,key}.
func (cp *ControlPlane) IssueServingCert(name string, ips []netip.Addr, dnsNames []string) (certFile, keyFile string, err error) {
	if name == "" || filepath.Base(name) != name {
		return "", "", fmt.Errorf("localcluster: invalid certificate name %q", name)
	}
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return cp.pki.ensureLeaf(serverSpec("serving-"+name, name, ips, dnsNames))
}

// Stop terminates every component (SIGTERM, SIGKILL after stopGrace) and waits for them.
// It is safe to call more than once.
func (cp *ControlPlane) Stop() {
	cp.mu.Lock()
	children := cp.children
	cp.children = nil
	cp.mu.Unlock()
	stopChildren(children)
}

// RestartAPIServer stops kube-apiserver (SIGTERM, as a rolling restart of a control plane
// does) and starts it again with the same flags, then waits until /readyz is ok: a fault the
// robustness scenarios inject, since every watch and client of the cluster must survive it.
func (cp *ControlPlane) RestartAPIServer(ctx context.Context) error {
	cp.mu.Lock()
	var old *child
	kept := cp.children[:0:0]
	for _, c := range cp.children {
		if c.name == "kube-apiserver" {
			old = c
			continue
		}
		kept = append(kept, c)
	}
	cp.children = kept
	cp.mu.Unlock()
	if old == nil {
		return fmt.Errorf("localcluster: no kube-apiserver to restart")
	}
	terminate([]*child{old})
	_, err := cp.startAPIServer(ctx)
	return err
}

// startAPIServer starts kube-apiserver and waits until its /readyz is ok; it returns the
// polling client it waited with.
func (cp *ControlPlane) startAPIServer(ctx context.Context) (*kubernetes.Clientset, error) {
	apiserver, err := cp.startChild("kube-apiserver", cp.cfg.kubeBin("kube-apiserver"), cp.apiserverArgs())
	if err != nil {
		return nil, err
	}
	client, err := cp.pollingClient()
	if err != nil {
		return nil, err
	}
	return client, cp.waitUntil(ctx, apiserver, "kube-apiserver /readyz is ok", readyzOK(client))
}

// stopGrace is how long a component gets to exit after SIGTERM before it is killed.
const stopGrace = 10 * time.Second

// child is one component process.
type child struct {
	name    string
	logPath string
	cmd     *exec.Cmd
	exited  chan struct{} // closed once cmd.Wait has returned
	waitErr error         // cmd.Wait's result; read only after exited is closed
}

func (c *child) hasExited() bool {
	select {
	case <-c.exited:
		return true
	default:
		return false
	}
}

// startChild starts bin with its output appended to Dir/logs/<name>.log and registers it
// for Stop. The child gets its own process group (a terminal's Ctrl-C goes to the test, which
// then stops the cluster in order) and dies with the thread that started it (Pdeathsig), and
// carries the marker so that Sweep finds it after a kill -9 of this process.
func (cp *ControlPlane) startChild(name, bin string, args []string) (*child, error) {
	logPath := filepath.Join(cp.cfg.logDir(), name+".log")
	logFile, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logFile.Close() // the child holds its own descriptor
	_, _ = fmt.Fprintf(logFile, "=== %s: starting %s %s\n", time.Now().Format(time.RFC3339), bin, strings.Join(args, " "))

	cmd := exec.Command(bin, args...)
	cmd.Dir = cp.cfg.Dir
	cmd.Env = childEnv(os.Environ(), cp.cfg.Marker)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("localcluster: starting %s: %w", name, err)
	}
	c := &child{name: name, logPath: logPath, cmd: cmd, exited: make(chan struct{})}
	go func() {
		c.waitErr = cmd.Wait()
		close(c.exited)
	}()
	cp.mu.Lock()
	cp.children = append(cp.children, c)
	cp.mu.Unlock()
	return c, nil
}

// childEnv is env with exactly one marker entry (an inherited marker of another cluster
// would make that cluster's Sweep kill our children) and without proxy settings, so that
// the components never route cluster traffic to a proxy elsewhere.
func childEnv(env []string, marker string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if name+"=" == markerPrefix || isProxyVariable(name) {
			continue
		}
		out = append(out, kv)
	}
	return append(out, marker)
}

func isProxyVariable(name string) bool {
	switch strings.ToUpper(name) {
	case "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY":
		return true
	}
	return false
}

// noProxy keeps HTTP clients of this package from using a proxy named in the environment.
func noProxy(*http.Request) (*url.URL, error) { return nil, nil }

// etcdHealthy asks etcd's /health endpoint, which says "true" once it has a leader.
func (cp *ControlPlane) etcdHealthy(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cp.cfg.etcdClientURL()+"/health", nil)
	if err != nil {
		return err
	}
	client := &http.Client{Transport: &http.Transport{Proxy: noProxy}}
	defer client.CloseIdleConnections()
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"health":"true"`) {
		return fmt.Errorf("etcd /health: %s %s", resp.Status, body)
	}
	return nil
}

// stopChildren stops the children in reverse start order, in stages: kube-controller-manager
// and kube-scheduler together, then kube-apiserver while its etcd is still there (with etcd
// gone it would hang in shutdown until killed), then etcd once it has no clients left.
func stopChildren(children []*child) {
	var clients, apiserver, etcd []*child
	for _, c := range children {
		switch c.name {
		case "etcd":
			etcd = append(etcd, c)
		case "kube-apiserver":
			apiserver = append(apiserver, c)
		default:
			clients = append(clients, c)
		}
	}
	for _, stage := range [][]*child{clients, apiserver, etcd} {
		terminate(stage)
	}
}

// terminate sends SIGTERM, gives the children stopGrace together, then kills the rest and
// waits for them. Signals go through os.Process, which never hits a recycled PID once a
// child has been reaped.
func terminate(children []*child) {
	for _, c := range children {
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
	}
	ctx, cancel := context.WithTimeout(context.Background(), stopGrace)
	defer cancel()
	for _, c := range children {
		select {
		case <-c.exited:
		case <-ctx.Done():
		}
	}
	for _, c := range children {
		if !c.hasExited() {
			_ = c.cmd.Process.Kill()
		}
	}
	killed, cancelKilled := context.WithTimeout(context.Background(), stopGrace)
	defer cancelKilled()
	for _, c := range children {
		select {
		case <-c.exited:
		case <-killed.Done(): // SIGKILL cannot be ignored; this only guards against a stuck kernel
		}
	}
}

// logTail returns the last lines of a log for error messages.
func logTail(path string) string {
	const maxBytes, maxLines = 16 << 10, 40
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(cannot read log: %v)", err)
	}
	defer f.Close()
	if info, err := f.Stat(); err == nil && info.Size() > maxBytes {
		_, _ = f.Seek(info.Size()-maxBytes, io.SeekStart)
	}
	data, _ := io.ReadAll(f)
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > maxLines {
		lines = lines[len(lines)-maxLines:]
	}
	return strings.Join(lines, "\n")
}

// writeKubeconfig writes a kubeconfig with the CA and the client pair embedded.
func writeKubeconfig(path, server, caFile, certFile, keyFile, user string) error {
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return err
	}
	cert, err := os.ReadFile(certFile)
	if err != nil {
		return err
	}
	key, err := os.ReadFile(keyFile)
	if err != nil {
		return err
	}
	const name = "localcluster"
	kc := clientcmdapi.NewConfig()
	kc.Clusters[name] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	kc.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: cert, ClientKeyData: key}
	kc.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: user}
	kc.CurrentContext = name
	return clientcmd.WriteToFile(*kc, path)
}
