package specs

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

// A member marked with the CA bundle trusts the bundle's CAs on both ports, mounts only the
// keys members load, and keeps its certificate files.
func TestMemberWithTheCABundleTrustsIt(t *testing.T) {
	c := cluster(certManagerTLS)
	m := member(c, "db-1")
	m.Spec.TLS = &etcdv1.MemberTLS{ServerSecretName: "db-server-tls", PeerSecretName: "db-peer-tls", ClientCertAuth: true,
		ClientCASecretName: "db-operator-client-tls", CABundleSecretName: CABundleSecretName(c.Name), CABundleHash: "abc"}
	args := EtcdArgs(c, m)
	for _, want := range []string{
		"--trusted-ca-file=/etc/etcd/tls/ca-bundle/client-ca.crt",
		"--peer-trusted-ca-file=/etc/etcd/tls/ca-bundle/peer-ca.crt",
		"--cert-file=/etc/etcd/tls/server/tls.crt",
		"--peer-cert-file=/etc/etcd/tls/peer/tls.crt",
	} {
		if !slices.Contains(args, want) {
			t.Errorf("args %v lack %s", args, want)
		}
	}
	checkBundleVolume(t, Pod(c, m, PodOptions{}))

	unmarked := member(c, "db-2")
	unmarked.Spec.TLS = &etcdv1.MemberTLS{ServerSecretName: "db-server-tls", PeerSecretName: "db-peer-tls", ClientCertAuth: true, ClientCASecretName: "db-operator-client-tls"}
	if a := EtcdArgs(c, unmarked); !slices.Contains(a, "--peer-trusted-ca-file=/etc/etcd/tls/peer/ca.crt") ||
		!slices.Contains(a, "--trusted-ca-file=/etc/etcd/tls/client-ca/ca.crt") {
		t.Errorf("a member without the bundle trusts %v; want the Secrets' ca.crt", a)
	}
}

// checkBundleVolume: the bundle is mounted read-only with the keys members load only.
func checkBundleVolume(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	var keys []string
	for _, v := range pod.Spec.Volumes {
		if v.Name == "ca-bundle" {
			if v.Secret == nil || v.Secret.SecretName != "db-ca-bundle" {
				t.Fatalf("ca-bundle volume %+v", v)
			}
			for _, it := range v.Secret.Items {
				keys = append(keys, it.Key)
			}
		}
	}
	if want := []string{CABundleKeyClient, CABundleKeyPeer}; !slices.Equal(keys, want) {
		t.Errorf("ca-bundle volume keys %v; want %v (not the operator's server-ca.crt)", keys, want)
	}
	mounted := false
	for _, vm := range pod.Spec.Containers[0].VolumeMounts {
		mounted = mounted || (vm.Name == "ca-bundle" && vm.MountPath == caBundleDir && vm.ReadOnly)
	}
	if !mounted {
		t.Errorf("no read-only ca-bundle mount at %s", caBundleDir)
	}
}

// A changed issuer alone restarts no member: the Pods' fingerprint keeps the issuers they
// were built with (status.caRotation.podIssuers); a new bundle hash does restart.
func TestIssuerChangeAloneRollsNoMember(t *testing.T) {
	c := cluster(certManagerTLS)
	m := member(c, "db-1")
	m.Spec.TLS = &etcdv1.MemberTLS{ServerSecretName: "db-server-tls", PeerSecretName: "db-peer-tls"}
	before := templateHash(c, m)

	rotated := c.DeepCopy()
	rotated.Spec.TLS.Peer.CertManager.IssuerRef.Name = "peers-2027"
	rotated.Spec.TLS.Client.CertManager.ServerIssuerRef.Name = "ca-2027"
	rotated.Spec.TLS.Client.CertManager.OperatorClientIssuerRef.Name = "clients-2027"
	if templateHash(rotated, m) == before {
		t.Fatal("without a rotation record the issuers count (so that nothing changes for clusters never rotated): test setup is wrong")
	}
	rotated.Status.CARotation = &etcdv1.CARotationStatus{Stage: etcdv1.ReasonTrustingBoth, PodIssuers: WantedIssuers(c)}
	if got := templateHash(rotated, m); got != before {
		t.Errorf("fingerprint %s after an issuer change; want %s: a rotation must restart members only for their CAs", got, before)
	}
	marked := m.DeepCopy()
	marked.Spec.TLS.CABundleSecretName, marked.Spec.TLS.CABundleHash = CABundleSecretName(c.Name), "h1"
	h1 := templateHash(rotated, marked)
	marked.Spec.TLS.CABundleHash = "h2"
	if h1 == before || templateHash(rotated, marked) == h1 {
		t.Error("a new CA bundle hash does not restart the member")
	}
}

func TestCABundleHashCoversWhatMembersLoad(t *testing.T) {
	base := map[string][]byte{CABundleKeyClient: []byte("a"), CABundleKeyPeer: []byte("b"), CABundleKeyServer: []byte("s")}
	h := CABundleHash(base)
	for k, v := range map[string]string{CABundleKeyClient: "a2", CABundleKeyPeer: "b2"} {
		changed := map[string][]byte{CABundleKeyClient: base[CABundleKeyClient], CABundleKeyPeer: base[CABundleKeyPeer]}
		changed[k] = []byte(v)
		if CABundleHash(changed) == h {
			t.Errorf("a changed %s keeps the hash", k)
		}
	}
	onlyServer := map[string][]byte{CABundleKeyClient: []byte("a"), CABundleKeyPeer: []byte("b"), CABundleKeyServer: []byte("s2")}
	if CABundleHash(onlyServer) != h {
		t.Error("the operator's server CAs restart members: no member loads them")
	}
}
