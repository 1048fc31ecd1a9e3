package legacy

import (
	"context"
	"crypto/x509"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
	"github.com/quorumkeeper/etcd-operator/internal/testpki"
	"github.com/quorumkeeper/etcd-operator/test/etcdload"
	"github.com/quorumkeeper/etcd-operator/test/robustness"
)

// cozystackEtcdVersion is the etcd Cozystack's cluster runs.
const cozystackEtcdVersion = "3.6.16"

const cozystackRootPassword = "cozystack-root-Pa55word-long"

// TestMigrateFromTheRealCozystackOperator: Cozystack's operator v0.5.4 (built from its source
// by hack/legacy-migrations.sh, its CRDs in place of ours while it runs) creates a
// three-member cluster with TLS on both ports and auth on (root's password from the
// basic-auth Secret of spec.auth.rootCredentialsSecretRef), a writer logs in as root and puts
// keys through the client Service; then Cozystack's operator is stopped, ours started (our
// CRDs back), and `kubectl etcd migrate cozystack` takes the cluster over: no write fails,
// every member keeps its etcd ID, auth stays on with root's password unchanged (and recorded
// as applied), and ours scales it 3 -> 5 -> 3 (no write failing through the scale-out, at most
// two removals' worth through the scale-in) with every acknowledged key kept.
func TestMigrateFromTheRealCozystackOperator(t *testing.T) {
	switchTo(t, "cozystack")
	ns := namespace(t, "legacy-cozystack-")
	asRoot := cozystackSecrets(t, ns, "cz")
	cluster := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": etcdv1.GroupVersion.String(), "kind": "EtcdCluster",
		"metadata": map[string]any{"name": "cz", "namespace": ns},
		"spec": map[string]any{
			"replicas": int64(3), "version": cozystackEtcdVersion,
			"tls": map[string]any{
				"client": map[string]any{"serverSecretRef": map[string]any{"name": "cz-server-tls"},
					"operatorClientSecretRef": map[string]any{"name": "cz-operator-tls"}},
				"peer": map[string]any{"secretRef": map[string]any{"name": "cz-peer-tls"}},
			},
			"auth": map[string]any{"enabled": true, "rootCredentialsSecretRef": map[string]any{"name": "cz-root"}},
		},
	}}
	create(t, cluster)
	etcdload.Eventually(t, 6*time.Minute, "Cozystack's operator runs the cluster with auth on", func() error {
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(cluster), cluster); err != nil {
			return err
		}
		ready, _, _ := unstructured.NestedInt64(cluster.Object, "status", "readyMembers")
		auth, _, _ := unstructured.NestedBool(cluster.Object, "status", "authEnabled")
		if ready != 3 || !auth {
			return fmt.Errorf("status.readyMembers %d, status.authEnabled %t", ready, auth)
		}
		return nil
	})
	rootCli := etcdload.DialService(t, resolver, ns, "cz-client", asRoot)
	checkAuthOn(t, rootCli)
	ids := memberIDs(t, rootCli)
	if len(ids) != 3 {
		t.Fatalf("etcd lists %v, want three members", ids)
	}
	w := etcdload.Start(t, resolver, ns, "cz-client", "cz", asRoot)
	writesAcknowledged(t, w, 20, "Cozystack's operator")

	switchTo(t, "ours")
	c := migrate(t, w, ns, "cozystack", "cz",
		"authentication: on, and it stays on: nothing changes in etcd",
		"the one in Secret cz-root (spec.auth.rootCredentialsSecretRef, unchanged)")
	checkSameMembers(t, c, ids)
	checkAuthOn(t, rootCli)
	applied := &corev1.Secret{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: specs.RootAppliedSecretName("cz")}, applied); err != nil {
		t.Errorf("the Secret recording root's applied password: %v", err)
	} else if string(applied.Data["password"]) != cozystackRootPassword {
		t.Errorf("Secret %s does not record root's password from cz-root", applied.Name)
	}

	scaleOutAndIn(t, w, ns, "cz")
	checkAuthOn(t, rootCli)
}

// cozystackSecrets creates the Secrets of the cluster's spec.tls and spec.auth from one CA:
// server and peer certificates naming the members (under the headless Service <cluster>) and
// the client Service, the operator's client certificate, and root's basic-auth Secret. It
// returns the access of an application logging in as root over TLS.
func cozystackSecrets(t *testing.T, ns, cluster string) etcdload.Access {
	t.Helper()
	ca := testpki.NewCA(t)
	members := []string{"*." + cluster + "." + ns + ".svc", "*." + cluster + "." + ns + ".svc.cluster.local"}
	client := cluster + "-client." + ns + ".svc"
	loopback := []string{"127.0.0.1", "::1"}
	app := ca.Issue(t, testpki.Request{CommonName: "kamaji", Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	for name, data := range map[string]map[string][]byte{
		cluster + "-server-tls":   ca.SecretData(t, testpki.Request{CommonName: cluster, DNSNames: append(append([]string(nil), members...), client, client+".cluster.local", "localhost"), IPs: loopback}),
		cluster + "-peer-tls":     ca.SecretData(t, testpki.Request{CommonName: cluster + "-peer", DNSNames: members, IPs: loopback}),
		cluster + "-operator-tls": ca.SecretData(t, testpki.Request{CommonName: specs.OperatorClientCommonName, Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}),
	} {
		create(t, tlsSecret(ns, name, data))
	}
	create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: cluster + "-root", Namespace: ns}, Type: corev1.SecretTypeBasicAuth,
		StringData: map[string]string{"username": "root", "password": cozystackRootPassword}})
	tls, err := robustness.ClientTLS(ca.PEM, app.CertPEM, app.KeyPEM, client)
	if err != nil {
		t.Fatal(err)
	}
	return etcdload.Access{TLS: tls, Username: "root", Password: cozystackRootPassword}
}
