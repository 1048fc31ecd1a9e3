package certificates

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller/children/childtest"
	"github.com/quorumkeeper/etcd-operator/internal/controller/kit"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
	"github.com/quorumkeeper/etcd-operator/internal/testpki"
)

// peerFromClusterIssuer is a cluster whose client certificates are the user's Secrets
// "server" and "operator", and whose peer certificate the ClusterIssuer "ca" issues.
func peerFromClusterIssuer() *etcdv1.EtcdCluster {
	c := childtest.Cluster()
	c.Spec.TLS = &etcdv1.EtcdClusterTLS{
		Client: &etcdv1.ClientTLS{
			ServerSecretRef:         &corev1.LocalObjectReference{Name: "server"},
			OperatorClientSecretRef: &corev1.LocalObjectReference{Name: "operator"},
		},
		Peer: &etcdv1.PeerTLS{CertManager: &etcdv1.PeerCertManager{IssuerRef: etcdv1.IssuerReference{Name: "ca", Kind: "ClusterIssuer"}}},
	}
	return c
}

// clusterIssuer is the ClusterIssuer "ca" with its Ready condition's status ("True", "False").
func clusterIssuer(ready string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": specs.ClusterIssuerGVK.GroupVersion().String(), "kind": specs.ClusterIssuerGVK.Kind,
		"metadata": map[string]any{"name": "ca"},
		"status": map[string]any{"conditions": []any{
			map[string]any{"type": "Ready", "status": ready, "reason": "Checked", "message": "ready is " + ready},
		}},
	}}
}

// tlsSecrets are kubernetes.io/tls Secrets of those names, each with a fresh certificate.
func tlsSecrets(t *testing.T, names ...string) []client.Object {
	t.Helper()
	ca := testpki.NewCA(t)
	var out []client.Object
	for _, name := range names {
		data := ca.SecretData(t, testpki.Request{CommonName: name})
		out = append(out, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Data: data})
	}
	return out
}

// syncOnce runs the component once over cl, returning its error and its events.
func syncOnce(cl client.Client, c *etcdv1.EtcdCluster) ([]string, error) {
	rec := events.NewFakeRecorder(20)
	err := New(childtest.Objects(cl), rec, "").Sync(context.Background(), c, kit.Facts{})
	return childtest.Events(rec), err
}

func expectTLSReady(t *testing.T, cl client.Client, status metav1.ConditionStatus, reason string, want ...string) {
	t.Helper()
	cond := childtest.Condition(t, cl, etcdv1.ConditionTLSReady)
	if cond == nil || cond.Status != status || cond.Reason != reason {
		t.Fatalf("TLSReady %+v, want %s/%s", cond, status, reason)
	}
	for _, w := range want {
		if !strings.Contains(cond.Message, w) {
			t.Fatalf("TLSReady says %q, want it to say %q", cond.Message, w)
		}
	}
}

// The Certificate is asked for, and owned by the cluster, before its Secret exists; members
// wait (a wait, not a degraded cluster) until cert-manager has issued it.
func TestSyncIssuesTheCertificateThenWaitsForItsSecret(t *testing.T) {
	t.Parallel()
	c := peerFromClusterIssuer()
	cl := childtest.Client(interceptor.Funcs{}, append(tlsSecrets(t, "server", "operator"), c, clusterIssuer("True"))...)
	evs, err := syncOnce(cl, c)
	childtest.ExpectWait(t, err, etcdv1.ReasonCertificateNotReady)
	cert := &unstructured.Unstructured{}
	cert.SetGroupVersionKind(specs.CertificateGVK)
	if err := childtest.Get(cl, "db-peer-tls", cert); err != nil || !metav1.IsControlledBy(cert, c) {
		t.Fatalf("Certificate db-peer-tls %v owned by %v, want it the cluster's", err, cert.GetOwnerReferences())
	}
	expectTLSReady(t, cl, metav1.ConditionFalse, etcdv1.ReasonCertificateNotReady, "Certificate db-peer-tls has not been issued yet")
	want := []string{"Normal CertificateCreated created Certificate db-peer-tls, issued by ClusterIssuer ca", "Warning CertificateNotReady"}
	if len(evs) != len(want) || !strings.HasPrefix(evs[0], want[0]) || !strings.HasPrefix(evs[1], want[1]) {
		t.Fatalf("events %q, want %q", evs, want)
	}

	if err := cl.Create(context.Background(), tlsSecrets(t, "db-peer-tls")[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := syncOnce(cl, c); err != nil {
		t.Fatalf("every Secret in place: %v", err)
	}
	expectTLSReady(t, cl, metav1.ConditionTrue, etcdv1.ReasonCertificatesReady)
}

// An issuer that breaks once the Secrets are issued holds nothing back: TLSReady says that
// only renewal waits.
func TestSyncBrokenIssuerOnlyStopsRenewal(t *testing.T) {
	t.Parallel()
	c := peerFromClusterIssuer()
	cl := childtest.Client(interceptor.Funcs{}, append(tlsSecrets(t, "server", "operator", "db-peer-tls"), c, clusterIssuer("False"))...)
	if _, err := syncOnce(cl, c); err != nil {
		t.Fatalf("a broken issuer held the cluster back: %v", err)
	}
	expectTLSReady(t, cl, metav1.ConditionFalse, etcdv1.ReasonIssuerNotReady,
		"ClusterIssuer ca, named by spec.tls.peer.certManager.issuerRef, is not ready: Checked: ready is False", issuedStillInUse)
}

// Without cert-manager's kinds, a cluster that asks for it waits, and TLSReady names the field.
func TestSyncWithoutCertManager(t *testing.T) {
	t.Parallel()
	noKinds := interceptor.Funcs{Get: func(ctx context.Context, cl client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		if gvk := obj.GetObjectKind().GroupVersionKind(); gvk.Group == specs.CertificateGVK.Group {
			return &meta.NoKindMatchError{GroupKind: gvk.GroupKind(), SearchedVersions: []string{gvk.Version}}
		}
		return cl.Get(ctx, key, obj, opts...)
	}}
	c := peerFromClusterIssuer()
	cl := childtest.Client(noKinds, append(tlsSecrets(t, "server", "operator"), c)...)
	_, err := syncOnce(cl, c)
	childtest.ExpectWait(t, err, etcdv1.ReasonCertManagerMissing)
	expectTLSReady(t, cl, metav1.ConditionFalse, etcdv1.ReasonCertManagerMissing, "spec.tls.peer.certManager.issuerRef asks for it")
}

// A Certificate of the cluster's name that is someone else's would fill the cluster's Secret:
// members wait, whatever the Secrets hold.
func TestSyncForeignCertificateHoldsMembersBack(t *testing.T) {
	t.Parallel()
	c := peerFromClusterIssuer()
	foreign := specs.PeerCertificate(c, "")
	cl := childtest.Client(interceptor.Funcs{}, append(tlsSecrets(t, "server", "operator", "db-peer-tls"), c, clusterIssuer("True"), foreign)...)
	_, err := syncOnce(cl, c)
	childtest.ExpectWait(t, err, etcdv1.ReasonCertificateConflict)
}

func TestSyncWithoutTLSDoesNothing(t *testing.T) {
	t.Parallel()
	c := childtest.Cluster()
	cl := childtest.Client(interceptor.Funcs{}, c)
	if evs, err := syncOnce(cl, c); err != nil || len(evs) != 0 || childtest.Condition(t, cl, etcdv1.ConditionTLSReady) != nil {
		t.Fatalf("a cluster without spec.tls: %v, events %q", err, evs)
	}
}

// Keys that etcd or the operator could not use are reported by name, before a member crashes
// on them.
func TestSecretKeysProblem(t *testing.T) {
	t.Parallel()
	ca := testpki.NewCA(t)
	good := ca.SecretData(t, testpki.Request{CommonName: "server"})
	with := func(edit func(map[string][]byte)) map[string][]byte {
		data := map[string][]byte{}
		for k, v := range good {
			data[k] = v
		}
		edit(data)
		return data
	}
	for _, tc := range []struct {
		name   string
		data   map[string][]byte
		needCA bool
		reason string
		says   string
	}{
		{"complete", good, true, "", ""},
		{"no CA where none is needed", with(func(d map[string][]byte) { delete(d, specs.SecretKeyCA) }), false, "", ""},
		{"no CA", with(func(d map[string][]byte) { delete(d, specs.SecretKeyCA) }), true, etcdv1.ReasonSecretKeyMissing, "lacks ca.crt: it needs tls.crt, tls.key and ca.crt"},
		{"no key", with(func(d map[string][]byte) { delete(d, specs.SecretKeyKey) }), false, etcdv1.ReasonSecretKeyMissing, "lacks tls.key: it needs tls.crt and tls.key"},
		{"garbage", with(func(d map[string][]byte) { d[specs.SecretKeyCert] = []byte("garbage") }), true, etcdv1.ReasonSecretInvalid, "not a matching PEM certificate and key"},
		{"CA not PEM", with(func(d map[string][]byte) { d[specs.SecretKeyCA] = []byte("garbage") }), true, etcdv1.ReasonSecretInvalid, "ca.crt holds no PEM certificate"},
	} {
		p := secretKeysProblem(&corev1.Secret{Data: tc.data}, tlsSecret{name: "s", source: "spec.x", needCA: tc.needCA})
		switch {
		case tc.reason == "" && p != nil:
			t.Errorf("%s: %+v, want no problem", tc.name, p)
		case tc.reason != "" && (p == nil || p.reason != tc.reason || !strings.Contains(p.message, tc.says)):
			t.Errorf("%s: %+v, want %s saying %q", tc.name, p, tc.reason, tc.says)
		}
	}
}

// Only a Ready condition that is True counts; its reason and message say why not.
func TestCertManagerReady(t *testing.T) {
	t.Parallel()
	if ok, why := certManagerReady(clusterIssuer("True")); !ok || why != "" {
		t.Fatalf("a Ready issuer: %v %q", ok, why)
	}
	if ok, why := certManagerReady(clusterIssuer("False")); ok || why != "Checked: ready is False" {
		t.Fatalf("an issuer not Ready: %v %q", ok, why)
	}
	fresh := &unstructured.Unstructured{Object: map[string]any{}}
	if ok, why := certManagerReady(fresh); ok || why != "it has no Ready condition yet" {
		t.Fatalf("an object without conditions: %v %q", ok, why)
	}
}

// A lifetime changed on a running cluster reaches its existing Certificate (cert-manager
// issues the next certificate with it), and the fields cert-manager or others added stay.
func TestSyncCarriesAChangedLifetimeIntoTheCertificate(t *testing.T) {
	t.Parallel()
	c := peerFromClusterIssuer()
	cl := childtest.Client(interceptor.Funcs{}, append(tlsSecrets(t, "server", "operator", "db-peer-tls"), c, clusterIssuer("True"))...)
	if _, err := syncOnce(cl, c); err != nil {
		t.Fatal(err)
	}
	cert := &unstructured.Unstructured{}
	cert.SetGroupVersionKind(specs.CertificateGVK)
	if err := childtest.Get(cl, "db-peer-tls", cert); err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedField(cert.Object, "kept", "spec", "commonName"); err != nil {
		t.Fatal(err)
	}
	if err := cl.Update(context.Background(), cert); err != nil {
		t.Fatal(err)
	}
	c.Spec.TLS.ValidityDuration, c.Spec.TLS.RenewBefore = "8760h", "1440h"
	if _, err := syncOnce(cl, c); err != nil {
		t.Fatal(err)
	}
	if err := childtest.Get(cl, "db-peer-tls", cert); err != nil {
		t.Fatal(err)
	}
	field := func(name string) string {
		v, _, _ := unstructured.NestedString(cert.Object, "spec", name)
		return v
	}
	if field("duration") != "8760h" || field("renewBefore") != "1440h" || field("commonName") != "kept" {
		t.Fatalf("Certificate spec after the change: duration %q renewBefore %q commonName %q; want 8760h, 1440h, kept",
			field("duration"), field("renewBefore"), field("commonName"))
	}
}

// A changed issuer reaches the Certificate only once the CA rotation says every member
// trusts the new CA (stage ReissuingOnNewCA): before, cert-manager would re-issue from a CA
// the peers refuse. From then on the Certificate names the issuer the rotation moves it to,
// whatever spec.tls says meanwhile.
func TestSyncHoldsAChangedIssuerUntilTheMembersTrustIt(t *testing.T) {
	t.Parallel()
	c := peerFromClusterIssuer()
	other := clusterIssuer("True")
	other.SetName("ca-2027")
	cl := childtest.Client(interceptor.Funcs{}, append(tlsSecrets(t, "server", "operator", "db-peer-tls"), c, clusterIssuer("True"), other)...)
	if _, err := syncOnce(cl, c); err != nil {
		t.Fatal(err)
	}
	issuer := func() string {
		cert := &unstructured.Unstructured{}
		cert.SetGroupVersionKind(specs.CertificateGVK)
		if err := childtest.Get(cl, "db-peer-tls", cert); err != nil {
			t.Fatal(err)
		}
		name, _, _ := unstructured.NestedString(cert.Object, "spec", "issuerRef", "name")
		return name
	}
	c.Spec.TLS.Peer.CertManager.IssuerRef.Name = "ca-2027"
	for _, status := range []*etcdv1.CARotationStatus{nil, {Stage: etcdv1.ReasonCARotated}, {Stage: etcdv1.ReasonTrustingBoth}} {
		c.Status.CARotation = status
		if _, err := syncOnce(cl, c); err != nil {
			t.Fatal(err)
		}
		if got := issuer(); got != "ca" {
			t.Fatalf("rotation %+v: the Certificate names issuer %q; want the old one, ca, held", status, got)
		}
	}
	to := []etcdv1.CertificateIssuer{{Certificate: "db-peer-tls", Issuer: c.Spec.TLS.Peer.CertManager.IssuerRef}}
	c.Status.CARotation = &etcdv1.CARotationStatus{Stage: etcdv1.ReasonReissuingOnNewCA, To: to}
	if _, err := syncOnce(cl, c); err != nil {
		t.Fatal(err)
	}
	if got := issuer(); got != "ca-2027" {
		t.Fatalf("at ReissuingOnNewCA the Certificate names issuer %q; want the new one, ca-2027", got)
	}
	// The issuer changed again (or back) while the rotation drops the old CA: the bundle
	// holds ca-2027's CA alone, so the Certificate stays on it; the change is the next rotation.
	c.Spec.TLS.Peer.CertManager.IssuerRef.Name = "ca"
	for _, stage := range []string{etcdv1.ReasonReissuingOnNewCA, etcdv1.ReasonDroppingOldCA} {
		c.Status.CARotation = &etcdv1.CARotationStatus{Stage: stage, To: to}
		if _, err := syncOnce(cl, c); err != nil {
			t.Fatal(err)
		}
		if got := issuer(); got != "ca-2027" {
			t.Fatalf("spec back on ca at %s: the Certificate names issuer %q; want ca-2027, the rotation's", stage, got)
		}
	}
}
