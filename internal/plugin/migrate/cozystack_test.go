package migrate

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
	"github.com/quorumkeeper/etcd-operator/internal/testpki"
)

const initial = "cz-a=http://cz-a.cz.ns.svc:2380,cz-b=http://cz-b.cz.ns.svc:2380"

// cozystackPod is a member Pod as Cozystack's operator builds it (controllers/etcdmember_controller.go
// buildPod): etcd flags in the command, data on PVC data-<member> at the volume root.
func cozystackPod(name string, tls bool) *corev1.Pod {
	cmd := []string{"etcd", "--name=" + name, "--data-dir=/var/lib/etcd",
		"--initial-cluster=" + initial, "--initial-cluster-token=cz-token", "--initial-cluster-state=existing"}
	vols := []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-" + name}}}}
	mounts := []corev1.VolumeMount{{Name: "data", MountPath: "/var/lib/etcd"}}
	if tls {
		cmd = append(cmd, "--cert-file=/etc/etcd/tls/client/tls.crt", "--key-file=/etc/etcd/tls/client/tls.key",
			"--client-cert-auth=true", "--trusted-ca-file=/etc/etcd/tls/client/ca.crt",
			"--peer-cert-file=/etc/etcd/tls/peer/tls.crt", "--peer-auto-tls=false")
		vols = append(vols,
			corev1.Volume{Name: "tls-client", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "cz-server-tls"}}},
			corev1.Volume{Name: "tls-peer", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "cz-peer-tls"}}})
		mounts = append(mounts,
			corev1.VolumeMount{Name: "tls-client", MountPath: "/etc/etcd/tls/client"},
			corev1.VolumeMount{Name: "tls-peer", MountPath: "/etc/etcd/tls/peer"})
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "etcd", Command: cmd, VolumeMounts: mounts}}, Volumes: vols},
		Status:     corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
}

func cozystackMember(name string) etcdv1.EtcdMember {
	size := resource.MustParse("1Gi")
	return etcdv1.EtcdMember{
		ObjectMeta: metav1.ObjectMeta{Name: name, Finalizers: []string{CozystackFinalizer}},
		Spec:       etcdv1.EtcdMemberSpec{ClusterName: "cz", Version: "3.6.16", Storage: etcdv1.StorageSpec{Size: &size}},
		Status:     etcdv1.EtcdMemberStatus{MemberID: "00000000000000a1"},
	}
}

// observed is a healthy two-member Cozystack cluster.
func observed(tls bool) Observed {
	o := Observed{
		Cluster: &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "cz"}, Spec: etcdv1.EtcdClusterSpec{Version: "3.6.16"}},
		Pods:    map[string]*corev1.Pod{}, PVCs: map[string]*corev1.PersistentVolumeClaim{},
	}
	for i, name := range []string{"cz-b", "cz-a"} {
		o.Members = append(o.Members, cozystackMember(name))
		o.Pods[name] = cozystackPod(name, tls)
		o.PVCs["data-"+name] = &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-" + name}}
		o.Etcd = append(o.Etcd, etcd.Member{ID: uint64(0xb1 - i), Name: name, PeerURLs: []string{"http://" + name + ".cz.ns.svc:2380"}})
	}
	return o
}

func TestPlanCozystackTakesIdentityFromThePods(t *testing.T) {
	p := PlanCozystack(observed(false))
	if len(p.Refusals) != 0 || len(p.Members) != 2 {
		t.Fatalf("plan: %+v", p)
	}
	a := p.Members[0]
	if a.Member != "cz-a" || a.Pod != "cz-a" || a.PVC != "data-cz-a" || a.MemberID != "b0" {
		t.Errorf("member a: %+v", a)
	}
	want := etcdv1.MemberBootstrap{InitialCluster: initial, InitialClusterState: etcdv1.InitialClusterStateExisting, ClusterToken: "cz-token"}
	if a.Spec.Bootstrap != want {
		t.Errorf("bootstrap %+v, want %+v", a.Spec.Bootstrap, want)
	}
	if got := *a.Spec.Adopted; got != (etcdv1.MemberAdoption{From: etcdv1.AdoptedFromCozystack, PVCName: "data-cz-a", DataDir: "/var/lib/etcd"}) {
		t.Errorf("adopted %+v", got)
	}
	if a.Spec.TLS != nil || a.Spec.ClusterName != "cz" || a.Spec.Version != "3.6.16" || a.Spec.Storage.Size.String() != "1Gi" {
		t.Errorf("spec %+v", a.Spec)
	}
	if out := p.Describe(); !strings.Contains(out, "Pod cz-a keeps running unchanged") || !strings.Contains(out, "on PVC data-cz-a") {
		t.Errorf("describe:\n%s", out)
	}
}

// A member whose Cozystack EtcdMember names no version takes the cluster's, which a person
// may have written with its leading v: the EtcdMember gets it without.
func TestPlanCozystackTakesTheClusterVersionWithoutItsV(t *testing.T) {
	o := observed(false)
	o.Cluster.Spec.Version = "v3.5.21"
	for i := range o.Members {
		o.Members[i].Spec.Version = ""
	}
	p := PlanCozystack(o)
	if len(p.Refusals) != 0 || len(p.Members) != 2 {
		t.Fatalf("plan: %+v", p)
	}
	for _, m := range p.Members {
		if m.Spec.Version != "3.5.21" {
			t.Errorf("member %s spec.version %q, want 3.5.21", m.Member, m.Spec.Version)
		}
	}
}

// observedTLS is observed(true) with the Secrets its Pods mount, from one CA, naming the
// members and the client Service.
func observedTLS(t *testing.T) Observed {
	o := observed(true)
	o.Cluster.Namespace = "ns"
	ca := testpki.NewCA(t)
	o.Secrets = map[string]map[string][]byte{
		"cz-server-tls": ca.SecretData(t, testpki.Request{CommonName: "cz", DNSNames: []string{"*.cz.ns.svc", "cz-client.ns.svc"}}),
		"cz-peer-tls":   ca.SecretData(t, testpki.Request{CommonName: "cz", DNSNames: []string{"*.cz.ns.svc"}}),
	}
	return o
}

func TestPlanCozystackMapsTLSSecretsFromTheMounts(t *testing.T) {
	p := PlanCozystack(observedTLS(t))
	if len(p.Refusals) != 0 {
		t.Fatalf("refusals: %v", p.Refusals)
	}
	want := etcdv1.MemberTLS{ServerSecretName: "cz-server-tls", ClientCertAuth: true, PeerSecretName: "cz-peer-tls"}
	if got := *p.Members[0].Spec.TLS; got != want {
		t.Errorf("tls %+v, want %+v", got, want)
	}
}

func TestPlanCozystackRefuses(t *testing.T) {
	for name, tc := range map[string]struct {
		change func(o *Observed)
		want   string
	}{
		"operator running": {func(o *Observed) { o.Operator.Running = []string{"cozy-etcd-operator/etcd-operator"} },
			"Cozystack's operator is running (Deployment cozy-etcd-operator/etcd-operator): scale it to 0 first, or pass --force"},
		"operator unknown": {func(o *Observed) { o.Operator.Unknown = "listing deployments is forbidden" },
			"could not check that Cozystack's operator is stopped (listing deployments is forbidden): stop it, then pass --force"},
		"pod not ready": {func(o *Observed) { o.Pods["cz-a"].Status.Conditions = nil }, "member cz-a: its Pod cz-a is not Ready"},
		"pod missing":   {func(o *Observed) { delete(o.Pods, "cz-a") }, "member cz-a: it has no Pod cz-a"},
		"dormant":       {func(o *Observed) { o.Members[1].Spec.Dormant = true }, "member cz-a: it is dormant"},
		"learner":       {func(o *Observed) { o.Etcd[0].IsLearner = true }, "etcd member cz-b (b1) is a learner"},
		"never started": {func(o *Observed) { o.Etcd[0].Name = "" }, "was added but never started"},
		"unknown etcd member": {func(o *Observed) {
			o.Etcd = append(o.Etcd, etcd.Member{ID: 0xc1, Name: "stranger"})
		}, "etcd member stranger (c1) has no EtcdMember"},
		"removed from etcd": {func(o *Observed) { o.Etcd = o.Etcd[:1] }, "member cz-a: etcd does not list it"},
		"no member list":    {func(o *Observed) { o.Etcd = nil }, "etcd's member list could not be read"},
		"paused":            {func(o *Observed) { o.Cluster.Spec.Replicas = new(int32) }, "the cluster is paused"},
		"no pvc":            {func(o *Observed) { delete(o.PVCs, "data-cz-a") }, "PVC data-cz-a of Pod cz-a does not exist"},
		"renamed":           {func(o *Observed) { o.Pods["cz-a"].Spec.Containers[0].Command[1] = "--name=other" }, `runs etcd --name="other"`},
		"data dir elsewhere": {func(o *Observed) { o.Pods["cz-a"].Spec.Containers[0].Command[2] = "--data-dir=/data" },
			`--data-dir="/data", not under /var/lib/etcd`},
		"data dir escapes": {func(o *Observed) { o.Pods["cz-a"].Spec.Containers[0].Command[2] = "--data-dir=/var/lib/etcd/../x" }, "not under /var/lib/etcd"},
		"memory mismatch": {func(o *Observed) { o.Members[1].Spec.Storage.Medium = etcdv1.StorageMediumMemory },
			"the member says medium Memory but Pod cz-a keeps its data on PVC data-cz-a"},
	} {
		t.Run(name, func(t *testing.T) {
			o := observed(false)
			tc.change(&o)
			p := PlanCozystack(o)
			if !strings.Contains(strings.Join(p.Refusals, "\n"), tc.want) {
				t.Errorf("refusals %q, want one containing %q", p.Refusals, tc.want)
			}
		})
	}
}

// --force goes ahead although Cozystack's operator may be running.
func TestPlanCozystackForce(t *testing.T) {
	o := observed(false)
	o.Operator = OperatorCheck{Unknown: "forbidden", Force: true}
	if p := PlanCozystack(o); len(p.Refusals) != 0 || len(p.Members) != 2 {
		t.Errorf("plan with --force: %+v", p)
	}
}

func TestPlanCozystackSkipsAdoptedMembers(t *testing.T) {
	o := observed(false)
	o.Members[0].Spec.Bootstrap = etcdv1.MemberBootstrap{InitialCluster: initial, InitialClusterState: etcdv1.InitialClusterStateExisting, ClusterToken: "t"}
	p := PlanCozystack(o)
	if len(p.Refusals) != 0 || len(p.Members) != 1 || p.Members[0].Member != "cz-a" || len(p.Adopted) != 1 || p.Adopted[0] != "cz-b" {
		t.Fatalf("plan %+v", p)
	}
}

// A server certificate that does not name the client Service, which this operator and
// kubectl etcd check, is refused before anything changes, naming the Secret and the fix.
func TestPlanCozystackRefusesCertificatesThisOperatorCannotUse(t *testing.T) {
	o := observedTLS(t)
	o.Secrets["cz-server-tls"] = testpki.NewCA(t).SecretData(t, testpki.Request{CommonName: "cz", DNSNames: []string{"*.cz.ns.svc"}})
	delete(o.Secrets, "cz-peer-tls")
	got := strings.Join(PlanCozystack(o).Refusals, "\n")
	for _, want := range []string{"the certificate of Secret cz-server-tls (the Pods' --cert-file) is not valid for cz-client.ns.svc",
		"Secret cz-peer-tls (the Pods' --peer-cert-file) does not exist"} {
		if !strings.Contains(got, want) {
			t.Errorf("refusals %q, want one containing %q", got, want)
		}
	}
}
