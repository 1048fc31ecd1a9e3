package e2e

import (
	"context"
	"crypto/x509"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/aenixfixture"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
	"github.com/quorumkeeper/etcd-operator/internal/testpki"
)

// memberNames are the names a member under subdomain has in namespace ns, short and fully
// qualified, as a wildcard.
func memberNames(subdomain, ns string) []string {
	return []string{"*." + subdomain + "." + ns + ".svc", "*." + subdomain + "." + ns + ".svc.cluster.local"}
}

// serviceNames are a Service's short and fully qualified names.
func serviceNames(service, ns string) []string {
	return []string{service + "." + ns + ".svc", service + "." + ns + ".svc.cluster.local"}
}

// aenixAuthSecrets creates the Secrets of aenixfixture.TLSSecrets("lg") from one CA, as a
// legacy user (Kamaji's guide) makes them: server and peer certificates naming the members
// under the legacy headless Service (where the members this operator adds live too), the
// Services lg and lg-client; the legacy operator's client certificate with common name root,
// which is root once auth is on; and the CA Secrets. It returns the TLS of a client that is
// root through that certificate, reaching the Service lg.
func aenixAuthSecrets(t *testing.T, ns string) access {
	t.Helper()
	ca := testpki.NewCA(t)
	names := aenixfixture.TLSSecrets("lg")
	members := memberNames(aenixfixture.HeadlessService("lg"), ns)
	server := append(append(append([]string(nil), members...), serviceNames("lg", ns)...), serviceNames("lg-client", ns)...)
	loopback := []string{"127.0.0.1", "::1"}
	root := ca.Issue(t, testpki.Request{CommonName: "root", Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	for name, data := range map[string]map[string][]byte{
		names["serverSecret"]: ca.SecretData(t, testpki.Request{CommonName: "lg", DNSNames: append(server, "localhost"), IPs: loopback}),
		names["peerSecret"]:   ca.SecretData(t, testpki.Request{CommonName: "lg-peer", DNSNames: members, IPs: loopback}),
		names["clientSecret"]: {specs.SecretKeyCert: root.CertPEM, specs.SecretKeyKey: root.KeyPEM, specs.SecretKeyCA: ca.PEM},
	} {
		create(t, tlsSecret(ns, name, data))
	}
	for _, field := range []string{"serverTrustedCASecret", "peerTrustedCASecret", "clientTrustedCASecret"} {
		create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: names[field], Namespace: ns}, Data: map[string][]byte{specs.SecretKeyCA: ca.PEM}})
	}
	return access{TLS: clientTLS(t, ca.PEM, root.CertPEM, root.KeyPEM, "lg."+ns+".svc")}
}

// TestMigrateFromAenixOperatorWithAuth is TestMigrateFromAenixOperator for a cluster with
// TLS on both ports and auth on, as the legacy operator runs a Kamaji datastore: root without
// a password, reached by the legacy client certificate (common name root), which the writer
// uses too. `kubectl etcd migrate aenix` takes it over with that certificate: auth stays on
// all along, spec.auth stays unset, no write fails, every key is kept, and this operator
// (root through the same certificate) scales it 3 -> 5 -> 3.
func TestMigrateFromAenixOperatorWithAuth(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	bin := buildPlugin(t)
	asRoot := aenixAuthSecrets(t, ns)
	legacy := buildAenixClusterWith(t, ns, func(legacy map[string]any, sts *appsv1.StatefulSet) {
		aenixfixture.WithTLS(legacy, sts)
		aenixfixture.WithAuth(legacy)
	})
	rootCli := dialService(t, ns, "lg", asRoot)
	eventually(t, time.Minute, "auth enabled as the legacy operator enables it", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return aenixfixture.EnableAuth(ctx, rootCli)
	})
	checkAuthOn(t, rootCli)
	w := startWriterVia(t, ns, "lg", "lg", asRoot)
	before := observeAenixBefore(t, ns, serviceMemberIDsWith(t, ns, "lg", asRoot))

	out := mustPlugin(t, bin, ns, "migrate", "aenix", "lg")
	for _, want := range []string{"authentication: on, as spec.security.enableAuth says, and it stays on: nothing changes in etcd",
		"the client certificate in Secret lg-client-cert", "dry run: nothing was changed"} {
		if !strings.Contains(out, want) {
			t.Errorf("dry run output lacks %q:\n%s", want, out)
		}
	}
	c := applyMigration(t, bin, ns, "aenix", "lg")
	checkAenixAdopted(t, ns, c, legacy, before)
	if c.Spec.Auth != nil || specs.OperatorClientSecretName(c) != "lg-client-cert" {
		t.Errorf("spec.auth %+v, operator client Secret %q: want no spec.auth and the legacy client certificate", c.Spec.Auth, specs.OperatorClientSecretName(c))
	}
	checkAuthOn(t, rootCli)
	noFailedWrite(t, w, "the takeover")

	scaleOutAndInUnder(t, ns, "lg", w)
	checkAuthOn(t, rootCli)
}

// checkAuthOn: etcd has authentication on, and a client without credentials reads nothing.
func checkAuthOn(t *testing.T, cli *clientv3.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cli.AuthStatus(ctx)
	if err != nil || !resp.Enabled {
		t.Fatalf("auth status %+v, %v; want enabled", resp, err)
	}
}

// serviceMemberIDsWith is serviceMemberIDs with access a.
func serviceMemberIDsWith(t *testing.T, ns, service string, a access) map[string]string {
	t.Helper()
	cli := dialService(t, ns, service, a)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cli.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, m := range resp.Members {
		out[m.Name] = fmt.Sprintf("%x", m.ID)
	}
	return out
}

const cozystackRootPassword = "cozystack-root-Pa55word-long"

// TestMigrateFromCozystackOperatorWithAuth is TestMigrateFromCozystackOperator for a cluster
// with TLS on both ports and auth on, as Cozystack's operator runs one: root with the
// password of spec.auth.rootCredentialsSecretRef (a basic-auth Secret), which the writer logs
// in with. `kubectl etcd migrate cozystack` takes it over with that Secret: auth stays on all
// along, root's password is unchanged, no write fails, every key is kept, and the cluster
// scales 3 -> 5 -> 3 under this operator.
func TestMigrateFromCozystackOperatorWithAuth(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	bin := buildPlugin(t)
	ca := testpki.NewCA(t)
	members := memberNames("cz", ns)
	loopback := []string{"127.0.0.1", "::1"}
	app := ca.Issue(t, testpki.Request{CommonName: "kamaji", Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	for name, data := range map[string]map[string][]byte{
		"cz-server-tls":   ca.SecretData(t, testpki.Request{CommonName: "cz", DNSNames: append(append(append([]string(nil), members...), serviceNames("cz-client", ns)...), "localhost"), IPs: loopback}),
		"cz-peer-tls":     ca.SecretData(t, testpki.Request{CommonName: "cz-peer", DNSNames: members, IPs: loopback}),
		"cz-operator-tls": ca.SecretData(t, testpki.Request{CommonName: specs.OperatorClientCommonName, Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}),
	} {
		create(t, tlsSecret(ns, name, data))
	}
	create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "cz-root", Namespace: ns}, Type: corev1.SecretTypeBasicAuth,
		StringData: map[string]string{"username": "root", "password": cozystackRootPassword}})
	cluster := &etcdv1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "cz", Namespace: ns},
		Spec: etcdv1.EtcdClusterSpec{Replicas: ptr(int32(0)), Version: etcdVersion,
			TLS: &etcdv1.EtcdClusterTLS{
				Client: &etcdv1.ClientTLS{ServerSecretRef: &corev1.LocalObjectReference{Name: "cz-server-tls"},
					OperatorClientSecretRef: &corev1.LocalObjectReference{Name: "cz-operator-tls"}},
				Peer: &etcdv1.PeerTLS{SecretRef: &corev1.LocalObjectReference{Name: "cz-peer-tls"}},
			},
			Auth: &etcdv1.AuthSpec{Enabled: true, RootCredentialsSecretRef: &corev1.LocalObjectReference{Name: "cz-root"}}},
	}
	create(t, cluster)
	// Cozystack's operator had turned auth on long before (its status.authEnabled, a field
	// of the same name here): this operator, running all along here, must not do it again.
	markAuthEnabled(t, cluster)
	buildCozystackClusterWith(t, cluster, true)
	asRoot := access{TLS: clientTLS(t, ca.PEM, app.CertPEM, app.KeyPEM, clientServiceHost(ns, "cz")), Username: "root", Password: cozystackRootPassword}
	rootCli := dialMembers(t, ns, cozystackMembers, access{TLS: asRoot.TLS})
	eventually(t, time.Minute, "auth enabled as Cozystack's operator enables it", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return aenixfixture.EnableAuthWithPassword(ctx, rootCli, cozystackRootPassword)
	})
	setReplicas(t, ns, "cz", 3)
	w := startWriterWith(t, ns, "cz", "cz", asRoot)
	pods, restarts := podUIDs(t, ns, cozystackMembers), containerRestarts(t, ns, cozystackMembers)
	ids := serviceMemberIDsWith(t, ns, "cz-client", asRoot)
	authed := dialService(t, ns, "cz-client", asRoot)
	checkAuthOn(t, authed)

	out := mustPlugin(t, bin, ns, "migrate", "cozystack", "cz")
	for _, want := range []string{"authentication: on, and it stays on: nothing changes in etcd",
		"the one in Secret cz-root (spec.auth.rootCredentialsSecretRef, unchanged)", "dry run: nothing was changed"} {
		if !strings.Contains(out, want) {
			t.Errorf("dry run output lacks %q:\n%s", want, out)
		}
	}
	c := applyMigration(t, bin, ns, "cozystack", "cz")
	checkSameMembers(t, ns, c, cozystackMembers, pods, ids)
	for _, name := range cozystackMembers {
		checkAdoptedMember(t, ns, name, restarts[name], ids[name])
	}
	waitAuthEnabledOf(t, ns, "cz")
	checkAuthOn(t, authed)
	applied := getSecret(t, ns, specs.RootAppliedSecretName("cz"))
	if string(applied.Data["password"]) != cozystackRootPassword {
		t.Errorf("Secret %s does not record root's password from cz-root", applied.Name)
	}
	noFailedWrite(t, w, "the takeover")

	c = scaleOutAndInUnder(t, ns, "cz", w)
	checkAdoptedRemovals(t, ns, c)
	checkAuthOn(t, authed)
}

// scaleOutAndInUnder is scaleOutAndIn under the writer w: no write fails while the cluster
// grows to 5 (learners added and promoted stop no member); the two voters removed are each
// stopped first (MemberStopping), so only a leadership handed over may fail a put; every
// acknowledged write is read back.
func scaleOutAndInUnder(t *testing.T, ns, cluster string, w *writer) *etcdv1.EtcdCluster {
	t.Helper()
	setReplicas(t, ns, cluster, 5)
	c := waitSettled(t, ns, cluster, 5, 6*time.Minute)
	t.Logf("settled at 5: %v", memberIDs(c))
	noFailedWrite(t, w, "the takeover and the scale-out")
	setReplicas(t, ns, cluster, 3)
	c = waitSettled(t, ns, cluster, 3, 6*time.Minute)
	t.Logf("settled at 3: %v", memberIDs(c))
	w.stopAndVerify(t, 50)
	onlyLeaderMoveFailures(t, ns, w, "the scale-in from 5 to 3")
	return c
}

// markAuthEnabled sets status.authEnabled, as Cozystack's operator left it.
func markAuthEnabled(t *testing.T, c *etcdv1.EtcdCluster) {
	t.Helper()
	eventually(t, time.Minute, "status.authEnabled set", func() error {
		got := &etcdv1.EtcdCluster{}
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(c), got); err != nil {
			return err
		}
		patch := client.MergeFrom(got.DeepCopy())
		got.Status.AuthEnabled = true
		return k8s.Status().Patch(context.Background(), got, patch)
	})
}

// dialMembers connects to the named members by their Pods' addresses.
func dialMembers(t *testing.T, ns string, names []string, a access) *clientv3.Client {
	t.Helper()
	var endpoints []string
	for _, name := range names {
		pod := &corev1.Pod{}
		if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, pod); err != nil {
			t.Fatal(err)
		}
		endpoints = append(endpoints, a.Scheme()+"://"+pod.Status.PodIP+":2379")
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, TLS: a.TLS, Username: a.Username, Password: a.Password})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// noFailedWrite: no write of w failed so far, through what.
func noFailedWrite(t *testing.T, w *writer, what string) {
	t.Helper()
	w.NoFailedWrite(t, what)
}
