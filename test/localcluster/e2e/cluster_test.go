package e2e

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

var (
	podNetwork = netip.MustParsePrefix("10.213.0.0/16")
	dnsServer  = "10.213.0.1:53"
)

// A serving Pod gets an address on the bridge network, turns Ready through its HTTP readiness
// probe and is found by name: its hostname.subdomain from the host through the cluster's DNS
// server, its Service from another Pod, which then fetches a page from it.
func TestPodNetworkDNSAndService(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	ctx := context.Background()

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "www"}, Data: map[string]string{"index.txt": "hello from web"}}
	if _, err := client.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "websvc"},
		Spec: corev1.ServiceSpec{
			ClusterIP: corev1.ClusterIPNone,
			Selector:  map[string]string{"app": "web"},
			Ports:     []corev1.ServicePort{{Name: "http", Port: 8080}},
		},
	}
	if _, err := client.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	web := servingPod("web")
	web.Spec.Hostname, web.Spec.Subdomain = "web", "websvc"
	createPod(t, ns, web)
	client1 := createPod(t, ns, toolboxPod("client", "sleep", "600"))

	pod := waitRunningReady(t, ns, "web")
	ip, err := netip.ParseAddr(pod.Status.PodIP)
	if err != nil || !podNetwork.Contains(ip) {
		t.Fatalf("pod IP %q is not in %s (%v)", pod.Status.PodIP, podNetwork, err)
	}
	t.Logf("web runs on %s with IP %s", pod.Spec.NodeName, ip)

	// From the host, through the cluster's DNS server only.
	resolver := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, dnsServer)
	}}
	fqdn := fmt.Sprintf("web.websvc.%s.svc.cluster.local.", ns)
	eventually(t, 30*time.Second, fqdn+" to resolve to "+ip.String(), func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		addrs, err := resolver.LookupHost(ctx, fqdn)
		if err != nil {
			return err
		}
		if !slices.Equal(addrs, []string{ip.String()}) {
			return fmt.Errorf("got %v", addrs)
		}
		return nil
	}, nil)

	// From another Pod, by the Service's short name (resolv.conf's search path).
	waitRunningReady(t, ns, client1.Name)
	eventually(t, 30*time.Second, "websvc to resolve in pod client", func() error {
		res := kubectlRun(ns, "exec", "client", "--", toolbox, "resolve", "websvc")
		if res.code != 0 {
			return fmt.Errorf("%s", res)
		}
		if got := strings.Fields(res.stdout); !slices.Equal(got, []string{ip.String()}) {
			return fmt.Errorf("resolved to %v, want [%s]", got, ip)
		}
		return nil
	}, nil)
	if got := execIn(t, ns, "client", toolbox, "resolve", fqdn); strings.TrimSpace(got) != ip.String() {
		t.Errorf("%s resolved to %q in pod client, want %s", fqdn, got, ip)
	}
	if got := execIn(t, ns, "client", toolbox, "get", "http://websvc:8080/index.txt"); got != "hello from web" {
		t.Errorf("GET http://websvc:8080/index.txt from pod client = %q, want %q", got, "hello from web")
	}
	if got := execIn(t, ns, "client", toolbox, "get", "http://web.websvc:8080/healthz"); got != "ok" {
		t.Errorf("GET http://web.websvc:8080/healthz from pod client = %q, want ok", got)
	}
}

// servingPod is a toolbox serving /www (ConfigMap www) on :8080 with an HTTP readiness probe.
func servingPod(name string) *corev1.Pod {
	pod := toolboxPod(name, "serve", ":8080", "/www")
	pod.Spec.Volumes = []corev1.Volume{{Name: "www", VolumeSource: corev1.VolumeSource{
		ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "www"}},
	}}}
	ctr := &pod.Spec.Containers[0]
	ctr.Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}
	ctr.VolumeMounts = []corev1.VolumeMount{{Name: "www", MountPath: "/www"}}
	ctr.ReadinessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("http")}},
		PeriodSeconds: 1,
	}
	return pod
}

// Data written to a claim outlives the Pod: a new Pod with the same claim reads it back.
// The Pod runs as a non-root user whose primary group is the fsGroup, since exec'd commands
// get no supplementary groups.
func TestPersistentVolumeSurvivesPodDelete(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	ctx := context.Background()
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("16Mi")}},
		},
	}
	if _, err := client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	newPod := func() *corev1.Pod {
		pod := toolboxPod("holder", "sleep", "600")
		pod.Spec.SecurityContext = &corev1.PodSecurityContext{
			RunAsUser: ptr(int64(1000)), RunAsGroup: ptr(int64(2000)), FSGroup: ptr(int64(2000)),
		}
		pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"},
		}}}
		pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
		return pod
	}

	createPod(t, ns, newPod())
	first := waitRunningReady(t, ns, "holder")
	execIn(t, ns, "holder", toolbox, "write", "/data/greeting", "kept across pods")
	if err := client.CoreV1().Pods(ns).Delete(ctx, "holder", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPodGone(t, ns, "holder")

	createPod(t, ns, newPod())
	second := waitRunningReady(t, ns, "holder")
	if second.UID == first.UID {
		t.Fatalf("the second pod has the first one's UID %s", first.UID)
	}
	if got := execIn(t, ns, "holder", toolbox, "cat", "/data/greeting"); got != "kept across pods" {
		t.Errorf("after recreating the pod /data/greeting = %q, want %q", got, "kept across pods")
	}
	bound, err := client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if bound.Status.Phase != corev1.ClaimBound {
		t.Errorf("claim phase %s, want Bound", bound.Status.Phase)
	}
	t.Logf("pod 1 on %s, pod 2 on %s, volume %s", first.Spec.NodeName, second.Spec.NodeName, bound.Spec.VolumeName)
}

// An update of a Secret reaches the file of a running Pod that mounts it.
func TestSecretUpdateReachesPod(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	ctx := context.Background()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds"}, StringData: map[string]string{"token": "one"}}
	if _, err := client.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := toolboxPod("reader", "sleep", "600")
	pod.Spec.Volumes = []corev1.Volume{{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "creds"}}}}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "creds", MountPath: "/creds", ReadOnly: true}}
	createPod(t, ns, pod)
	waitRunningReady(t, ns, "reader")
	if got := execIn(t, ns, "reader", toolbox, "cat", "/creds/token"); got != "one" {
		t.Fatalf("/creds/token = %q, want one", got)
	}

	current, err := client.CoreV1().Secrets(ns).Get(ctx, "creds", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	current.Data = map[string][]byte{"token": []byte("two")}
	if _, err := client.CoreV1().Secrets(ns).Update(ctx, current, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	eventually(t, 30*time.Second, "the updated secret in pod reader", func() error {
		res := kubectlRun(ns, "exec", "reader", "--", toolbox, "cat", "/creds/token")
		if res.code != 0 || res.stdout != "two" {
			return fmt.Errorf("/creds/token: %s", res)
		}
		return nil
	}, func() string { return describePod(ns, "reader") })
	t.Logf("the update arrived within %s", time.Since(began).Round(100*time.Millisecond))
}

// kubectl logs (also --previous after a restart), exec (output and exit code) and
// port-forward work against Pods of the local cluster.
func TestKubectlLogsExecPortForward(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	ctx := context.Background()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "www"}, Data: map[string]string{"index.txt": "hello"}}
	if _, err := client.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createPod(t, ns, servingPod("web"))
	createPod(t, ns, toolboxPod("crasher", "exit", "1", "crasher was here"))
	web := waitRunningReady(t, ns, "web")

	t.Run("logs", func(t *testing.T) { checkLogs(t, ns) })
	t.Run("exec", func(t *testing.T) { checkExec(t, ns, web) })
	t.Run("port-forward", func(t *testing.T) { checkPortForward(t, ns) })
	t.Run("previous logs", func(t *testing.T) { checkPreviousLogs(t, ns) })
}

func checkLogs(t *testing.T, ns string) {
	if got := kubectl(t, ns, "logs", "web"); !strings.Contains(got, "serving /www on :8080") {
		t.Errorf("kubectl logs web = %q, want the serving line", got)
	}
}

func checkExec(t *testing.T, ns string, web *corev1.Pod) {
	if got := execIn(t, ns, "web", toolbox, "cat", "/etc/hosts"); !strings.Contains(got, web.Status.PodIP) {
		t.Errorf("/etc/hosts of web does not hold its IP %s:\n%s", web.Status.PodIP, got)
	}
	res := kubectlRun(ns, "exec", "web", "--", toolbox, "exit", "3", "three")
	if res.code != 3 || res.stdout != "three\n" {
		t.Errorf("kubectl exec web -- toolbox exit 3 three: want exit 3 and output three, got %s", res)
	}
	res = kubectlRun(ns, "exec", "web", "--", toolbox, "cat", "/nonexistent")
	if res.code != 1 || !strings.Contains(res.stderr, "no such file") {
		t.Errorf("kubectl exec web -- toolbox cat /nonexistent: want exit 1 and the error on stderr, got %s", res)
	}
}

func checkPortForward(t *testing.T, ns string) {
	portForward(t, ns, "web", 8080, func(local string) {
		body := httpGet(t, "http://"+local+"/healthz")
		if body != "ok" {
			t.Errorf("GET /healthz through port-forward = %q, want ok", body)
		}
		if body := httpGet(t, "http://"+local+"/index.txt"); body != "hello" {
			t.Errorf("GET /index.txt through port-forward = %q, want hello", body)
		}
	})
}

func checkPreviousLogs(t *testing.T, ns string) {
	pod := waitPod(t, ns, "crasher", podStartTimeout, "restartCount >= 1", func(p *corev1.Pod) bool {
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount >= 1
	})
	status := pod.Status.ContainerStatuses[0]
	last := status.LastTerminationState.Terminated
	if last == nil && status.State.Terminated != nil {
		last = status.State.Terminated
	}
	if last == nil || last.ExitCode != 1 {
		t.Errorf("crasher's last termination %+v, want exit code 1", status)
	}
	if got := kubectl(t, ns, "logs", "crasher", "--previous"); got != "crasher was here\n" {
		t.Errorf("kubectl logs --previous crasher = %q, want %q", got, "crasher was here\n")
	}
}

// portForward runs kubectl port-forward to the Pod's port on a free local port of 127.0.0.1
// and calls use with the local address; the kubectl process ends with it.
func portForward(t *testing.T, ns, pod string, port int, use func(local string)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), kubectlTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, kubectlBin, "--kubeconfig", kubeconfig, "--namespace", ns,
		"port-forward", "--address", "127.0.0.1", "pod/"+pod, fmt.Sprintf(":%d", port))
	cmd.WaitDelay = 5 * time.Second
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cancel()
		_ = cmd.Wait()
	}()
	forwarding := regexp.MustCompile(`Forwarding from (127\.0\.0\.1:\d+) -> `)
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := forwarding.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
				break
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case local := <-found:
		use(local)
	case <-time.After(30 * time.Second):
		t.Fatalf("kubectl port-forward did not report a local port within 30s; stderr:\n%s", stderr.String())
	}
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s: %s", url, resp.Status, body)
	}
	return string(body)
}

// An emptyDir of medium Memory is a tmpfs of the requested size at the mount path.
func TestMemoryEmptyDirIsTmpfs(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	pod := toolboxPod("mem", "sleep", "600")
	limit := resource.MustParse("16Mi")
	pod.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{
		EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: &limit},
	}}}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}
	createPod(t, ns, pod)
	waitRunningReady(t, ns, "mem")

	mounts := execIn(t, ns, "mem", toolbox, "cat", "/proc/mounts")
	var line string
	for _, l := range strings.Split(mounts, "\n") {
		if f := strings.Fields(l); len(f) >= 4 && f[1] == "/scratch" {
			line = l
		}
	}
	f := strings.Fields(line)
	switch {
	case line == "":
		t.Fatalf("nothing is mounted at /scratch:\n%s", mounts)
	case f[2] != "tmpfs":
		t.Errorf("/scratch is %s, want tmpfs: %s", f[2], line)
	case !strings.Contains(f[3], "size=16384k"):
		t.Errorf("/scratch is not limited to 16Mi: %s", line)
	}
	execIn(t, ns, "mem", toolbox, "write", "/scratch/x", "in memory")
	if got := execIn(t, ns, "mem", toolbox, "cat", "/scratch/x"); got != "in memory" {
		t.Errorf("/scratch/x = %q, want %q", got, "in memory")
	}
}

// A failing liveness probe gets the container restarted.
func TestLivenessProbeFailureRestarts(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	pod := toolboxPod("unwell", "sleep", "600")
	pod.Spec.Containers[0].LivenessProbe = &corev1.Probe{
		ProbeHandler:        corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{toolbox, "cat", "/nonexistent"}}},
		InitialDelaySeconds: 1, PeriodSeconds: 1, FailureThreshold: 2,
	}
	createPod(t, ns, pod)
	waitPod(t, ns, "unwell", 2*podStartTimeout, "restartCount >= 2 after failed liveness probes", func(p *corev1.Pod) bool {
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount >= 2
	})
	if got := kubectl(t, ns, "logs", "unwell", "--previous"); !strings.Contains(got, "liveness probe failed") {
		t.Errorf("kubectl logs --previous unwell = %q, want the liveness kill noted", got)
	}
}

// An image the local cluster does not know is reported as ErrImagePull.
func TestUnknownImageIsErrImagePull(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	pod := toolboxPod("nope", "sleep", "600")
	pod.Spec.Containers[0].Image = "registry.invalid/not-in-the-map:v0"
	createPod(t, ns, pod)
	got := waitPod(t, ns, "nope", podStartTimeout, "waiting reason ErrImagePull", func(p *corev1.Pod) bool {
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Waiting != nil &&
			p.Status.ContainerStatuses[0].State.Waiting.Reason == "ErrImagePull"
	})
	if got.Status.Phase != corev1.PodPending {
		t.Errorf("phase %s, want Pending", got.Status.Phase)
	}
	if msg := got.Status.ContainerStatuses[0].State.Waiting.Message; !strings.Contains(msg, "registry.invalid/not-in-the-map:v0") {
		t.Errorf("the waiting message does not name the image: %q", msg)
	}
}

// The etcd image runs etcd, and etcdctl inside the Pod finds it healthy.
func TestEtcdPod(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	grace := int64(5)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "etcd"},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: &grace,
			Volumes:                       []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
			Containers: []corev1.Container{{
				Name:    "etcd",
				Image:   etcdImage,
				Command: []string{"/usr/local/bin/etcd"},
				Args: []string{
					"--name=etcd", "--data-dir=/var/lib/etcd/data",
					"--listen-client-urls=http://0.0.0.0:2379", "--advertise-client-urls=http://127.0.0.1:2379",
					"--listen-peer-urls=http://127.0.0.1:2380", "--initial-advertise-peer-urls=http://127.0.0.1:2380",
					"--initial-cluster=etcd=http://127.0.0.1:2380",
				},
				Ports:        []corev1.ContainerPort{{Name: "client", ContainerPort: 2379}},
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/var/lib/etcd"}},
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/health", Port: intstr.FromString("client")}},
					PeriodSeconds: 1,
				},
			}},
		},
	}
	createPod(t, ns, pod)
	waitRunningReady(t, ns, "etcd")
	health := execIn(t, ns, "etcd", "etcdctl", "--endpoints", "http://127.0.0.1:2379", "endpoint", "health")
	if !strings.Contains(health, "is healthy") {
		t.Errorf("etcdctl endpoint health = %q", health)
	}
	execIn(t, ns, "etcd", "etcdctl", "--endpoints", "http://127.0.0.1:2379", "put", "greeting", "hi")
	if got := execIn(t, ns, "etcd", "etcdctl", "--endpoints", "http://127.0.0.1:2379", "get", "greeting", "--print-value-only"); got != "hi\n" {
		t.Errorf("etcdctl get greeting = %q, want hi", got)
	}
}

// A Pod's only route is the bridge network's: there is no default route, so nothing a Pod
// sends can leave the local cluster.
func TestPodHasNoDefaultRoute(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	createPod(t, ns, toolboxPod("isolated", "sleep", "600"))
	waitRunningReady(t, ns, "isolated")
	table := execIn(t, ns, "isolated", toolbox, "routes")
	routes, err := parseRoutes(table)
	if err != nil {
		t.Fatalf("%v in /proc/net/route:\n%s", err, table)
	}
	if len(routes) != 1 || routes[0] != podNetwork {
		t.Fatalf("the pod's routes are %v, want only %s:\n%s", routes, podNetwork, table)
	}
}

// parseRoutes reads /proc/net/route: destination and mask are little-endian hex.
func parseRoutes(table string) ([]netip.Prefix, error) {
	lines := strings.Split(strings.TrimSpace(table), "\n")
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "Iface") {
		return nil, fmt.Errorf("no header")
	}
	var routes []netip.Prefix
	for _, line := range lines[1:] {
		f := strings.Fields(line)
		if len(f) < 8 {
			return nil, fmt.Errorf("short line %q", line)
		}
		dest, err1 := hexAddr(f[1])
		mask, err2 := hexAddr(f[7])
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("bad line %q", line)
		}
		ones, _ := net.IPMask(mask.AsSlice()).Size()
		routes = append(routes, netip.PrefixFrom(dest, ones))
	}
	return routes, nil
}

func hexAddr(s string) (netip.Addr, error) {
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != 4 {
		return netip.Addr{}, fmt.Errorf("bad address %q", s)
	}
	var a [4]byte
	binary.BigEndian.PutUint32(a[:], binary.LittleEndian.Uint32(b))
	return netip.AddrFrom4(a), nil
}

// Three etcd Pods form one cluster through their DNS names (hostname.subdomain of a headless
// Service that publishes not-ready addresses), as the operator will run them. The test also
// reports the memory all of the local cluster's processes use meanwhile.
func TestEtcdThreeMemberCluster(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	ctx := context.Background()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "etcd"},
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			PublishNotReadyAddresses: true,
			Selector:                 map[string]string{"cluster": "etcd"},
			Ports:                    []corev1.ServicePort{{Name: "client", Port: 2379}, {Name: "peer", Port: 2380}},
		},
	}
	if _, err := client.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	peerURL := func(i int) string { return fmt.Sprintf("http://etcd-%d.etcd.%s.svc.cluster.local:2380", i, ns) }
	initial := fmt.Sprintf("etcd-0=%s,etcd-1=%s,etcd-2=%s", peerURL(0), peerURL(1), peerURL(2))
	grace := int64(5)
	for i := range 3 {
		name := fmt.Sprintf("etcd-%d", i)
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"cluster": "etcd"}},
			Spec: corev1.PodSpec{
				Hostname: name, Subdomain: "etcd",
				TerminationGracePeriodSeconds: &grace,
				Volumes:                       []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
				Containers: []corev1.Container{{
					Name:    "etcd",
					Image:   etcdImage,
					Command: []string{"/usr/local/bin/etcd"},
					Args: []string{
						"--name=" + name, "--data-dir=/var/lib/etcd/data",
						"--listen-client-urls=http://0.0.0.0:2379",
						fmt.Sprintf("--advertise-client-urls=http://%s.etcd.%s.svc.cluster.local:2379", name, ns),
						"--listen-peer-urls=http://0.0.0.0:2380", "--initial-advertise-peer-urls=" + peerURL(i),
						"--initial-cluster=" + initial, "--initial-cluster-state=new", "--initial-cluster-token=" + ns,
					},
					Ports:        []corev1.ContainerPort{{Name: "client", ContainerPort: 2379}, {Name: "peer", ContainerPort: 2380}},
					VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/var/lib/etcd"}},
					ReadinessProbe: &corev1.Probe{
						ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/health", Port: intstr.FromString("client")}},
						PeriodSeconds: 1,
					},
				}},
			},
		}
		createPod(t, ns, pod)
	}
	for i := range 3 {
		waitPod(t, ns, fmt.Sprintf("etcd-%d", i), 2*podStartTimeout, "Running and Ready", func(p *corev1.Pod) bool {
			return p.Status.Phase == corev1.PodRunning && podReady(p)
		})
	}
	endpoints := fmt.Sprintf("http://etcd.%s.svc.cluster.local:2379", ns)
	health := execIn(t, ns, "etcd-0", "etcdctl", "--endpoints", endpoints, "endpoint", "health", "--cluster")
	if n := strings.Count(health, "is healthy"); n != 3 {
		t.Errorf("etcdctl endpoint health --cluster: %d healthy members, want 3:\n%s", n, health)
	}
	members := execIn(t, ns, "etcd-1", "etcdctl", "--endpoints", "http://127.0.0.1:2379", "member", "list")
	if n := strings.Count(strings.TrimSpace(members), "\n") + 1; n != 3 || strings.Count(members, "started") != 3 {
		t.Errorf("etcdctl member list: want 3 started members:\n%s", members)
	}
	execIn(t, ns, "etcd-0", "etcdctl", "--endpoints", "http://127.0.0.1:2379", "put", "k", "v")
	if got := execIn(t, ns, "etcd-2", "etcdctl", "--endpoints", "http://127.0.0.1:2379", "get", "k", "--print-value-only"); got != "v\n" {
		t.Errorf("a value put on etcd-0 reads %q on etcd-2, want v", got)
	}
	procs, rss, byName := clusterMemory()
	t.Logf("with 3 etcd Pods (and any other test's Pods) running: %d marked processes, RSS sum %d MiB (%s)", procs, rss>>20, byName)
}

// clusterMemory sums the resident memory of the processes carrying the cluster's marker; byName
// breaks it down by command name.
func clusterMemory() (procs int, rssBytes int64, byName string) {
	perName := map[string]int64{}
	for _, pid := range markedProcesses() {
		status, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
		if err != nil {
			continue
		}
		var name string
		for _, line := range strings.Split(string(status), "\n") {
			if rest, ok := strings.CutPrefix(line, "Name:"); ok {
				name = strings.TrimSpace(rest)
			}
			if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
				rssBytes += kb << 10
				perName[name] += kb << 10
				procs++
			}
		}
	}
	var parts []string
	for name, b := range perName {
		parts = append(parts, fmt.Sprintf("%s %d MiB", name, b>>20))
	}
	slices.Sort(parts)
	return procs, rssBytes, strings.Join(parts, ", ")
}
