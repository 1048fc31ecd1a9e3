package specs

import (
	"crypto/x509"
	"fmt"
	"net/url"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/testpki"
)

func certManagerTLS(c *etcdv1.EtcdCluster) {
	c.Spec.TLS = &etcdv1.EtcdClusterTLS{
		Client: &etcdv1.ClientTLS{CertManager: &etcdv1.ClientCertManager{
			ServerIssuerRef:         etcdv1.IssuerReference{Name: "ca"},
			OperatorClientIssuerRef: &etcdv1.IssuerReference{Name: "clients", Kind: "ClusterIssuer"},
		}},
		Peer: &etcdv1.PeerTLS{CertManager: &etcdv1.PeerCertManager{IssuerRef: etcdv1.IssuerReference{Name: "peers", Kind: "Issuer"}}},
	}
}

func strs(t *testing.T, u *unstructured.Unstructured, path ...string) []string {
	t.Helper()
	out, _, err := unstructured.NestedStringSlice(u.Object, path...)
	if err != nil {
		t.Fatalf("%v: %v", path, err)
	}
	return out
}

func str(t *testing.T, u *unstructured.Unstructured, path ...string) string {
	t.Helper()
	out, _, err := unstructured.NestedString(u.Object, path...)
	if err != nil {
		t.Fatalf("%v: %v", path, err)
	}
	return out
}

func TestCertificatesForCertManagerTLS(t *testing.T) {
	c := cluster(certManagerTLS)
	certs := Certificates(c, "")
	var got []string
	for _, ic := range certs {
		if ic.Object.GroupVersionKind() != CertificateGVK || ic.Object.GetNamespace() != "prod" {
			t.Errorf("%s: kind %v in %s", ic.Object.GetName(), ic.Object.GroupVersionKind(), ic.Object.GetNamespace())
		}
		if ic.Object.GetName() != ic.SecretName || str(t, ic.Object, "spec", "secretName") != ic.SecretName {
			t.Errorf("Certificate %s fills Secret %s, want the same name", ic.Object.GetName(), str(t, ic.Object, "spec", "secretName"))
		}
		if ic.Object.GetLabels()[etcdv1.LabelCluster] != "db" {
			t.Errorf("%s labels %v", ic.SecretName, ic.Object.GetLabels())
		}
		if str(t, ic.Object, "spec", "duration") != "2160h" || str(t, ic.Object, "spec", "renewBefore") != "720h" {
			t.Errorf("%s lifetime %s / %s", ic.SecretName, str(t, ic.Object, "spec", "duration"), str(t, ic.Object, "spec", "renewBefore"))
		}
		got = append(got, ic.SecretName+" by "+str(t, ic.Object, "spec", "issuerRef", "kind")+"/"+str(t, ic.Object, "spec", "issuerRef", "name")+" ("+ic.IssuerField+")")
	}
	want := []string{
		"db-server-tls by Issuer/ca (spec.tls.client.certManager.serverIssuerRef)",
		"db-operator-client-tls by ClusterIssuer/clients (spec.tls.client.certManager.operatorClientIssuerRef)",
		"db-peer-tls by Issuer/peers (spec.tls.peer.certManager.issuerRef)",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("certificates\n got %q\nwant %q", got, want)
	}
}

func TestCertificateUsages(t *testing.T) {
	c := cluster(certManagerTLS)
	for _, tc := range []struct {
		cert *unstructured.Unstructured
		want []string
	}{
		{ServerCertificate(c, ""), []string{"digital signature", "server auth", "client auth"}},
		{PeerCertificate(c, ""), []string{"digital signature", "server auth", "client auth"}},
		{OperatorClientCertificate(c), []string{"digital signature", "client auth"}},
	} {
		if got := strs(t, tc.cert, "spec", "usages"); !slices.Equal(got, tc.want) {
			t.Errorf("%s usages %v, want %v", tc.cert.GetName(), got, tc.want)
		}
	}
	op := OperatorClientCertificate(c)
	if str(t, op, "spec", "commonName") != OperatorClientCommonName || len(strs(t, op, "spec", "dnsNames")) != 0 || len(strs(t, op, "spec", "ipAddresses")) != 0 {
		t.Errorf("operator client certificate must be CN %s without SANs: %v", OperatorClientCommonName, op.Object["spec"])
	}
}

// TestServerCertificateCoversEveryName signs a certificate with exactly the builder's SANs and
// lets crypto/x509 decide, as a client would, whether each name clients use matches.
func TestServerCertificateCoversEveryName(t *testing.T) {
	c := cluster(certManagerTLS)
	server := signedWithSANs(t, strs(t, ServerCertificate(c, ""), "spec", "dnsNames"), strs(t, ServerCertificate(c, ""), "spec", "ipAddresses"))
	hosts := []string{"localhost", "127.0.0.1", "::1", "db-client", "db-client.prod", "db-client.prod.svc", "db-client.prod.svc.cluster.local",
		"db", "db.prod", "db.prod.svc", "db.prod.svc.cluster.local", "db-1.db.prod.svc", "db-7.db.prod.svc.cluster.local"}
	hosts = append(hosts, urlHost(t, ClientURL(c, "db-12")))
	for _, h := range hosts {
		if err := server.VerifyHostname(h); err != nil {
			t.Errorf("server certificate does not cover %s: %v", h, err)
		}
	}
	if err := server.VerifyHostname("db-1.other.prod.svc"); err == nil {
		t.Error("server certificate covers another cluster's member")
	}
	peer := signedWithSANs(t, strs(t, PeerCertificate(c, ""), "spec", "dnsNames"), strs(t, PeerCertificate(c, ""), "spec", "ipAddresses"))
	for _, h := range []string{urlHost(t, PeerURL(c, "db-3")), "db-3.db.prod.svc.cluster.local", "db.prod.svc", "127.0.0.1"} {
		if err := peer.VerifyHostname(h); err != nil {
			t.Errorf("peer certificate does not cover %s: %v", h, err)
		}
	}
}

func urlHost(t *testing.T, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u.Hostname()
}

func signedWithSANs(t *testing.T, dnsNames, ips []string) *x509.Certificate {
	t.Helper()
	return testpki.NewCA(t).Issue(t, testpki.Request{DNSNames: dnsNames, IPs: ips}).Cert
}

func TestSecretNamesFollowUserSecretsOrDefaults(t *testing.T) {
	c := cluster(func(c *etcdv1.EtcdCluster) {
		c.Spec.TLS = &etcdv1.EtcdClusterTLS{
			Client: &etcdv1.ClientTLS{
				ServerSecretRef:         &corev1.LocalObjectReference{Name: "my-server"},
				OperatorClientSecretRef: &corev1.LocalObjectReference{Name: "my-op"},
			},
			Peer: &etcdv1.PeerTLS{SecretRef: &corev1.LocalObjectReference{Name: "my-peer"}},
		}
	})
	if ServerSecretName(c) != "my-server" || PeerSecretName(c) != "my-peer" || OperatorClientSecretName(c) != "my-op" {
		t.Errorf("user Secrets: %s %s %s", ServerSecretName(c), PeerSecretName(c), OperatorClientSecretName(c))
	}
	if n := len(Certificates(c, "")); n != 0 {
		t.Errorf("%d Certificates for user Secrets, want none", n)
	}
	c.Spec.TLS.Client.OperatorClientSecretRef = nil
	if OperatorClientSecretName(c) != "" || ClientCertAuth(c) {
		t.Error("without an operator client certificate there is no mutual TLS and no client Secret")
	}
	if RootAppliedSecretName("db") != "db-root-applied" {
		t.Error(RootAppliedSecretName("db"))
	}
}

func TestIssuerKindDefaultsToIssuer(t *testing.T) {
	if IssuerGVKFor(etcdv1.IssuerReference{Name: "x"}) != IssuerGVK || IssuerGVKFor(etcdv1.IssuerReference{Name: "x", Kind: "ClusterIssuer"}) != ClusterIssuerGVK {
		t.Fatal("issuer kinds")
	}
	c := cluster(certManagerTLS)
	c.Spec.TLS.Client.CertManager.OperatorClientIssuerRef = nil
	c.Spec.TLS.Peer = nil
	certs := Certificates(c, "")
	if len(certs) != 1 || str(t, certs[0].Object, "spec", "issuerRef", "kind") != "Issuer" || str(t, certs[0].Object, "spec", "issuerRef", "group") != "cert-manager.io" {
		t.Fatalf("certificates %v", certs)
	}
}

// With another cluster domain, the fully qualified names are in that domain and no longer in
// cluster.local; the member URLs stay domain-free and are covered either way.
func TestCertificatesUseTheClusterDomain(t *testing.T) {
	c := cluster(certManagerTLS)
	server := signedWithSANs(t, strs(t, ServerCertificate(c, "corp.example"), "spec", "dnsNames"), nil)
	for _, h := range []string{"db-client.prod.svc.corp.example", "db.prod.svc.corp.example", "db-4.db.prod.svc.corp.example", urlHost(t, ClientURL(c, "db-4"))} {
		if err := server.VerifyHostname(h); err != nil {
			t.Errorf("server certificate does not cover %s: %v", h, err)
		}
	}
	for _, h := range []string{"db-client.prod.svc.cluster.local", "db-4.db.prod.svc.cluster.local"} {
		if err := server.VerifyHostname(h); err == nil {
			t.Errorf("server certificate for domain corp.example covers %s", h)
		}
	}
	peer := signedWithSANs(t, strs(t, PeerCertificate(c, "corp.example"), "spec", "dnsNames"), nil)
	for _, h := range []string{"db-3.db.prod.svc.corp.example", urlHost(t, PeerURL(c, "db-3"))} {
		if err := peer.VerifyHostname(h); err != nil {
			t.Errorf("peer certificate does not cover %s: %v", h, err)
		}
	}
	if got, want := ServerDNSNames(c, ""), ServerDNSNames(c, DefaultClusterDomain); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("an empty domain is not cluster.local:\n%v\n%v", got, want)
	}
}

// Members trust for client certificates the CA of the operator's client certificate when
// cert-manager issues it, so that a server issuer shared with other workloads lets none of
// their certificates in; a member made before that keeps what it trusted.
func TestMembersTrustTheClientIssuersCA(t *testing.T) {
	issuedClient := func(c *etcdv1.EtcdCluster) {
		c.Spec.TLS = &etcdv1.EtcdClusterTLS{Client: &etcdv1.ClientTLS{CertManager: &etcdv1.ClientCertManager{
			ServerIssuerRef: etcdv1.IssuerReference{Name: "shared", Kind: "ClusterIssuer"}, OperatorClientIssuerRef: &etcdv1.IssuerReference{Name: "db-clients"}}}}
	}
	serverOnly := func(c *etcdv1.EtcdCluster) {
		c.Spec.TLS = &etcdv1.EtcdClusterTLS{Client: &etcdv1.ClientTLS{CertManager: &etcdv1.ClientCertManager{
			ServerIssuerRef: etcdv1.IssuerReference{Name: "shared"}}}}
	}
	ownSecrets := func(c *etcdv1.EtcdCluster) {
		c.Spec.TLS = &etcdv1.EtcdClusterTLS{Client: &etcdv1.ClientTLS{ServerSecretRef: &corev1.LocalObjectReference{Name: "server"},
			OperatorClientSecretRef: &corev1.LocalObjectReference{Name: "operator"}}}
	}
	for _, tc := range []struct {
		name        string
		edit        func(*etcdv1.EtcdCluster)
		memberCA    string // the member's record; "" for a member made before the field
		wantCA      string // ClientCASecretName
		wantTrusted string
	}{
		{"cert-manager client issuer", issuedClient, "db-operator-client-tls", "db-operator-client-tls", "--trusted-ca-file=/etc/etcd/tls/client-ca/ca.crt"},
		{"a member made before: the server CA still", issuedClient, "", "db-operator-client-tls", "--trusted-ca-file=/etc/etcd/tls/server/ca.crt"},
		{"no client certificates required", serverOnly, "", "", "--trusted-ca-file=/etc/etcd/tls/server/ca.crt"},
		{"the user's own Secrets: the server Secret's CA", ownSecrets, "", "", "--trusted-ca-file=/etc/etcd/tls/server/ca.crt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := cluster(tc.edit)
			if got := ClientCASecretName(c); got != tc.wantCA {
				t.Fatalf("ClientCASecretName = %q, want %q", got, tc.wantCA)
			}
			m := member(c, "db-1")
			m.Spec.TLS = &etcdv1.MemberTLS{ServerSecretName: ServerSecretName(c), ClientCertAuth: ClientCertAuth(c), ClientCASecretName: tc.memberCA}
			pod := Pod(c, m, PodOptions{})
			if args := pod.Spec.Containers[0].Args; !slices.Contains(args, tc.wantTrusted) {
				t.Fatalf("args %v lack %s", args, tc.wantTrusted)
			}
			var caVolume *corev1.Volume
			for i, v := range pod.Spec.Volumes {
				if v.Name == "client-ca" {
					caVolume = &pod.Spec.Volumes[i]
				}
			}
			mounted := slices.ContainsFunc(pod.Spec.Containers[0].VolumeMounts, func(vm corev1.VolumeMount) bool { return vm.Name == "client-ca" })
			if (caVolume != nil) != (tc.memberCA != "") || mounted != (tc.memberCA != "") {
				t.Fatalf("client-ca volume %v, mounted %v, for member CA %q", caVolume, mounted, tc.memberCA)
			}
			if caVolume != nil && (caVolume.Secret.SecretName != tc.memberCA || len(caVolume.Secret.Items) != 1 || caVolume.Secret.Items[0].Key != SecretKeyCA) {
				t.Fatalf("the client-ca volume %+v must hold ca.crt of %s alone (no key of the operator's)", caVolume.Secret, tc.memberCA)
			}
		})
	}
}

// spec.tls.validityDuration and renewBefore reach every Certificate as written; a lifetime
// without renewBefore renews 30 days early, or at two thirds when that is sooner, so that
// cert-manager never gets a renewBefore as long as the certificate.
func TestCertificateLifetimeFollowsTheSpec(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		validity, renew       string
		wantDuration, wantRen string
	}{
		{"defaults", "", "", "2160h", "720h"},
		{"the guide's ten years", "87600h", "", "87600h", "720h"},
		{"a year renewed two months early", "8760h", "1440h", "8760h", "1440h"},
		{"ninety days exactly", "2160h", "", "2160h", "720h"},
		{"a short lifetime renews at two thirds", "3h", "", "3h", "1h0m0s"},
		{"thirty days renews at two thirds", "720h", "", "720h", "240h0m0s"},
		{"renewBefore alone", "", "100h", "2160h", "100h"},
		{"a lifetime that does not parse falls back", "365d", "", "2160h", "720h"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := cluster(certManagerTLS)
			c.Spec.TLS.ValidityDuration, c.Spec.TLS.RenewBefore = tc.validity, tc.renew
			certs := Certificates(c, "")
			if len(certs) != 3 {
				t.Fatalf("%d certificates, want 3", len(certs))
			}
			for _, ic := range certs {
				d, r := str(t, ic.Object, "spec", "duration"), str(t, ic.Object, "spec", "renewBefore")
				if d != tc.wantDuration || r != tc.wantRen {
					t.Errorf("%s: duration %q renewBefore %q, want %q %q", ic.SecretName, d, r, tc.wantDuration, tc.wantRen)
				}
			}
		})
	}
}
