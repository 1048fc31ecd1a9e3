package e2e

import (
	"context"
	"crypto/x509"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
	"github.com/quorumkeeper/etcd-operator/internal/testpki"
)

// journeyCluster is the name of the EtcdCluster in docs/tls-journey.md.
const journeyCluster = "secure"

// The journey of docs/tls-journey.md, command by command: a CA from cert-manager, a
// three-member cluster with mutual TLS on both ports, etcdctl inside a member, TLS-only
// ports, and an application certificate that gets in where a client without one does not.
func TestTLSJourney(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	journeyCA(t, ns)
	applyJourney(t, ns, "etcd-cluster.yaml")
	kubectl(t, ns, "wait", "--for=condition=Available", "etcd/"+journeyCluster, "--timeout=5m")
	c := waitSettled(t, ns, journeyCluster, 3, 4*time.Minute)
	if !meta.IsStatusConditionTrue(c.Status.Conditions, etcdv1.ConditionTLSReady) {
		t.Fatalf("TLSReady is not True: %+v", meta.FindStatusCondition(c.Status.Conditions, etcdv1.ConditionTLSReady))
	}

	checkCertificateEvents(t, ns, journeyCluster)

	member := journeyCluster + "-1" // the member the journey's commands exec into
	t.Run("the guide's etcdctl commands with explicit flags", func(t *testing.T) {
		checkGuideCommands(t, ns, journeyCluster, member, 3)
	})
	etcdctl := func(args ...string) string { return guideEtcdctl(t, ns, journeyCluster, member, args...) }
	if out := etcdctl("endpoint", "health", "--cluster"); strings.Count(out, "is healthy") != 3 {
		t.Fatalf("endpoint health --cluster: want 3 healthy members:\n%s", out)
	}
	if out := etcdctl("put", "greeting", "hello"); strings.TrimSpace(out) != "OK" {
		t.Fatalf("put: %q", out)
	}
	if out := etcdctl("get", "greeting"); out != "greeting\nhello\n" {
		t.Fatalf("get: %q", out)
	}
	checkPorts(t, memberIPs(t, ns, journeyCluster)[member])

	app := journeyAppClient(t, ns)
	checkMutualTLS(t, ns, journeyCluster, member, access{TLS: secretTLS(t, app, clientServiceHost(ns, journeyCluster))})

	// Step 5 says why its cluster goes into a namespace of its own: applied over step 2's
	// cluster, the API server refuses it (TestAuthRootPasswordScaleAndPause runs step 5).
	if _, err := runKubectl(ns, journeyManifest(t, "etcd-cluster-auth.yaml"), "apply", "-f", "-"); err == nil ||
		!strings.Contains(err.Error(), "spec.auth cannot be added") {
		t.Fatalf("step 5's cluster applied over step 2's: %v; want the refusal the journey describes", err)
	}
}

// checkCertificateEvents asserts that the cluster's events say which Certificates the
// operator created: each one, not the first only.
func checkCertificateEvents(t *testing.T, ns, cluster string) {
	t.Helper()
	eventually(t, 30*time.Second, "a CertificateCreated event for each Certificate", func() error {
		list := &eventsv1.EventList{}
		if err := k8s.List(context.Background(), list, client.InNamespace(ns)); err != nil {
			return err
		}
		var notes []string
		for _, e := range list.Items {
			if e.Regarding.Name == cluster && e.Reason == "CertificateCreated" {
				notes = append(notes, e.Note)
			}
		}
		for _, name := range []string{"server-tls", "peer-tls", "operator-client-tls"} {
			if !strings.Contains(strings.Join(notes, "\n"), "created Certificate "+cluster+"-"+name+",") {
				return fmt.Errorf("no event for %s-%s in %q", cluster, name, notes)
			}
		}
		return nil
	})
}

// checkMutualTLS asserts that the cluster lets in a client with a certificate from the CA,
// and that a member refuses the same client without one with the TLS alert for it.
func checkMutualTLS(t *testing.T, ns, cluster, member string, withCert access) {
	t.Helper()
	noCert := withCert.TLS.Clone()
	noCert.Certificates = nil
	ip := memberIPs(t, ns, cluster)[member]
	if err := serverVerdict(ip, specs.ClientPort, noCert); err == nil || !strings.Contains(err.Error(), "certificate required") {
		t.Fatalf("%s answered a client without a certificate with %v; want the alert certificate required", member, err)
	}
	if err := tryPut(ns, cluster, access{TLS: noCert}); err == nil {
		t.Fatal("a client without a certificate wrote to the cluster")
	}
	cli := dialClusterWith(t, ns, cluster, withCert)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, "greeting")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "hello" {
		t.Fatalf("a client with a certificate from the CA: %v %v", err, resp)
	}
}

// A cluster with the user's own Secrets (made here from a test CA with the names tls.md
// documents) settles and serves; replacing the server certificate while a client writes is
// seen by every member at its next handshake, and no write fails.
func TestTLSBringYourOwnSecrets(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	const name = "byo"
	c := byoCluster(ns, name, 3)
	ca := testpki.NewCA(t)
	requests := byoRequests(c)
	for secret, r := range requests {
		create(t, tlsSecret(ns, secret, ca.SecretData(t, r)))
	}
	create(t, c)
	waitSettled(t, ns, name, 3, 5*time.Minute)

	app := ca.Issue(t, testpki.Request{CommonName: "app", Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	a := access{TLS: clientTLS(t, ca.PEM, app.CertPEM, app.KeyPEM, clientServiceHost(ns, name))}
	w := startWriterWith(t, ns, name, name, a)
	time.Sleep(2 * time.Second) // some writes before the change, too

	renewed := ca.SecretData(t, requests["byo-server"])
	s := getSecret(t, ns, "byo-server")
	s.Data = renewed
	if err := k8s.Update(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	renewedCert, err := parseCertificate(renewed[specs.SecretKeyCert])
	if err != nil {
		t.Fatal(err)
	}
	waitServed(t, ns, name, specs.ClientPort, a.TLS, renewedCert.SerialNumber.String())
	if failed := w.stopAndVerify(t, 20); failed != 0 {
		t.Fatalf("%d writes failed while the server certificate was replaced", failed)
	}
}

// byoCluster is a cluster of the given size whose TLS Secrets are the user's own:
// <name>-server, <name>-operator (the operator's client certificate) and <name>-peer.
func byoCluster(ns, name string, replicas int32) *etcdv1.EtcdCluster {
	return &etcdv1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: etcdv1.EtcdClusterSpec{Replicas: &replicas, Version: etcdVersion, TLS: &etcdv1.EtcdClusterTLS{
			Client: &etcdv1.ClientTLS{
				ServerSecretRef:         &corev1.LocalObjectReference{Name: name + "-server"},
				OperatorClientSecretRef: &corev1.LocalObjectReference{Name: name + "-operator"},
			},
			Peer: &etcdv1.PeerTLS{SecretRef: &corev1.LocalObjectReference{Name: name + "-peer"}},
		}},
	}
}

// byoRequests are the certificates of byoCluster's Secrets, by Secret name: the server's and
// the peer's for the members' names and the loopback addresses, the operator's for client
// authentication only.
func byoRequests(c *etcdv1.EtcdCluster) map[string]testpki.Request {
	loopback := []string{"127.0.0.1", "::1"}
	return map[string]testpki.Request{
		c.Name + "-server":   {DNSNames: specs.ServerDNSNames(c, ""), IPs: loopback},
		c.Name + "-peer":     {DNSNames: specs.PeerDNSNames(c, ""), IPs: loopback},
		c.Name + "-operator": {CommonName: specs.OperatorClientCommonName, Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}},
	}
}

// The journey's cluster applied before its CA waits, says why, and proceeds once the CA is
// there; then cert-manager renews the server, peer and operator client certificates on demand
// (the journey's kubectl command) while a client writes: every member serves the new server and
// peer certificates, no write fails, and the operator, now with its new client certificate,
// still scales the cluster.
func TestTLSForcedRenewal(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	applyJourney(t, ns, "etcd-cluster.yaml")
	waitIssuerNotFound(t, ns)
	journeyCA(t, ns)
	waitSettled(t, ns, journeyCluster, 3, 5*time.Minute)
	app := journeyAppClient(t, ns)
	a := access{TLS: secretTLS(t, app, clientServiceHost(ns, journeyCluster))}
	w := startWriterWith(t, ns, journeyCluster, "renewal", a)

	serials := map[string]string{}
	for _, s := range []string{"secure-server-tls", "secure-peer-tls", "secure-operator-client-tls"} {
		serials[s] = secretSerial(t, ns, s)
		kubectl(t, ns, "patch", "certificate", s, "--subresource=status", "--type=json", "-p",
			`[{"op":"add","path":"/status/conditions/-","value":{"type":"Issuing","status":"True","reason":"ManuallyTriggered","message":"renewal requested by hand"}}]`)
	}
	for s, old := range serials {
		eventually(t, 2*time.Minute, s+" renewed", func() error {
			if now := secretSerial(t, ns, s); now == old {
				return fmt.Errorf("still serial %s", now)
			}
			return nil
		})
	}
	waitServed(t, ns, journeyCluster, specs.ClientPort, a.TLS, secretSerial(t, ns, "secure-server-tls"))
	peerTLS := secretTLS(t, app, specs.HeadlessServiceName(journeyCluster)+"."+ns+".svc")
	waitServed(t, ns, journeyCluster, specs.PeerPort, peerTLS, secretSerial(t, ns, "secure-peer-tls"))

	setReplicas(t, ns, journeyCluster, 4)
	waitSettled(t, ns, journeyCluster, 4, 5*time.Minute)
	if failed := w.stopAndVerify(t, 20); failed != 0 {
		t.Fatalf("%d writes failed during the renewal", failed)
	}
}

// waitIssuerNotFound waits until the journey's cluster, applied before its CA, says so with
// the troubleshooting command of the journey, and checks that it made no member meanwhile.
func waitIssuerNotFound(t *testing.T, ns string) {
	t.Helper()
	eventually(t, time.Minute, "TLSReady False IssuerNotFound", func() error {
		out, err := runKubectl(ns, "", "get", "etcd", journeyCluster, "-o",
			`jsonpath={range .status.conditions[*]}{.type} {.status} {.reason}: {.message}{"\n"}{end}`)
		if err != nil {
			return err
		}
		if !strings.Contains(out, "TLSReady False IssuerNotFound") {
			return fmt.Errorf("conditions:\n%s", out)
		}
		return nil
	})
	members := &etcdv1.EtcdMemberList{}
	if err := k8s.List(context.Background(), members, client.InNamespace(ns)); err != nil || len(members.Items) > 0 {
		t.Fatalf("%d members made without certificates (%v)", len(members.Items), err)
	}
}

// create makes obj in the API or fails the test.
func create(t *testing.T, obj client.Object) {
	t.Helper()
	if err := k8s.Create(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
}
