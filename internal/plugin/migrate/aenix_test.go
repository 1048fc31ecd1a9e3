package migrate

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/aenixfixture"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
	"github.com/quorumkeeper/etcd-operator/internal/testpki"
)

const aenixImage = "quay.io/coreos/etcd:v3.6.16"

// aenixObserved is a settled three-member legacy cluster "lg" in namespace ns.
func aenixObserved() AenixObserved {
	sts := aenixfixture.StatefulSet("lg", "ns", 3, aenixImage)
	sts.Status.ReadyReplicas, sts.Status.CurrentRevision, sts.Status.UpdateRevision = 3, "lg-1", "lg-1"
	cm := aenixfixture.ConfigMap("lg", "ns", 3)
	o := AenixObserved{
		Legacy:      aenixfixture.Legacy("lg", "ns", 3, aenixImage),
		StatefulSet: sts,
		Pods:        map[string]*corev1.Pod{}, PVCs: map[string]*corev1.PersistentVolumeClaim{},
		ConfigMaps: map[string]map[string]string{cm.Name: cm.Data},
	}
	for i := range 3 {
		pod := aenixfixture.Pod(sts, i)
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		o.Pods[pod.Name] = pod
		o.PVCs["data-"+pod.Name] = &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-" + pod.Name}}
		o.Etcd = append(o.Etcd, etcd.Member{ID: uint64(0xa0 + i), Name: pod.Name, PeerURLs: []string{"https://" + pod.Name + ".lg-headless.ns.svc:2380"}})
	}
	return o
}

func TestPlanAenixTakesIdentityFromThePodsAndTheirConfigMap(t *testing.T) {
	p := PlanAenix(aenixObserved())
	if len(p.Refusals) != 0 || len(p.Members) != 3 {
		t.Fatalf("plan: %+v", p)
	}
	m := p.Members[1]
	if m.Member != "lg-1" || m.Pod != "lg-1" || m.PVC != "data-lg-1" || m.MemberID != "a1" {
		t.Errorf("member: %+v", m)
	}
	want := etcdv1.MemberBootstrap{InitialCluster: aenixfixture.ConfigMap("lg", "ns", 3).Data["ETCD_INITIAL_CLUSTER"],
		InitialClusterState: etcdv1.InitialClusterStateExisting, ClusterToken: "lg-ns"}
	if m.Spec.Bootstrap != want {
		t.Errorf("bootstrap %+v, want %+v", m.Spec.Bootstrap, want)
	}
	// /var/run/etcd/default.etcd on the volume mounted at /var/run/etcd is default.etcd in
	// the volume, /var/lib/etcd/default.etcd where this operator mounts it.
	if got := *m.Spec.Adopted; got != (etcdv1.MemberAdoption{From: etcdv1.AdoptedFromAenix, PVCName: "data-lg-1", DataDir: "/var/lib/etcd/default.etcd"}) {
		t.Errorf("adopted %+v", got)
	}
	if m.Spec.ClusterName != "lg" || m.Spec.Version != "3.6.16" || m.Spec.Storage.Size.String() != "1Gi" || m.Spec.TLS != nil {
		t.Errorf("spec %+v", m.Spec)
	}
	checkDescribe(t, p.Describe(), []string{"member lg-0 (etcd ID a0): Pod lg-0 keeps running unchanged",
		"StatefulSet lg: deleted with propagationPolicy Orphan", "Service lg: kept, owned by the new EtcdCluster, a client Service"},
		[]string{"becomes the headless Service"})
}

// checkDescribe: the dry run's text says each of want and none of never.
func checkDescribe(t *testing.T, out string, want, never []string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("describe lacks %q:\n%s", w, out)
		}
	}
	for _, n := range never {
		if strings.Contains(out, n) {
			t.Errorf("describe says %q:\n%s", n, out)
		}
	}
}

// The EtcdCluster is the translated spec with what the Pods run, and the legacy objects are
// named for the dry run.
func TestPlanAenixBuildsTheClusterFromTheSpecAndThePods(t *testing.T) {
	p := PlanAenix(aenixObserved())
	c := p.Cluster
	if c.Name != "lg" || c.Namespace != "ns" || *c.Spec.Replicas != 3 || c.Spec.Version != "3.6.16" || !specs.PeerAutoTLS(c) || specs.ClientTLS(c) {
		t.Errorf("cluster %+v", c.Spec)
	}
	if got := specs.ClientURL(c, "lg-2"); got != "http://lg-2.lg-headless.ns.svc:2379" {
		t.Errorf("adopted member's client URL %s", got)
	}
	if got := specs.PeerURL(c, "lg-3"); got != "https://lg-3.lg-headless.ns.svc:2380" {
		t.Errorf("a new member's peer URL %s", got)
	}
	if p.StatefulSet != "lg" || p.HeadlessService != "lg-headless" || p.ClientService != "lg" || len(p.ConfigMaps) != 1 || p.ConfigMaps[0] != "lg-cluster-state" {
		t.Errorf("legacy objects: %+v", p)
	}
}

// A legacy cluster on the legacy operator's default etcd (3.5.12) is taken over at the
// version it runs: nothing older than 3.5.0 is refused for its version.
func TestPlanAenixTakesOverAnOld35Patch(t *testing.T) {
	o := aenixObserved()
	for _, pod := range o.Pods {
		pod.Spec.Containers[0].Image = "quay.io/coreos/etcd:v3.5.12"
	}
	p := PlanAenix(o)
	if len(p.Refusals) != 0 {
		t.Fatalf("refusals %q", p.Refusals)
	}
	for _, m := range p.Members {
		if m.Spec.Version != "3.5.12" {
			t.Errorf("member %s spec.version %q, want 3.5.12", m.Member, m.Spec.Version)
		}
	}
	if p.Cluster.Spec.Version != "3.5.12" {
		t.Errorf("cluster spec.version %q, want 3.5.12", p.Cluster.Spec.Version)
	}
}

func TestPlanAenixRefuses(t *testing.T) {
	for name, tc := range map[string]struct {
		change func(o *AenixObserved)
		want   string
	}{
		"operator running": {func(o *AenixObserved) {
			o.Operator.Running = []string{"etcd-operator-system/etcd-operator-controller-manager"}
		},
			"the legacy operator is running (Deployment etcd-operator-system/etcd-operator-controller-manager): scale it to 0 first, or pass --force"},
		"operator unknown": {func(o *AenixObserved) { o.Operator.Unknown = "listing deployments is forbidden" }, "could not check that the legacy operator is stopped"},
		"no statefulset":   {func(o *AenixObserved) { o.StatefulSet = nil }, "the StatefulSet lg is missing"},
		"rolling":          {func(o *AenixObserved) { o.StatefulSet.Status.UpdateRevision = "lg-2" }, "the StatefulSet lg is not settled"},
		"pod not ready":    {func(o *AenixObserved) { o.Pods["lg-1"].Status.Conditions = nil }, "member lg-1: its Pod lg-1 is not Ready"},
		"pod missing":      {func(o *AenixObserved) { delete(o.Pods, "lg-2") }, "member lg-2: the StatefulSet's Pod lg-2 is missing"},
		"no config map":    {func(o *AenixObserved) { o.ConfigMaps = nil }, "Pod lg-0 has no initial cluster or token"},
		"no pvc":           {func(o *AenixObserved) { delete(o.PVCs, "data-lg-0") }, "PVC data-lg-0 of Pod lg-0 does not exist"},
		"learner":          {func(o *AenixObserved) { o.Etcd[2].IsLearner = true }, "etcd member lg-2 (a2) is a learner: let the legacy etcd.aenix.io operator promote it first"},
		"stranger": {func(o *AenixObserved) { o.Etcd = append(o.Etcd, etcd.Member{ID: 0xc1, Name: "lg-7"}) },
			"etcd member lg-7 (c1) has no Pod of the StatefulSet"},
		"removed from etcd": {func(o *AenixObserved) { o.Etcd = o.Etcd[:2] }, "member lg-2: etcd does not list it"},
		"exists":            {func(o *AenixObserved) { o.Existing = &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "lg"}} }, "this operator's EtcdCluster lg already exists"},
		"empty dir": {func(o *AenixObserved) {
			o.Pods["lg-0"].Spec.Volumes[0].VolumeSource = corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}
		}, "Pod lg-0 keeps its data on volume data, not on a PVC"},
		"old etcd": {func(o *AenixObserved) { o.Pods["lg-0"].Spec.Containers[0].Image = "quay.io/coreos/etcd:v3.4.30" }, "Pod lg-0 runs image quay.io/coreos/etcd:v3.4.30"},
		"pods and spec disagree on the peer port": {func(o *AenixObserved) {
			o.Legacy["spec"].(map[string]any)["security"] = map[string]any{"tls": map[string]any{"peerSecret": "p"}}
		}, "the Pods protect the peer port as [auto] but spec.security.tls says secret"},
		"renamed": {func(o *AenixObserved) { o.Pods["lg-1"].Spec.Containers[0].Args[0] = "--name=other" }, `Pod lg-1 runs etcd --name="other"`},
	} {
		t.Run(name, func(t *testing.T) {
			o := aenixObserved()
			tc.change(&o)
			p := PlanAenix(o)
			if !strings.Contains(strings.Join(p.Refusals, "\n"), tc.want) {
				t.Errorf("refusals %q, want one containing %q", p.Refusals, tc.want)
			}
		})
	}
}

// An EtcdCluster that a previous --apply created (it carries the adopted-subdomain
// annotation) is the adoption to finish, not a name conflict.
func TestPlanAenixResumesItsOwnAdoption(t *testing.T) {
	o := aenixObserved()
	o.Existing = &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "lg",
		Annotations: map[string]string{etcdv1.AnnotationAdoptedSubdomain: "lg-headless=lg-0,lg-1,lg-2"}}}
	if p := PlanAenix(o); len(p.Refusals) != 0 || len(p.Members) != 3 {
		t.Errorf("plan %+v", p)
	}
}

// --force goes ahead although the legacy operator's Deployment has replicas.
func TestPlanAenixForce(t *testing.T) {
	o := aenixObserved()
	o.Operator = OperatorCheck{Running: []string{"a/b"}, Force: true}
	if p := PlanAenix(o); len(p.Refusals) != 0 {
		t.Errorf("refusals with --force: %v", p.Refusals)
	}
}

func TestPodSettingsExpandsTheEnvironment(t *testing.T) {
	o := aenixObserved()
	flags, _, cms, ok := podSettings(o.Pods["lg-2"], o.ConfigMaps)
	if !ok || flags["name"] != "lg-2" || flags["advertise-client-urls"] != "http://lg-2.lg-headless.ns.svc:2379" ||
		flags["peer-auto-tls"] != "true" || flags["initial-cluster-state"] != "new" || len(cms) != 1 {
		t.Errorf("flags %v, config maps %v", flags, cms)
	}
}

// aenixTLSObserved is aenixObserved with the legacy TLS on both ports, from one CA, with
// certificates that name every member and the client Service.
func aenixTLSObserved(t *testing.T) (AenixObserved, *testpki.CA) {
	o := aenixObserved()
	aenixfixture.WithTLS(o.Legacy, o.StatefulSet)
	for name := range o.Pods {
		i := int(name[len(name)-1] - '0')
		o.Pods[name] = withReady(aenixfixture.Pod(o.StatefulSet, i))
	}
	ca := testpki.NewCA(t)
	names := aenixfixture.TLSSecrets("lg")
	members := []string{"*.lg-headless.ns.svc", "*.lg.ns.svc"}
	o.Secrets = map[string]map[string][]byte{
		names["serverSecret"]:          ca.SecretData(t, testpki.Request{CommonName: "lg", DNSNames: append(members, "lg-client.ns.svc")}),
		names["peerSecret"]:            ca.SecretData(t, testpki.Request{CommonName: "lg-peer", DNSNames: members}),
		names["clientSecret"]:          ca.SecretData(t, testpki.Request{CommonName: "root"}),
		names["serverTrustedCASecret"]: {"ca.crt": ca.PEM},
		names["clientTrustedCASecret"]: {"ca.crt": ca.PEM},
		names["peerTrustedCASecret"]:   {"ca.crt": ca.PEM},
	}
	return o, ca
}

func withReady(pod *corev1.Pod) *corev1.Pod {
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	return pod
}

// A TLS cluster is adopted with the Secrets its Pods mount: the server and peer Secrets, and
// the legacy operator's client certificate as the operator's.
func TestPlanAenixTakesOverTheTLSSecrets(t *testing.T) {
	o, _ := aenixTLSObserved(t)
	p := PlanAenix(o)
	if len(p.Refusals) != 0 {
		t.Fatalf("refusals: %v", p.Refusals)
	}
	tls := p.Cluster.Spec.TLS
	if tls.Client.ServerSecretRef.Name != "lg-server" || tls.Client.OperatorClientSecretRef.Name != "lg-client-cert" ||
		tls.Peer.SecretRef.Name != "lg-peer" || tls.Peer.AutoTLS || !specs.ClientCertAuth(p.Cluster) {
		t.Errorf("cluster TLS %+v %+v %+v", tls, tls.Client, tls.Peer)
	}
	want := etcdv1.MemberTLS{ServerSecretName: "lg-server", PeerSecretName: "lg-peer", ClientCertAuth: true}
	for _, m := range p.Members {
		if m.Spec.TLS == nil || *m.Spec.TLS != want {
			t.Errorf("member %s TLS %+v, want %+v", m.Member, m.Spec.TLS, want)
		}
	}
	// Every member under the legacy headless Service, the ones this operator adds too.
	for member, want := range map[string]string{"lg-0": "https://lg-0.lg-headless.ns.svc:2379", "lg-3": "https://lg-3.lg-headless.ns.svc:2379"} {
		if got := specs.ClientURL(p.Cluster, member); got != want {
			t.Errorf("client URL of %s: %s, want %s", member, got, want)
		}
	}
}

// What this operator cannot use is refused, naming the Secret, the field and the fix.
func TestPlanAenixRefusesCertificatesThisOperatorCannotUse(t *testing.T) {
	for name, tc := range map[string]struct {
		change func(t *testing.T, o *AenixObserved, ca *testpki.CA)
		want   string
	}{
		"server certificate without the client Service's name": {func(t *testing.T, o *AenixObserved, ca *testpki.CA) {
			o.Secrets["lg-server"] = ca.SecretData(t, testpki.Request{CommonName: "lg", DNSNames: []string{"*.lg-headless.ns.svc", "lg.ns.svc"}})
		}, "the certificate of Secret lg-server (spec.security.tls.serverSecret) is not valid for lg-client.ns.svc"},
		"server certificate without the adopted members' names": {func(t *testing.T, o *AenixObserved, ca *testpki.CA) {
			o.Secrets["lg-server"] = ca.SecretData(t, testpki.Request{CommonName: "lg", DNSNames: []string{"*.lg.ns.svc", "lg-client.ns.svc"}})
		}, "the certificate of Secret lg-server (spec.security.tls.serverSecret) is not valid for lg-0.lg-headless.ns.svc"},
		"peer certificate naming one member only": {func(t *testing.T, o *AenixObserved, ca *testpki.CA) {
			o.Secrets["lg-peer"] = ca.SecretData(t, testpki.Request{CommonName: "p", DNSNames: []string{"lg-0.lg-headless.ns.svc"}})
		}, "the certificate of Secret lg-peer (spec.security.tls.peerSecret) is not valid for lg-3.lg-headless.ns.svc"},
		"client CA of its own": {func(t *testing.T, o *AenixObserved, _ *testpki.CA) {
			o.Secrets["lg-client-ca"] = map[string][]byte{"ca.crt": testpki.NewCA(t).PEM}
		}, "the ca.crt of Secret lg-client-ca (spec.security.tls.clientTrustedCASecret) is not the ca.crt of Secret lg-server"},
		"server Secret without ca.crt": {func(t *testing.T, o *AenixObserved, _ *testpki.CA) {
			delete(o.Secrets["lg-server"], "ca.crt")
		}, "Secret lg-server (spec.security.tls.serverSecret) has no ca.crt"},
		"missing peer Secret": {func(t *testing.T, o *AenixObserved, _ *testpki.CA) {
			delete(o.Secrets, "lg-peer")
		}, "Secret lg-peer (spec.security.tls.peerSecret) does not exist"},
	} {
		t.Run(name, func(t *testing.T) {
			o, ca := aenixTLSObserved(t)
			tc.change(t, &o, ca)
			p := PlanAenix(o)
			if !strings.Contains(strings.Join(p.Refusals, "\n"), tc.want) {
				t.Errorf("refusals %q, want one containing %q", p.Refusals, tc.want)
			}
		})
	}
}
