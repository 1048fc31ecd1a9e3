package node

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quorumkeeper/etcd-operator/test/localcluster/netsetup"
)

// podRun is one Pod on this node: its sandbox (network namespace, volumes, hosts and
// resolv.conf files) and a supervisor per container.
type podRun struct {
	p   *provider
	ip  netip.Addr
	dir string

	mu         sync.Mutex
	pod        *corev1.Pod // spec as created; status is kept in the fields below
	startTime  metav1.Time
	sandboxErr string // why the sandbox is not ready yet, for the Pod's status
	sandboxUp  bool
	initDone   bool
	failed     bool    // an init container failed with restartPolicy Never
	end        *podEnd // the node stopped the Pod for good (eviction, node shutdown)
	containers []*containerRun
	inits      []*containerRun

	lastConditions map[corev1.PodConditionType]corev1.PodCondition

	vols   *podVolumes
	nsPath string
	cancel context.CancelFunc
	done   chan struct{}
}

// newPodRun runs pod as virtual-kubelet hands it over; declared is the same Pod as its owner
// wrote it (provider.declaredPod), whose variables that name a field of the Pod are worked out
// at every container start.
func newPodRun(p *provider, pod, declared *corev1.Pod, ip netip.Addr) *podRun {
	run := &podRun{p: p, pod: pod, ip: ip, dir: p.podDir(pod), startTime: metav1.Now(), done: make(chan struct{})}
	for i := range pod.Spec.InitContainers {
		run.inits = append(run.inits, newContainerRun(run, &pod.Spec.InitContainers[i], true, declared))
	}
	for i := range pod.Spec.Containers {
		run.containers = append(run.containers, newContainerRun(run, &pod.Spec.Containers[i], false, declared))
	}
	return run
}

// run sets up the sandbox (retrying, as a kubelet does, until it works or the Pod goes),
// runs the init containers in order, then supervises the containers until terminate.
func (r *podRun) run() {
	defer close(r.done)
	ctx, cancel := context.WithCancel(context.Background())
	r.mu.Lock()
	r.cancel = cancel
	r.mu.Unlock()
	defer cancel()

	if !r.setUpSandbox(ctx) {
		return
	}
	go r.keepVolumesInSync(ctx)
	for _, c := range r.inits {
		if !c.runToCompletion(ctx) {
			return
		}
	}
	r.mu.Lock()
	r.initDone = true
	r.mu.Unlock()
	r.changed()
	var wg sync.WaitGroup
	for _, c := range r.containers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.supervise(ctx)
		}()
	}
	wg.Wait()
}

func (r *podRun) setUpSandbox(ctx context.Context) bool {
	delay := time.Second
	for {
		err := r.trySandbox(ctx)
		r.mu.Lock()
		r.sandboxUp = err == nil
		r.sandboxErr = ""
		if err != nil {
			r.sandboxErr = err.Error()
		}
		r.mu.Unlock()
		r.changed()
		if err == nil {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(delay):
		}
		delay = min(2*delay, 10*time.Second)
	}
}

func (r *podRun) trySandbox(ctx context.Context) error {
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		return err
	}
	if r.nsPath == "" {
		nsPath, err := netsetup.AddPod(r.p.cfg.Network, r.p.netnsName(r.pod), r.ip)
		if err != nil {
			return fmt.Errorf("network: %w", err)
		}
		r.nsPath = nsPath
	}
	if err := r.writeNameFiles(); err != nil {
		return err
	}
	if r.vols == nil {
		vols, err := r.p.sources.prepareVolumes(ctx, r.pod, r.dir)
		if err != nil {
			return err
		}
		r.vols = vols
	}
	return nil
}

// keepVolumesInSync refreshes Secrets, ConfigMaps and tokens, so that a renewed certificate
// reaches a running container as it does under a kubelet.
func (r *podRun) keepVolumesInSync(ctx context.Context) {
	ticker := time.NewTicker(2 * time.Second)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			_ = r.vols.refreshAll(ctx) // a missing Secret keeps the old files, as a kubelet does
		}
	}
}

// writeNameFiles writes the Pod's /etc/hosts and /etc/resolv.conf.
func (r *podRun) writeNameFiles() error {
	pod := r.pod
	hostname := pod.Name
	if pod.Spec.Hostname != "" {
		hostname = pod.Spec.Hostname
	}
	names := hostname
	if pod.Spec.Subdomain != "" {
		names = fmt.Sprintf("%s.%s.%s.svc.%s %s", hostname, pod.Spec.Subdomain, pod.Namespace, clusterDomain, hostname)
	}
	hosts := fmt.Sprintf("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n%s\t%s\n", r.ip, names)
	search := []string{pod.Namespace + ".svc." + clusterDomain, "svc." + clusterDomain, clusterDomain}
	resolv := fmt.Sprintf("nameserver %s\nsearch %s\noptions ndots:5\n", r.p.cfg.HostIP, strings.Join(search, " "))
	if err := os.WriteFile(r.hostsFile(), []byte(hosts), 0o644); err != nil {
		return err
	}
	return os.WriteFile(r.resolvFile(), []byte(resolv), 0o644)
}

const clusterDomain = "cluster.local"

func (r *podRun) hostsFile() string  { return filepath.Join(r.dir, "hosts") }
func (r *podRun) resolvFile() string { return filepath.Join(r.dir, "resolv.conf") }

func (r *podRun) hostname() string {
	if r.pod.Spec.Hostname != "" {
		return r.pod.Spec.Hostname
	}
	return r.pod.Name
}

// terminate stops every container within the grace period, then removes the sandbox. It
// reports whether the Pod's supervisor has finished, i.e. nothing of the Pod runs any more.
func (r *podRun) terminate(ctx context.Context, grace time.Duration) (finished bool) {
	r.mu.Lock()
	cancel := r.cancel
	r.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	var wg sync.WaitGroup
	for _, c := range append(append([]*containerRun{}, r.inits...), r.containers...) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.stop(grace)
		}()
	}
	wg.Wait()
	select {
	case <-r.done:
		finished = true
	case <-ctx.Done():
	case <-time.After(grace + 5*time.Second):
	}
	r.tearDownSandbox()
	r.changed()
	return finished
}

func (r *podRun) tearDownSandbox() {
	if r.vols != nil {
		r.vols.teardown()
	}
	_ = netsetup.RemovePod(r.p.cfg.Network, r.p.netnsName(r.pod))
	_ = os.RemoveAll(r.dir)
}

// updateMetadata takes over the Pod's labels and annotations: the variables that name them
// get the new values at their container's next start (resolveFields).
func (r *podRun) updateMetadata(pod *corev1.Pod) {
	r.mu.Lock()
	r.pod.Labels = pod.Labels
	r.pod.Annotations = pod.Annotations
	r.mu.Unlock()
}

func (r *podRun) changed() {
	r.p.notifyChange(r.snapshot())
}

func gracePeriod(pod *corev1.Pod) time.Duration {
	switch {
	case pod.DeletionGracePeriodSeconds != nil:
		return time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second
	case pod.Spec.TerminationGracePeriodSeconds != nil:
		return time.Duration(*pod.Spec.TerminationGracePeriodSeconds) * time.Second
	}
	return 30 * time.Second
}
