package cluster

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
	"github.com/quorumkeeper/etcd-operator/internal/testpki"
)

// certManagerSpec is spec.tls with every certificate from the Issuer ca, its kind written out
// as the API server's default (+kubebuilder:default=Issuer) fills it in.
func certManagerSpec(c *etcdv1.EtcdCluster) {
	ca := etcdv1.IssuerReference{Name: "ca", Kind: "Issuer"}
	c.Spec.TLS = &etcdv1.EtcdClusterTLS{
		Client: &etcdv1.ClientTLS{CertManager: &etcdv1.ClientCertManager{ServerIssuerRef: ca, OperatorClientIssuerRef: &ca}},
		Peer:   &etcdv1.PeerTLS{CertManager: &etcdv1.PeerCertManager{IssuerRef: ca}},
	}
}

func userSecretsSpec(c *etcdv1.EtcdCluster) {
	c.Spec.TLS = &etcdv1.EtcdClusterTLS{
		Client: &etcdv1.ClientTLS{
			ServerSecretRef:         &corev1.LocalObjectReference{Name: "server"},
			OperatorClientSecretRef: &corev1.LocalObjectReference{Name: "operator"},
		},
		Peer: &etcdv1.PeerTLS{SecretRef: &corev1.LocalObjectReference{Name: "peer"}},
	}
}

func TestTLSWaitsWithoutCertManager(t *testing.T) {
	h := newSecureHarness(t, false, certManagerSpec)
	h.reconcile()
	if n := len(h.members()); n != 0 {
		t.Fatalf("%d members created without certificates", n)
	}
	h.expectCondition(etcdv1.ConditionTLSReady, metav1.ConditionFalse, etcdv1.ReasonCertManagerMissing, "install cert-manager")
	h.expectCondition(etcdv1.ConditionProgressing, metav1.ConditionTrue, etcdv1.ReasonCertManagerMissing, "spec.tls.client.certManager.serverIssuerRef")
	if ev := h.events(); len(ev) != 1 || !strings.Contains(ev[0], "Warning CertManagerMissing") {
		t.Fatalf("events %q, want one warning", ev)
	}
	h.reconcile()
	if ev := h.events(); len(ev) != 0 {
		t.Fatalf("the same problem was announced again: %q", ev)
	}
}

func TestCertManagerIssuerThenCertificatesThenMembers(t *testing.T) {
	h := newSecureHarness(t, true, certManagerSpec)
	h.reconcile()
	h.expectCondition(etcdv1.ConditionTLSReady, metav1.ConditionFalse, etcdv1.ReasonIssuerNotFound, "Issuer ca in namespace ns, named by spec.tls.client.certManager.serverIssuerRef, does not exist")

	ca := caIssuer(false)
	h.create(ca)
	h.reconcile()
	h.expectCondition(etcdv1.ConditionTLSReady, metav1.ConditionFalse, etcdv1.ReasonIssuerNotReady, "test says False")

	setReady(ca, true, "KeyPairVerified")
	if err := h.api.Update(context.Background(), ca); err != nil {
		t.Fatal(err)
	}
	h.reconcile()
	h.expectCondition(etcdv1.ConditionTLSReady, metav1.ConditionFalse, etcdv1.ReasonCertificateNotReady, "Certificate db-server-tls has not been issued yet")
	certs := gvkList(specs.CertificateGVK)
	if err := h.api.List(context.Background(), certs, client.InNamespace("ns")); err != nil {
		t.Fatal(err)
	}
	if len(certs.Items) != 3 {
		t.Fatalf("%d Certificates, want server, operator client and peer", len(certs.Items))
	}
	for _, cert := range certs.Items {
		if !metav1.IsControlledBy(&cert, h.clusterObj()) {
			t.Errorf("Certificate %s is not owned by the cluster: %v", cert.GetName(), cert.GetOwnerReferences())
		}
	}
	if n := len(h.members()); n != 0 {
		t.Fatalf("%d members created before the Secrets", n)
	}

	// cert-manager issues: the Secrets appear, members follow, with the issued Secrets mounted.
	testCA := testpki.NewCA(t)
	for _, name := range []string{"db-server-tls", "db-operator-client-tls", "db-peer-tls"} {
		h.create(secret(name, tlsData(t, testCA, name)))
	}
	h.reconcile()
	h.expectCondition(etcdv1.ConditionTLSReady, metav1.ConditionTrue, etcdv1.ReasonCertificatesReady, "")
	members := h.members()
	if len(members) != 3 {
		t.Fatalf("%d members once the Secrets exist", len(members))
	}
	if tls := members[0].Spec.TLS; tls == nil || tls.ServerSecretName != "db-server-tls" || tls.PeerSecretName != "db-peer-tls" || !tls.ClientCertAuth ||
		tls.ClientCASecretName != "db-operator-client-tls" {
		t.Fatalf("member TLS %+v; want the operator client certificate's CA trusted for clients", members[0].Spec.TLS)
	}
}

// Members trust the CA in the operator's client certificate Secret: without a ca.crt there,
// none is created (its Pod could not mount it) and TLSReady says what is missing.
func TestOperatorClientSecretWithoutCAHoldsMembersBack(t *testing.T) {
	h := newSecureHarness(t, true, certManagerSpec, caIssuer(true))
	testCA := testpki.NewCA(t)
	for _, name := range []string{"db-server-tls", "db-operator-client-tls", "db-peer-tls"} {
		data := tlsData(t, testCA, name)
		if name == "db-operator-client-tls" {
			delete(data, specs.SecretKeyCA)
		}
		h.create(secret(name, data))
	}
	h.reconcile()
	if n := len(h.members()); n != 0 {
		t.Fatalf("%d members created without the client CA", n)
	}
	h.expectCondition(etcdv1.ConditionTLSReady, metav1.ConditionFalse, etcdv1.ReasonSecretKeyMissing, "Secret db-operator-client-tls (Certificate db-operator-client-tls) lacks ca.crt")
}

// relatedRecorder keeps, for each event reason, the names of the related objects.
type relatedRecorder struct{ related map[string][]string }

func (r *relatedRecorder) Eventf(_, related runtime.Object, _, reason, _, _ string, _ ...any) {
	name := ""
	if o, ok := related.(client.Object); ok {
		name = o.GetName()
	}
	r.related[reason] = append(r.related[reason], name)
}

// Each CertificateCreated event names its Certificate as the related object: the events API
// folds events that agree on everything else into one series with the first message only.
func TestCertificateCreatedEventsAreDistinct(t *testing.T) {
	h := newSecureHarness(t, true, certManagerSpec, caIssuer(true))
	rec := &relatedRecorder{related: map[string][]string{}}
	h.r.Recorder = rec
	h.reconcile()
	got := fmt.Sprint(rec.related["CertificateCreated"])
	if want := "[db-server-tls db-operator-client-tls db-peer-tls]"; got != want {
		t.Fatalf("CertificateCreated events related to %s, want %s", got, want)
	}
}

func TestCertificateDriftIsCorrected(t *testing.T) {
	h := newSecureHarness(t, true, certManagerSpec, caIssuer(true))
	h.reconcile()
	cert := &unstructured.Unstructured{}
	cert.SetGroupVersionKind(specs.CertificateGVK)
	key := types.NamespacedName{Namespace: "ns", Name: "db-peer-tls"}
	if err := h.api.Get(context.Background(), key, cert); err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedStringSlice(cert.Object, []string{"only.example"}, "spec", "dnsNames")
	if err := h.api.Update(context.Background(), cert); err != nil {
		t.Fatal(err)
	}
	h.reconcile()
	if err := h.api.Get(context.Background(), key, cert); err != nil {
		t.Fatal(err)
	}
	names, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
	if len(names) == 0 || names[0] != "*.db.ns.svc" {
		t.Fatalf("dnsNames %v, want the builder's", names)
	}
}

func TestForeignCertificateIsNotTaken(t *testing.T) {
	foreign := specs.ServerCertificate(func() *etcdv1.EtcdCluster {
		c := &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns"}}
		certManagerSpec(c)
		return c
	}(), "")
	h := newSecureHarness(t, true, certManagerSpec, caIssuer(true), foreign)
	h.reconcile()
	h.expectCondition(etcdv1.ConditionTLSReady, metav1.ConditionFalse, etcdv1.ReasonCertificateConflict, "does not belong to this cluster")
}

func TestUserSecretProblemsAreNamed(t *testing.T) {
	ca := testpki.NewCA(t)
	h := newSecureHarness(t, false, userSecretsSpec)
	h.reconcile()
	h.expectCondition(etcdv1.ConditionTLSReady, metav1.ConditionFalse, etcdv1.ReasonSecretMissing, "Secret server (spec.tls.client.serverSecretRef) does not exist")

	data := tlsData(t, ca, "server")
	delete(data, "ca.crt")
	h.create(secret("server", data))
	h.reconcile()
	h.expectCondition(etcdv1.ConditionTLSReady, metav1.ConditionFalse, etcdv1.ReasonSecretKeyMissing, "lacks ca.crt")

	h.setSecretData("server", map[string][]byte{"tls.crt": []byte("garbage"), "tls.key": []byte("garbage"), "ca.crt": ca.PEM})
	h.reconcile()
	h.expectCondition(etcdv1.ConditionTLSReady, metav1.ConditionFalse, etcdv1.ReasonSecretInvalid, "not a matching PEM certificate and key")

	h.setSecretData("server", tlsData(t, ca, "server"))
	operator := tlsData(t, ca, "operator")
	delete(operator, "ca.crt") // the operator's client Secret needs no CA
	h.create(secret("operator", operator))
	h.reconcile()
	h.expectCondition(etcdv1.ConditionTLSReady, metav1.ConditionFalse, etcdv1.ReasonSecretMissing, "Secret peer (spec.tls.peer.secretRef)")
	if n := len(h.members()); n != 0 {
		t.Fatalf("%d members created without the peer Secret", n)
	}
	h.create(secret("peer", tlsData(t, ca, "peer")))
	h.reconcile()
	h.expectCondition(etcdv1.ConditionTLSReady, metav1.ConditionTrue, etcdv1.ReasonCertificatesReady, "")
	if n := len(h.members()); n != 3 {
		t.Fatalf("%d members once every Secret is fine", n)
	}
}

// TestClientFactoryUsesTheCurrentCertificate is renewal from the operator's side: a Secret
// renewed between two clients gives the second one the new certificate.
func TestClientFactoryUsesTheCurrentCertificate(t *testing.T) {
	ca := testpki.NewCA(t)
	h := newSecureHarness(t, false, userSecretsSpec,
		secret("server", tlsData(t, ca, "server")), secret("operator", tlsData(t, ca, "operator")), secret("peer", tlsData(t, ca, "peer")))
	c := h.clusterObj()
	first := openedLeaf(t, h, c)
	if first.Subject.CommonName != "operator" {
		t.Fatalf("client certificate %s", first.Subject.CommonName)
	}
	h.setSecretData("operator", tlsData(t, ca, "operator-renewed"))
	if second := openedLeaf(t, h, c); second.Subject.CommonName != "operator-renewed" {
		t.Fatalf("after renewal the client presents %s", second.Subject.CommonName)
	}
	cfg := h.lastOpened()
	if cfg.TLS.RootCAs == nil || cfg.Username != "" {
		t.Fatalf("config %+v: want the server CA trusted and no login without spec.auth", cfg)
	}
}

func openedLeaf(t *testing.T, h *secureHarness, c *etcdv1.EtcdCluster) *x509.Certificate {
	t.Helper()
	cli, err := h.r.NewClient(context.Background(), c, []string{"https://db-1.db.ns.svc:2379"})
	if err != nil {
		t.Fatal(err)
	}
	_ = cli.Close()
	certs := h.lastOpened().TLS.Certificates
	if len(certs) != 1 {
		t.Fatalf("%d client certificates, want the operator's", len(certs))
	}
	block, _ := pem.Decode(h.secret("operator").Data["tls.crt"])
	leaf, err := x509.ParseCertificate(certs[0].Certificate[0])
	if err != nil || block == nil {
		t.Fatal(err)
	}
	return leaf
}

func TestSecretEventsReachTheClustersThatUseThem(t *testing.T) {
	h := newSecureHarness(t, false, func(c *etcdv1.EtcdCluster) {
		userSecretsSpec(c)
		c.Spec.Auth = &etcdv1.AuthSpec{Enabled: true, RootCredentialsSecretRef: &corev1.LocalObjectReference{Name: "root"}}
	})
	for name, want := range map[string]int{"server": 1, "operator": 1, "peer": 1, "root": 1, "db-root-applied": 1, "unrelated": 0} {
		got := h.r.clustersForSecret(context.Background(), secret(name, nil))
		if len(got) != want {
			t.Errorf("Secret %s maps to %v, want %d cluster(s)", name, got, want)
		}
	}
}

// TestIssuerNotReadyDoesNotStopHealing: certificates are per cluster, so an issuer that turns
// NotReady on a healthy cluster stops only renewal. A member lost by hand is recreated and a
// scale-out goes on with the Secrets already issued; TLSReady says what waits.
func TestIssuerNotReadyDoesNotStopHealing(t *testing.T) {
	ca := caIssuer(true)
	testCA := testpki.NewCA(t)
	h := newSecureHarness(t, true, certManagerSpec, ca,
		secret("db-server-tls", tlsData(t, testCA, "server")),
		secret("db-operator-client-tls", tlsData(t, testCA, "operator")),
		secret("db-peer-tls", tlsData(t, testCA, "peer")))
	h.reconcile()
	h.running()
	h.expectCondition(etcdv1.ConditionTLSReady, metav1.ConditionTrue, etcdv1.ReasonCertificatesReady, "")

	setReady(ca, false, "ErrSigningCA")
	if err := h.api.Update(context.Background(), ca); err != nil {
		t.Fatal(err)
	}
	lost := h.members()[1]
	if err := h.api.Delete(context.Background(), lost); err != nil {
		t.Fatal(err)
	}
	h.reconcile()
	h.expectCondition(etcdv1.ConditionTLSReady, metav1.ConditionFalse, etcdv1.ReasonIssuerNotReady, "only a new issue or renewal waits")
	if got := names(h.members()); !slices.Contains(got, lost.Name) {
		t.Fatalf("members %v: %s was not recreated while the issuer is not ready", got, lost.Name)
	}

	h.setReplicas(4)
	h.reconcile()
	if got := names(h.members()); len(got) != 4 {
		t.Fatalf("members %v: no scale-out while the issuer is not ready", got)
	}
}
