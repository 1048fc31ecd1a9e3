package legacy

import (
	"context"
	"crypto/x509"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumkeeper/etcd-operator/internal/aenixfixture"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
	"github.com/quorumkeeper/etcd-operator/internal/testpki"
	"github.com/quorumkeeper/etcd-operator/test/etcdload"
	"github.com/quorumkeeper/etcd-operator/test/robustness"
)

// aenixEtcdVersion is the etcd the legacy cluster runs: the newest 3.5 of the local cluster's
// image map (the legacy operator's own default, 3.5.12, is not in it).
const aenixEtcdVersion = "3.5.35"

// TestMigrateFromTheRealAenixOperator: the legacy operator (etcd.aenix.io, built from its
// source by hack/legacy-migrations.sh) creates a three-member cluster with TLS on both ports
// and auth on (it turns auth on itself, root being its client certificate's common name), a
// writer puts keys through the legacy client Service as root; then the legacy operator is
// stopped, ours started, and `kubectl etcd migrate aenix` takes the cluster over: no write
// fails, every member keeps its etcd ID, auth stays on with root still the legacy client
// certificate's, and ours scales it 3 -> 5 -> 3 (no write failing through the scale-out, the
// Service <cluster> never handing the writer a learner; through the scale-in only refusals
// as leadership moves) with every acknowledged key kept.
func TestMigrateFromTheRealAenixOperator(t *testing.T) {
	switchTo(t, "aenix")
	ns := namespace(t, "legacy-aenix-")
	asRoot := aenixSecrets(t, ns, "lg")
	image := specs.Image(specs.DefaultImageRepository, aenixEtcdVersion)
	legacy := &unstructured.Unstructured{Object: aenixfixture.Legacy("lg", ns, 3, image)}
	// WithTLS writes spec.security.tls; the StatefulSet it also edits is the fixture's, thrown
	// away: the real operator makes its own.
	aenixfixture.WithTLS(legacy.Object, aenixfixture.StatefulSet("lg", ns, 3, image))
	aenixfixture.WithAuth(legacy.Object)
	create(t, legacy)

	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "lg", Namespace: ns}}
	etcdload.Eventually(t, 5*time.Minute, "the legacy operator's StatefulSet is ready", func() error {
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(sts), sts); err != nil {
			return err
		}
		if sts.Status.ReadyReplicas != 3 {
			return fmt.Errorf("%d ready", sts.Status.ReadyReplicas)
		}
		return nil
	})
	// The legacy operator turns auth on once its StatefulSet is ready; the writer starts after
	// that, so that any write that fails is the migration's.
	rootCli := etcdload.DialService(t, resolver, ns, "lg", asRoot)
	etcdload.Eventually(t, 3*time.Minute, "the legacy operator turned auth on", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return authOn(ctx, rootCli)
	})
	ids := memberIDs(t, rootCli)
	if len(ids) != 3 {
		t.Fatalf("etcd lists %v, want the three members lg-0..2", ids)
	}
	w := etcdload.Start(t, resolver, ns, "lg", "lg", asRoot)
	writesAcknowledged(t, w, 20, "the legacy operator")

	switchTo(t, "ours")
	c := migrate(t, w, ns, "aenix", "lg", "member lg-0 (etcd ID ",
		"authentication: on, as spec.security.enableAuth says, and it stays on: nothing changes in etcd",
		"the client certificate in Secret lg-client-cert")
	checkSameMembers(t, c, ids)
	if c.Spec.Auth != nil || specs.OperatorClientSecretName(c) != "lg-client-cert" {
		t.Errorf("spec.auth %+v, operator client Secret %q: want no spec.auth and the legacy client certificate", c.Spec.Auth, specs.OperatorClientSecretName(c))
	}
	checkAuthOn(t, rootCli)
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(legacy), legacy); !apierrors.IsNotFound(err) {
		t.Errorf("the legacy EtcdCluster is still there after the migration (%v)", err)
	}

	scaleOutAndIn(t, w, ns, "lg")
	checkAuthOn(t, rootCli)
}

// aenixSecrets creates the Secrets spec.security.tls names (aenixfixture.TLSSecrets), from
// one CA, as a legacy user makes them (Kamaji's guide): server and peer certificates naming
// the members under the legacy headless Service (where ours adds its members too), the
// Services <cluster> and <cluster>-client; the legacy operator's client certificate, common
// name root, which is root once auth is on; and the CA Secrets. It returns the access of a
// client that is root through that certificate, reaching the Service <cluster>.
func aenixSecrets(t *testing.T, ns, cluster string) etcdload.Access {
	t.Helper()
	ca := testpki.NewCA(t)
	names := aenixfixture.TLSSecrets(cluster)
	sub := aenixfixture.HeadlessService(cluster)
	members := []string{"*." + sub + "." + ns + ".svc", "*." + sub + "." + ns + ".svc.cluster.local"}
	var services []string
	for _, svc := range []string{cluster, cluster + "-client", aenixfixture.HeadlessService(cluster)} {
		services = append(services, svc+"."+ns+".svc", svc+"."+ns+".svc.cluster.local")
	}
	loopback := []string{"127.0.0.1", "::1"}
	root := ca.Issue(t, testpki.Request{CommonName: "root", Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	server := append(append(append([]string(nil), members...), services...), "localhost")
	for name, data := range map[string]map[string][]byte{
		names["serverSecret"]: ca.SecretData(t, testpki.Request{CommonName: cluster, DNSNames: server, IPs: loopback}),
		names["peerSecret"]:   ca.SecretData(t, testpki.Request{CommonName: cluster + "-peer", DNSNames: members, IPs: loopback}),
		names["clientSecret"]: {specs.SecretKeyCert: root.CertPEM, specs.SecretKeyKey: root.KeyPEM, specs.SecretKeyCA: ca.PEM},
	} {
		create(t, tlsSecret(ns, name, data))
	}
	// As a cert-manager CA Certificate's Secret holds them: the members mount ca.crt, and the
	// legacy operator's own client reads the server CA from tls.crt (v0.4.2's getTLSConfig).
	for _, field := range []string{"serverTrustedCASecret", "peerTrustedCASecret", "clientTrustedCASecret"} {
		create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: names[field], Namespace: ns},
			Data: map[string][]byte{specs.SecretKeyCA: ca.PEM, specs.SecretKeyCert: ca.PEM}})
	}
	tls, err := robustness.ClientTLS(ca.PEM, root.CertPEM, root.KeyPEM, cluster+"."+ns+".svc")
	if err != nil {
		t.Fatal(err)
	}
	return etcdload.Access{TLS: tls}
}
