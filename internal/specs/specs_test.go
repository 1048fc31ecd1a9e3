package specs

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

func cluster(edit ...func(*etcdv1.EtcdCluster)) *etcdv1.EtcdCluster {
	size := resource.MustParse("1Gi")
	c := &etcdv1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "prod"},
		Spec:       etcdv1.EtcdClusterSpec{Version: "3.6.16", Storage: etcdv1.StorageSpec{Size: &size}},
	}
	for _, e := range edit {
		e(c)
	}
	return c
}

func member(c *etcdv1.EtcdCluster, name string) *etcdv1.EtcdMember {
	return &etcdv1.EtcdMember{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.Namespace},
		Spec: etcdv1.EtcdMemberSpec{
			ClusterName: c.Name, Version: c.Spec.Version, Storage: c.Spec.Storage,
			Bootstrap: etcdv1.MemberBootstrap{
				InitialCluster:      InitialCluster(c, []string{"db-1", "db-2", "db-3"}),
				InitialClusterState: etcdv1.InitialClusterStateNew, ClusterToken: "tok",
			},
		},
	}
}

func TestURLsAndInitialCluster(t *testing.T) {
	c := cluster()
	if got := PeerURL(c, "db-1"); got != "http://db-1.db.prod.svc:2380" {
		t.Errorf("PeerURL = %s", got)
	}
	c.Spec.TLS = &etcdv1.EtcdClusterTLS{Client: &etcdv1.ClientTLS{ServerSecretRef: &corev1.LocalObjectReference{Name: "s"}}}
	if got := ClientURL(c, "db-2"); got != "https://db-2.db.prod.svc:2379" {
		t.Errorf("ClientURL with client TLS = %s", got)
	}
	if got := PeerURL(c, "db-1"); !strings.HasPrefix(got, "http://") {
		t.Errorf("peer URL must stay plaintext without peer TLS: %s", got)
	}
	want := "db-1=http://db-1.db.prod.svc:2380,db-2=http://db-2.db.prod.svc:2380"
	if got := InitialCluster(cluster(), []string{"db-1", "db-2"}); got != want {
		t.Errorf("InitialCluster = %s", got)
	}
}

func TestPodRunsEtcdSafely(t *testing.T) {
	c := cluster(func(c *etcdv1.EtcdCluster) {
		c.Spec.Options = &etcdv1.EtcdOptions{AutoCompactionMode: etcdv1.AutoCompactionPeriodic, AutoCompactionRetention: "24h", QuotaBackendBytes: ptr(resource.MustParse("2Gi"))}
		c.Spec.AdditionalMetadata = &etcdv1.AdditionalMetadata{Labels: map[string]string{"team": "a", etcdv1.LabelCluster: "hijack"}}
	})
	pod := Pod(c, member(c, "db-2"), PodOptions{})
	ctr := pod.Spec.Containers[0]
	if ctr.Image != "quay.io/coreos/etcd:v3.6.16" {
		t.Errorf("image = %s", ctr.Image)
	}
	for _, want := range []string{
		"--name=db-2", "--initial-cluster-state=new", "--initial-cluster-token=tok",
		"--advertise-client-urls=http://db-2.db.prod.svc:2379", "--initial-advertise-peer-urls=http://db-2.db.prod.svc:2380",
		"--auto-compaction-mode=periodic", "--auto-compaction-retention=24h", "--quota-backend-bytes=2147483648",
		"--listen-metrics-urls=http://0.0.0.0:2381",
	} {
		if !slices.Contains(ctr.Args, want) {
			t.Errorf("args lack %s: %v", want, ctr.Args)
		}
	}
	if pod.Labels[etcdv1.LabelCluster] != "db" || pod.Labels["team"] != "a" {
		t.Errorf("labels = %v: operator keys must win, extra labels must be kept", pod.Labels)
	}
	if pod.Spec.Hostname != "db-2" || pod.Spec.Subdomain != "db" {
		t.Errorf("hostname/subdomain = %s/%s", pod.Spec.Hostname, pod.Spec.Subdomain)
	}
	sc := ctr.SecurityContext
	if !*pod.Spec.SecurityContext.RunAsNonRoot || !*sc.ReadOnlyRootFilesystem || *sc.AllowPrivilegeEscalation {
		t.Error("the etcd container must run as non-root with a read-only root and no privilege escalation")
	}
	if pod.Spec.Volumes[0].PersistentVolumeClaim == nil || pod.Spec.Volumes[0].PersistentVolumeClaim.ClaimName != "db-2" {
		t.Errorf("data volume = %+v, want the member's PVC", pod.Spec.Volumes[0])
	}
	if ctr.Resources.Requests.Cpu().String() != "100m" {
		t.Errorf("default requests not applied: %v", ctr.Resources)
	}
}

func TestMemoryMemberUsesSizedTmpfs(t *testing.T) {
	c := cluster(func(c *etcdv1.EtcdCluster) { c.Spec.Storage.Medium = etcdv1.StorageMediumMemory })
	vol := Pod(c, member(c, "db-1"), PodOptions{}).Spec.Volumes[0]
	if vol.EmptyDir == nil || vol.EmptyDir.Medium != corev1.StorageMediumMemory || vol.EmptyDir.SizeLimit.String() != "1Gi" {
		t.Fatalf("data volume = %+v, want a 1Gi tmpfs", vol)
	}
}

func TestTLSArgsAndMounts(t *testing.T) {
	c := cluster(func(c *etcdv1.EtcdCluster) {
		c.Spec.TLS = &etcdv1.EtcdClusterTLS{
			Client: &etcdv1.ClientTLS{ServerSecretRef: &corev1.LocalObjectReference{Name: "srv"}, OperatorClientSecretRef: &corev1.LocalObjectReference{Name: "op"}},
			Peer:   &etcdv1.PeerTLS{SecretRef: &corev1.LocalObjectReference{Name: "peer"}},
		}
	})
	m := member(c, "db-1")
	m.Spec.TLS = &etcdv1.MemberTLS{ServerSecretName: "srv", PeerSecretName: "peer", ClientCertAuth: true}
	pod := Pod(c, m, PodOptions{ImageRepository: "registry.local/etcd"})
	args := pod.Spec.Containers[0].Args
	for _, want := range []string{"--client-cert-auth=true", "--peer-client-cert-auth=true", "--cert-file=/etc/etcd/tls/server/tls.crt", "--listen-client-urls=https://0.0.0.0:2379"} {
		if !slices.Contains(args, want) {
			t.Errorf("args lack %s", want)
		}
	}
	if len(pod.Spec.Volumes) != 3 || pod.Spec.Containers[0].Image != "registry.local/etcd:v3.6.16" {
		t.Errorf("volumes %d, image %s", len(pod.Spec.Volumes), pod.Spec.Containers[0].Image)
	}
	// etcdctl exits with "conflicting environment variable is shadowed by corresponding
	// command-line flag" when an ETCDCTL_ variable and its flag are both given.
	for _, e := range pod.Spec.Containers[0].Env {
		if strings.HasPrefix(e.Name, "ETCDCTL_") {
			t.Errorf("the etcd container sets %s; etcdctl --%s would refuse to run", e.Name, strings.ToLower(strings.TrimPrefix(e.Name, "ETCDCTL_")))
		}
	}
}

func TestPDBKeepsQuorumOfVoters(t *testing.T) {
	onPVC, onTmpfs := etcdv1.StorageMediumDefault, etcdv1.StorageMediumMemory
	for _, tc := range []struct {
		name   string
		medium etcdv1.StorageMedium
		voters int32
		want   int
	}{
		// One voter on a PVC: nothing to keep but availability, so a drain may evict it.
		{"one voter on a PVC may be evicted", onPVC, 1, 0},
		// On tmpfs the eviction would wipe the only copy of the data.
		{"one voter on tmpfs is kept", onTmpfs, 1, 1},
		{"two voters keep both", onPVC, 2, 2},
		{"two voters on tmpfs keep both", onTmpfs, 2, 2},
		{"three voters keep two", onPVC, 3, 2},
		{"three voters on tmpfs keep two", onTmpfs, 3, 2},
		{"four voters keep three", onPVC, 4, 3},
		{"five voters keep three", onPVC, 5, 3},
		{"seven voters keep four", onPVC, 7, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pdb := PDB(cluster(func(c *etcdv1.EtcdCluster) { c.Spec.Storage.Medium = tc.medium }), tc.voters, false)
			if pdb.Spec.MinAvailable == nil || pdb.Spec.MaxUnavailable != nil {
				t.Fatalf("minAvailable %v, maxUnavailable %v: want minAvailable only", pdb.Spec.MinAvailable, pdb.Spec.MaxUnavailable)
			}
			if got := pdb.Spec.MinAvailable.IntValue(); got != tc.want {
				t.Errorf("%d voters, medium %q: minAvailable %d, want %d", tc.voters, tc.medium, got, tc.want)
			}
			if pdb.Spec.Selector.MatchLabels[etcdv1.LabelRole] != "voter" {
				t.Errorf("PDB must select voters only: %v", pdb.Spec.Selector.MatchLabels)
			}
		})
	}
}

func TestServices(t *testing.T) {
	h := HeadlessService(cluster())
	if h.Spec.ClusterIP != corev1.ClusterIPNone || !h.Spec.PublishNotReadyAddresses || h.Name != "db" {
		t.Errorf("headless service = %+v", h.Spec)
	}
	if c := ClientService(cluster()); c.Name != "db-client" || c.Spec.Ports[0].Port != 2379 {
		t.Errorf("client service = %s %+v", c.Name, c.Spec.Ports)
	}
}

// The apiserver defaults a port's protocol and target port; a builder that left them out
// would differ from every Service it reads back, and rewrite it on every reconcile.
func TestServicePortsLeaveNothingForTheAPIServerToDefault(t *testing.T) {
	for _, svc := range []*corev1.Service{HeadlessService(cluster()), ClientService(cluster())} {
		for _, p := range svc.Spec.Ports {
			if p.Protocol != corev1.ProtocolTCP || p.TargetPort.IntValue() != int(p.Port) || p.Name == "" {
				t.Errorf("%s port %+v leaves fields to defaulting", svc.Name, p)
			}
		}
	}
}

func TestSpreadConstraintsGetTheClusterSelector(t *testing.T) {
	c := cluster(func(c *etcdv1.EtcdCluster) {
		c.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone}}
	})
	got := Pod(c, member(c, "db-1"), PodOptions{}).Spec.TopologySpreadConstraints
	if len(got) != 1 || got[0].LabelSelector.MatchLabels[etcdv1.LabelCluster] != "db" {
		t.Fatalf("constraints = %+v", got)
	}
	if c.Spec.TopologySpreadConstraints[0].LabelSelector != nil {
		t.Fatal("the builder changed its input")
	}
}

// A quota of 0 is etcd's default (Cozystack's API says so too): no flag is passed.
func TestZeroQuotaMeansEtcdDefault(t *testing.T) {
	args := OptionArgs(&etcdv1.EtcdOptions{QuotaBackendBytes: ptr(resource.MustParse("0")), AutoCompactionRetention: "1.5h"})
	if slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--quota-backend-bytes") }) {
		t.Errorf("args %v pass a quota for 0", args)
	}
	if !slices.Contains(args, "--auto-compaction-retention=1.5h") {
		t.Errorf("args %v lack the retention", args)
	}
}
