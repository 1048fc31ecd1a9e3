package e2e

import (
	"context"
	"crypto/x509"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
	"github.com/quorumkeeper/etcd-operator/internal/testpki"
)

// Before the operator has enabled authentication, a new cluster's members take writes from
// anyone who reaches them, and the headless Service names every member before it is ready.
// Here the window is held open: the operator's client certificate is from a CA etcd does not
// trust, so the operator cannot enable auth while the members form the cluster among
// themselves. A Pod of another namespace with a certificate from the cluster's own CA then
// tries to write through a member's DNS name and cannot connect; once the operator's
// certificate is fixed and auth is on, the same write reaches etcd and etcd refuses it.
func TestNoClientWritesBeforeAuthIsOn(t *testing.T) {
	t.Parallel()
	ns, elsewhere := namespace(t), namespace(t)
	const name = "window"
	c := &etcdv1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: etcdv1.EtcdClusterSpec{Replicas: ptr(int32(3)), Version: etcdVersion,
			TLS: &etcdv1.EtcdClusterTLS{
				Client: &etcdv1.ClientTLS{ServerSecretRef: &corev1.LocalObjectReference{Name: "server"},
					OperatorClientSecretRef: &corev1.LocalObjectReference{Name: "operator"}},
				Peer: &etcdv1.PeerTLS{SecretRef: &corev1.LocalObjectReference{Name: "peer"}},
			},
			Auth: &etcdv1.AuthSpec{Enabled: true, RootCredentialsSecretRef: &corev1.LocalObjectReference{Name: "root"}}},
	}
	ca, stranger := testpki.NewCA(t), testpki.NewCA(t)
	loopback := []string{"127.0.0.1", "::1"}
	clientOnly := []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	operator := testpki.Request{CommonName: specs.OperatorClientCommonName, Usages: clientOnly}
	create(t, tlsSecret(ns, "server", ca.SecretData(t, testpki.Request{DNSNames: specs.ServerDNSNames(c, ""), IPs: loopback})))
	create(t, tlsSecret(ns, "peer", ca.SecretData(t, testpki.Request{DNSNames: specs.PeerDNSNames(c, ""), IPs: loopback})))
	create(t, tlsSecret(ns, "operator", stranger.SecretData(t, operator)))
	create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "root", Namespace: ns}, Data: map[string][]byte{"password": []byte("a-long-root-password")}})
	create(t, tlsSecret(elsewhere, "app", ca.SecretData(t, testpki.Request{CommonName: "app", Usages: clientOnly})))
	create(t, c)

	member := waitMembersServing(t, ns, name, 3)
	if getCluster(t, ns, name).Status.AuthEnabled {
		t.Fatal("auth enabled although etcd refuses the operator's certificate")
	}
	host := fmt.Sprintf("%s.%s.%s.svc.cluster.local", member, name, ns)
	startPut(t, elsewhere, "before-auth", host)
	msg := waitProbe(t, elsewhere, "before-auth", corev1.PodFailed)
	if strings.Contains(msg, "permission denied") {
		t.Fatalf("the write before auth reached etcd: %q; want no connection", msg)
	}
	t.Logf("the write before auth: %q", msg)

	s := getSecret(t, ns, "operator")
	s.Data = ca.SecretData(t, operator)
	if err := k8s.Update(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	waitAuthEnabledOf(t, ns, name)
	// The policy that kept clients out is gone; etcd itself refuses now.
	startPut(t, elsewhere, "after-auth", host)
	if msg := waitProbe(t, elsewhere, "after-auth", corev1.PodFailed); !strings.Contains(msg, "permission denied") {
		t.Fatalf("the write without a password after auth: %q; want etcd's permission denied", msg)
	}
}

// waitMembersServing waits until n member Pods of the cluster are Ready and returns one name.
func waitMembersServing(t *testing.T, ns, cluster string, n int) string {
	t.Helper()
	var name string
	eventually(t, 5*time.Minute, fmt.Sprintf("%d member Pods Ready", n), func() error {
		pods := &corev1.PodList{}
		if err := k8s.List(context.Background(), pods, client.InNamespace(ns), client.MatchingLabels{etcdv1.LabelCluster: cluster}); err != nil {
			return err
		}
		ready := 0
		for i := range pods.Items {
			if podIsReady(&pods.Items[i]) {
				ready, name = ready+1, pods.Items[i].Name
			}
		}
		if ready < n {
			return fmt.Errorf("%d of %d Ready", ready, n)
		}
		return nil
	})
	return name
}

// startPut runs etcdctl put, without a user, through host's client port in a Pod of its own
// presenting the certificate of Secret app (its namespace's): whether the Pod succeeds says
// whether the write was taken, its message why not. It is never restarted.
func startPut(t *testing.T, ns, name, host string) {
	t.Helper()
	const dir = "/etc/app-tls"
	create(t, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever,
		Volumes:       []corev1.Volume{{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "app"}}}},
		Containers: []corev1.Container{{Name: "etcdctl", Image: "quay.io/coreos/etcd:v" + etcdVersion,
			Command: []string{"/usr/local/bin/etcdctl", "--endpoints=https://" + host + ":2379",
				"--cacert=" + dir + "/ca.crt", "--cert=" + dir + "/tls.crt", "--key=" + dir + "/tls.key",
				"--dial-timeout=10s", "--command-timeout=15s", "put", "written-by", name},
			VolumeMounts:             []corev1.VolumeMount{{Name: "tls", MountPath: dir, ReadOnly: true}},
			TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError}}}})
}

// A server issuer shared with other workloads (the journey's etcd-ca here) and a client
// issuer of the cluster's own (db-clients): a certificate with common name root that another
// workload got from the shared issuer is not accepted by the members at all, so it cannot act
// as etcd's root (etcd takes a client certificate's common name as the user); a client
// certificate from the cluster's issuer gets in and, without a password, may do nothing;
// root's password still works.
func TestRootCertificateFromASharedIssuerIsNotRoot(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	const name = "pinned"
	journeyCA(t, ns)
	applyManifest(t, ns, clientIssuerManifest)
	kubectl(t, ns, "wait", "--for=condition=Ready", "certificate/pinned-clients-ca", "issuer/pinned-clients", "--timeout=2m")
	create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "pinned-root", Namespace: ns}, Data: map[string][]byte{"password": []byte("a-long-root-password")}})
	create(t, &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: etcdv1.EtcdClusterSpec{
		Replicas: ptr(int32(3)), Version: etcdVersion,
		TLS: &etcdv1.EtcdClusterTLS{
			Client: &etcdv1.ClientTLS{CertManager: &etcdv1.ClientCertManager{ServerIssuerRef: etcdv1.IssuerReference{Name: "etcd-ca"},
				OperatorClientIssuerRef: &etcdv1.IssuerReference{Name: "pinned-clients"}}},
			Peer: &etcdv1.PeerTLS{CertManager: &etcdv1.PeerCertManager{IssuerRef: etcdv1.IssuerReference{Name: "etcd-ca"}}},
		},
		Auth: &etcdv1.AuthSpec{Enabled: true, RootCredentialsSecretRef: &corev1.LocalObjectReference{Name: "pinned-root"}}}})
	waitSettled(t, ns, name, 3, 5*time.Minute)
	waitAuthEnabledOf(t, ns, name)

	serverCA := getSecret(t, ns, specs.ServerSecretName(getCluster(t, ns, name))).Data[specs.SecretKeyCA]
	withCert := func(issuer, commonName string) access {
		secret := issueClientCertificate(t, ns, commonName+"-"+issuer, issuer, commonName)
		return access{TLS: clientTLS(t, serverCA, secret.Data[specs.SecretKeyCert], secret.Data[specs.SecretKeyKey], clientServiceHost(ns, name))}
	}
	impostor := withCert("etcd-ca", "root")
	for _, ip := range memberIPs(t, ns, name) {
		if err := serverVerdict(ip, specs.ClientPort, impostor.TLS); err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Fatalf("a member at %s answered a certificate of the shared issuer with %v; want it refused in the handshake", ip, err)
		}
	}
	if err := tryPut(ns, name, impostor); err == nil {
		t.Fatal("a certificate with common name root from the shared issuer wrote to the cluster")
	}
	app := withCert("pinned-clients", "app")
	checkOnlyPasswordLetsInto(t, ns, name, app, "a-long-root-password")
}

// clientIssuerManifest is a CA of one cluster's clients, made by the journey's self-signed
// Issuer: what docs/tls.md tells users to give spec.tls.client.certManager.operatorClientIssuerRef.
const clientIssuerManifest = `apiVersion: cert-manager.io/v1
kind: Certificate
metadata:
  name: pinned-clients-ca
spec:
  isCA: true
  commonName: pinned-clients-ca
  secretName: pinned-clients-ca
  privateKey:
    algorithm: ECDSA
    size: 256
  issuerRef:
    name: selfsigned
    kind: Issuer
---
apiVersion: cert-manager.io/v1
kind: Issuer
metadata:
  name: pinned-clients
spec:
  ca:
    secretName: pinned-clients-ca
`

// issueClientCertificate has cert-manager issue a client certificate with commonName from the
// Issuer issuer into Secret name, and returns the Secret.
func issueClientCertificate(t *testing.T, ns, name, issuer, commonName string) *corev1.Secret {
	t.Helper()
	applyManifest(t, ns, fmt.Sprintf(`apiVersion: cert-manager.io/v1
kind: Certificate
metadata:
  name: %[1]s
spec:
  secretName: %[1]s
  commonName: %[2]s
  usages: [digital signature, client auth]
  privateKey:
    algorithm: ECDSA
    size: 256
  issuerRef:
    name: %[3]s
`, name, commonName, issuer))
	kubectl(t, ns, "wait", "--for=condition=Ready", "certificate/"+name, "--timeout=2m")
	return getSecret(t, ns, name)
}

func applyManifest(t *testing.T, ns, manifest string) {
	t.Helper()
	if _, err := runKubectl(ns, manifest, "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
}
