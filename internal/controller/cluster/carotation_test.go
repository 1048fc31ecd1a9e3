package cluster

import (
	"bytes"
	"context"
	"encoding/pem"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/carotation"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
	"github.com/quorumkeeper/etcd-operator/internal/testpki"
)

// rotationHarness is a running three-member cluster whose certificates cert-manager issued
// from the Issuer "ca" (the test plays cert-manager), with the Issuer "ca-2" of a new CA ready.
func rotationHarness(t *testing.T) (*secureHarness, *testpki.CA) {
	t.Helper()
	next := caIssuer(true)
	next.SetName("ca-2")
	h := newSecureHarness(t, true, certManagerSpec, caIssuer(true), next)
	oldCA := testpki.NewCA(t)
	h.reconcile()
	for _, name := range []string{"db-server-tls", "db-operator-client-tls", "db-peer-tls"} {
		h.create(secret(name, tlsData(t, oldCA, name)))
	}
	h.reconcile()
	h.running()
	h.startPods()
	h.reconcile()
	return h, oldCA
}

func (h *secureHarness) certificateIssuer(name string) string {
	h.t.Helper()
	cert := &unstructured.Unstructured{}
	cert.SetGroupVersionKind(specs.CertificateGVK)
	if err := h.api.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: name}, cert); err != nil {
		h.t.Fatal(err)
	}
	issuer, _, _ := unstructured.NestedString(cert.Object, "spec", "issuerRef", "name")
	return issuer
}

func (h *secureHarness) stage() string {
	if r := h.clusterObj().Status.CARotation; r != nil {
		return r.Stage
	}
	return ""
}

// rollAll plays the kubelet through a rolling restart: reconciles, bringing each restarted
// member's Pod back, until no Pod is outdated; it returns how many restarts each member had
// and fails when two members were down at once or the rotation left stage before the last
// restart.
func (h *secureHarness) rollAll(stage string, restarts map[string]int) {
	h.t.Helper()
	for range 20 {
		before := h.podNames()
		h.reconcile()
		if got := h.stage(); got != stage {
			h.t.Fatalf("stage %q while members still restart; want %s until every one restarted", got, stage)
		}
		after := h.podNames()
		if len(after) < 2 {
			h.t.Fatalf("two members down at once: %v", after)
		}
		for _, p := range before {
			if !slices.Contains(after, p) {
				restarts[p]++
			}
		}
		h.startPods()
		outdated, down := h.r.classifyPods(h.clusterObj(), &clusterView{members: h.members()}, h.pods())
		if len(outdated) == 0 && len(down) == 0 && len(h.podNames()) == 3 {
			return
		}
	}
	h.t.Fatal("the roll did not finish in 20 reconciles")
}

func (h *secureHarness) pods() map[string]*corev1.Pod {
	h.t.Helper()
	pods, err := h.r.memberPods(context.Background(), h.api, h.clusterObj())
	if err != nil {
		h.t.Fatal(err)
	}
	return pods
}

func pemCount(data []byte) int {
	n := 0
	for {
		var b *pem.Block
		if b, data = pem.Decode(data); b == nil {
			return n
		}
		n++
	}
}

// The peer issuer changes on a running cluster: the operator records the rotation before
// acting, learns the new CA from a probe certificate, makes every member trust both CAs (one
// restart each, never two down), only then lets cert-manager re-issue the peer certificate,
// checks that its own client still gets answers, drops the old CA (one more restart each) and
// cleans up. The Certificate names the old issuer until the members trust the new CA.
func TestCARotationOfThePeerIssuer(t *testing.T) {
	h, oldCA := rotationHarness(t)
	if got := h.podNames(); len(got) != 3 {
		t.Fatalf("Pods %v before the rotation", got)
	}
	h.editSpec(func(s *etcdv1.EtcdClusterSpec) { s.TLS.Peer.CertManager.IssuerRef.Name = "ca-2" })
	h.reconcile()
	checkRotationStarted(t, h)
	newCA := checkTrustingBoth(t, h, oldCA)
	checkReissuing(t, h, newCA)
	checkDroppingOldCA(t, h, newCA)
}

// checkRotationStarted: the change is recorded first, and nothing else happens yet.
func checkRotationStarted(t *testing.T, h *secureHarness) {
	t.Helper()
	rot := h.clusterObj().Status.CARotation
	if rot == nil || rot.Stage != etcdv1.ReasonTrustingBoth || len(rot.To) != 1 || rot.To[0].Certificate != "db-peer-tls" ||
		rot.From[0].Issuer.Name != "ca" || rot.To[0].Issuer.Name != "ca-2" || len(rot.PodIssuers) != 3 {
		t.Fatalf("recorded %+v; want TrustingBoth from ca to ca-2 for db-peer-tls, with the Pods' issuers", rot)
	}
	h.expectCondition(etcdv1.ConditionCARotation, metav1.ConditionTrue, etcdv1.ReasonTrustingBoth, "db-peer-tls")
	if got := h.certificateIssuer("db-peer-tls"); got != "ca" {
		t.Fatalf("the peer Certificate names %q before the members trust the new CA; want ca", got)
	}
	if got := h.podNames(); len(got) != 3 {
		t.Fatalf("the issuer change alone restarted a member: Pods %v", got)
	}
}

// checkTrustingBoth plays cert-manager for the probe and checks the bundle and the roll; it
// returns the new CA.
func checkTrustingBoth(t *testing.T, h *secureHarness, oldCA *testpki.CA) *testpki.CA {
	t.Helper()
	h.reconcile()
	if got := h.certificateIssuer(specs.CAProbeName("db-peer-tls")); got != "ca-2" {
		t.Fatalf("probe Certificate issuer %q; want ca-2", got)
	}
	// Until the new issuer signs the probe, the rotation waits, saying for what, and is not
	// looked at again at once (its Secret wakes the cluster).
	if after := h.reconcileAfter(); after < time.Second {
		t.Fatalf("waiting for the probe to be signed, the cluster is looked at again after %s; want no busy loop", after)
	}
	h.expectCondition(etcdv1.ConditionCARotation, metav1.ConditionTrue, etcdv1.ReasonTrustingBoth, "waiting for the new issuers to sign "+specs.CAProbeName("db-peer-tls"))
	newCA := testpki.NewCA(t)
	probe := secret(specs.CAProbeName("db-peer-tls"), tlsData(t, newCA, specs.CAProbeCommonName))
	probe.Type = corev1.SecretTypeTLS // as cert-manager writes it: the API server requires tls.crt and tls.key
	probe.Annotations = map[string]string{"cert-manager.io/issuer-name": "ca-2"}
	h.create(probe)
	h.reconcile()
	bundle := h.secret(specs.CABundleSecretName("db"))
	peer := bundle.Data[specs.CABundleKeyPeer]
	if pemCount(peer) != 2 || !bytes.Contains(peer, newCA.PEM) || !bytes.Contains(peer, oldCA.PEM) || pemCount(bundle.Data[specs.CABundleKeyClient]) != 1 {
		t.Fatalf("bundle while trusting both: peer %d CAs, client %d; want the old and the new peer CA, the one client CA",
			pemCount(peer), pemCount(bundle.Data[specs.CABundleKeyClient]))
	}
	if !metav1.IsControlledBy(bundle, h.clusterObj()) {
		t.Fatal("the bundle Secret is not the cluster's")
	}
	// As after a crash between the bundle's write and its record: the next look records it.
	c := h.clusterObj()
	c.Status.CARotation.BundleHash = ""
	if err := h.api.Status().Update(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	h.reconcile()
	if got := h.clusterObj().Status.CARotation.BundleHash; got != specs.CABundleHash(bundle.Data) {
		t.Fatalf("bundle hash %q after the record was lost; want it recorded again, %q", got, specs.CABundleHash(bundle.Data))
	}
	restarts := map[string]int{}
	h.rollAll(etcdv1.ReasonTrustingBoth, restarts)
	for _, m := range h.members() {
		if m.Spec.TLS.CABundleSecretName != "db-ca-bundle" || m.Spec.TLS.CABundleHash != specs.CABundleHash(bundle.Data) {
			t.Fatalf("member %s TLS %+v; want the bundle with its hash", m.Name, m.Spec.TLS)
		}
	}
	expectOnceEach(t, "to trust both CAs", restarts)
	return newCA
}

func expectOnceEach(t *testing.T, what string, restarts map[string]int) {
	t.Helper()
	if len(restarts) != 3 || restarts["db-1"] != 1 || restarts["db-2"] != 1 || restarts["db-3"] != 1 {
		t.Fatalf("restarts %s %v; want each member once", what, restarts)
	}
}

// checkReissuing: the Certificate moves to the new issuer only now, and the stage waits for
// the re-issued certificate.
func checkReissuing(t *testing.T, h *secureHarness, newCA *testpki.CA) {
	t.Helper()
	h.reconcile()
	if h.stage() != etcdv1.ReasonReissuingOnNewCA {
		t.Fatalf("stage %q once every member trusts both; want ReissuingOnNewCA", h.stage())
	}
	h.reconcile()
	if got := h.certificateIssuer("db-peer-tls"); got != "ca-2" {
		t.Fatalf("peer Certificate issuer %q at ReissuingOnNewCA; want ca-2", got)
	}
	if after := h.reconcileAfter(); after <= 0 || after > rotationRetry {
		t.Fatalf("waiting for the re-issued certificate to be served looks again after %v; want within %v (no event ends that wait)", after, rotationRetry)
	}
	if h.stage() != etcdv1.ReasonReissuingOnNewCA {
		t.Fatalf("stage %q before cert-manager re-issued; want ReissuingOnNewCA", h.stage())
	}
	h.setSecretData("db-peer-tls", tlsData(t, newCA, "db-peer-tls")) // cert-manager re-issues
	h.reconcile()
	if h.stage() != etcdv1.ReasonOperatorClientMoved {
		t.Fatalf("stage %q once re-issued and served; want OperatorClientMoved", h.stage())
	}
}

// checkDroppingOldCA: the bundle loses the old CA, every member restarts once more, and the
// probes go.
func checkDroppingOldCA(t *testing.T, h *secureHarness, newCA *testpki.CA) {
	t.Helper()
	h.reconcile()
	if h.stage() != etcdv1.ReasonDroppingOldCA {
		t.Fatalf("stage %q; want DroppingOldCA", h.stage())
	}
	h.reconcile()
	peer := h.secret(specs.CABundleSecretName("db")).Data[specs.CABundleKeyPeer]
	if pemCount(peer) != 1 || !bytes.Contains(peer, newCA.PEM) {
		t.Fatalf("bundle while dropping: %d peer CAs; want the new one alone", pemCount(peer))
	}
	restarts := map[string]int{}
	h.rollAll(etcdv1.ReasonDroppingOldCA, restarts)
	expectOnceEach(t, "to drop the old CA", restarts)
	h.reconcile()
	if h.stage() != etcdv1.ReasonCARotated {
		t.Fatalf("stage %q after the last roll; want CARotated", h.stage())
	}
	h.expectCondition(etcdv1.ConditionCARotation, metav1.ConditionFalse, etcdv1.ReasonCARotated, "rotated")
	probeCert := &unstructured.Unstructured{}
	probeCert.SetGroupVersionKind(specs.CertificateGVK)
	if err := h.api.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: specs.CAProbeName("db-peer-tls")}, probeCert); err == nil {
		t.Fatal("the probe Certificate outlived the rotation")
	}
	emptied := h.secret(specs.CAProbeName("db-peer-tls"))
	if holdsKeyMaterial(emptied) {
		t.Fatalf("the probe Secret still holds key material after the rotation; want it emptied (its certificate is a client of the cluster)")
	}
	if _, ok := emptied.Data[corev1.TLSCertKey]; !ok {
		t.Fatal("the emptied probe Secret lost tls.crt, which the API server requires of a kubernetes.io/tls Secret")
	}
	if _, ok := emptied.Data[corev1.TLSPrivateKeyKey]; !ok {
		t.Fatal("the emptied probe Secret lost tls.key, which the API server requires of a kubernetes.io/tls Secret")
	}
	h.reconcile()
	if got := h.podNames(); len(got) != 3 || h.stage() != etcdv1.ReasonCARotated {
		t.Fatalf("after the rotation: Pods %v, stage %q; want all up and nothing more", got, h.stage())
	}
}

// With the user's own Secrets, the CA changes in place: the new CA put into ca.crt beside
// the old one restarts every member once (one at a time), the new certificates in tls.crt
// restart nobody (etcd reads them at the next handshake), and the old CA taken out restarts
// every member once more. The first look records what members trust and restarts nobody.
func TestCARotationOfOwnSecrets(t *testing.T) {
	oldCA, newCA := testpki.NewCA(t), testpki.NewCA(t)
	h := newSecureHarness(t, false, userSecretsSpec)
	now := time.Date(2026, 12, 6, 1, 0, 0, 0, time.UTC)
	h.r.Now = func() time.Time { return now }
	for _, name := range []string{"server", "operator", "peer"} {
		h.create(secret(name, tlsData(t, oldCA, name)))
	}
	h.reconcile()
	h.running()
	h.startPods()
	h.reconcile()
	rot := h.clusterObj().Status.CARotation
	if rot == nil || rot.SecretsHash == "" || rot.Stage != etcdv1.ReasonCARotated {
		t.Fatalf("first look recorded %+v; want the fingerprint of ca.crt, nothing under way", rot)
	}
	if got := h.podNames(); len(got) != 3 {
		t.Fatalf("Pods %v", got)
	}
	for _, ev := range h.events() {
		if bytes.Contains([]byte(ev), []byte("CARotated")) {
			t.Fatalf("the first look announced a rotation: %q", ev)
		}
	}

	both := slices.Concat(oldCA.PEM, newCA.PEM)
	withCA := func(name string, ca *testpki.CA, caPEM []byte) {
		data := tlsData(t, ca, name)
		data[specs.SecretKeyCA] = caPEM
		h.setSecretData(name, data)
	}
	checkSettles(t, h, func() { withCA("server", oldCA, both) }, func() { withCA("peer", oldCA, both) }, &now)
	restarts := map[string]int{}
	h.rollAll(etcdv1.ReasonReloadingCAs, restarts)
	expectOnceEach(t, "to load both CAs", restarts)
	h.reconcile()
	if h.stage() != etcdv1.ReasonCARotated {
		t.Fatalf("stage %q after every member restarted; want CARotated", h.stage())
	}

	withCA("server", newCA, both)
	withCA("peer", newCA, both)
	withCA("operator", newCA, both)
	h.reconcile()
	h.reconcile()
	if got := h.podNames(); len(got) != 3 || h.stage() != etcdv1.ReasonCARotated {
		t.Fatalf("new certificates with the same ca.crt: Pods %v, stage %q; want no restart", got, h.stage())
	}

	withCA("server", newCA, newCA.PEM)
	withCA("peer", newCA, newCA.PEM)
	h.reconcile()
	now = now.Add(carotation.Settle)
	restarts = map[string]int{}
	h.rollAll(etcdv1.ReasonReloadingCAs, restarts)
	expectOnceEach(t, "to drop the old CA", restarts)
	h.reconcile()
	h.expectCondition(etcdv1.ConditionCARotation, metav1.ConditionFalse, etcdv1.ReasonCARotated, "changed ca.crt")
}

// checkSettles makes two changes of ca.crt half a Settle apart and checks that the first is
// recorded at once, the second replaces it, and nobody restarts before the last one settled;
// then it moves the clock past that.
func checkSettles(t *testing.T, h *secureHarness, first, second func(), now *time.Time) {
	t.Helper()
	first()
	h.reconcile()
	if h.stage() != etcdv1.ReasonReloadingCAs {
		t.Fatalf("stage %q after ca.crt changed; want ReloadingCAs", h.stage())
	}
	recorded := h.clusterObj().Status.CARotation.SecretsHash
	*now = now.Add(carotation.Settle / 2)
	second() // the other Secret a moment later
	h.reconcile()
	h.reconcile()
	if got := h.podNames(); len(got) != 3 || h.clusterObj().Status.CARotation.SecretsHash == recorded {
		t.Fatalf("within %v of the last change: Pods %v, recorded %q (first %q); want nobody restarted and the newest recorded",
			carotation.Settle, got, h.clusterObj().Status.CARotation.SecretsHash, recorded)
	}
	for _, m := range h.members() {
		if m.Spec.TLS.CABundleHash != "" {
			t.Fatalf("member %s marked before the change settled", m.Name)
		}
	}
	*now = now.Add(carotation.Settle)
}
