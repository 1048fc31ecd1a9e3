package certificates

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller/children/childtest"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
	"github.com/quorumkeeper/etcd-operator/internal/testpki"
)

// The leaf is tls.crt's first certificate, whatever chain follows it; ca.crt's earliest
// certificate counts; a key without a certificate gives nothing.
func TestSecretExpiries(t *testing.T) {
	t.Parallel()
	ca, older := testpki.NewCA(t), testpki.NewCA(t)
	leafEnd := time.Now().Add(3 * time.Hour).Truncate(time.Second).UTC()
	data := ca.SecretData(t, testpki.Request{CommonName: "server", NotAfter: leafEnd})
	soon := older.Issue(t, testpki.Request{CommonName: "old CA's", NotAfter: time.Now().Add(time.Hour)})
	exp := func(key string, at time.Time) etcdv1.CertificateExpiry {
		return etcdv1.CertificateExpiry{Secret: "s", Key: key, NotAfter: metav1.NewTime(at.UTC().Truncate(time.Second))}
	}
	for _, tc := range []struct {
		name string
		data map[string][]byte
		want []etcdv1.CertificateExpiry
	}{
		{"leaf and CA", data, []etcdv1.CertificateExpiry{exp(specs.SecretKeyCert, leafEnd), exp(specs.SecretKeyCA, ca.Cert.NotAfter)}},
		{"a chain after the leaf", map[string][]byte{specs.SecretKeyCert: slices.Concat(data[specs.SecretKeyCert], soon.CertPEM)},
			[]etcdv1.CertificateExpiry{exp(specs.SecretKeyCert, leafEnd)}},
		{"a CA bundle: its earliest", map[string][]byte{specs.SecretKeyCA: slices.Concat(ca.PEM, soon.CertPEM)},
			[]etcdv1.CertificateExpiry{exp(specs.SecretKeyCA, soon.Cert.NotAfter)}},
		{"a key before the certificate", map[string][]byte{specs.SecretKeyCert: slices.Concat(data[specs.SecretKeyKey], data[specs.SecretKeyCert])},
			[]etcdv1.CertificateExpiry{exp(specs.SecretKeyCert, leafEnd)}},
		{"garbage", map[string][]byte{specs.SecretKeyCert: []byte("garbage"), specs.SecretKeyCA: nil}, nil},
	} {
		got := secretExpiries(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}, Data: tc.data})
		if !slices.EqualFunc(got, tc.want, func(a, b etcdv1.CertificateExpiry) bool {
			return a.Secret == b.Secret && a.Key == b.Key && a.NotAfter.Equal(&b.NotAfter)
		}) {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// A complete look records every Secret's certificates once (the server Secret named twice
// counts once) and the earliest; a second look at the same Secrets writes nothing; a Secret
// gone leaves the list as it was.
func TestSyncRecordsCertificateExpiry(t *testing.T) {
	t.Parallel()
	c := childtest.Cluster()
	c.Spec.TLS = &etcdv1.EtcdClusterTLS{
		Client: &etcdv1.ClientTLS{
			ServerSecretRef:         &corev1.LocalObjectReference{Name: "server"},
			OperatorClientSecretRef: &corev1.LocalObjectReference{Name: "operator"},
		},
		Peer: &etcdv1.PeerTLS{SecretRef: &corev1.LocalObjectReference{Name: "server"}},
	}
	ca := testpki.NewCA(t)
	first := time.Now().Add(2 * time.Hour).Truncate(time.Second)
	server := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "server", Namespace: "ns"}, Data: ca.SecretData(t, testpki.Request{CommonName: "server"})}
	operatorData := ca.SecretData(t, testpki.Request{CommonName: "operator", NotAfter: first})
	delete(operatorData, specs.SecretKeyCA)
	operator := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "operator", Namespace: "ns"}, Data: operatorData}
	writes := 0
	countWrites := interceptor.Funcs{SubResourcePatch: func(ctx context.Context, cl client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
		writes++
		return cl.SubResource(sub).Patch(ctx, obj, patch, opts...)
	}}
	cl := childtest.Client(countWrites, c, server, operator)
	if _, err := syncOnce(cl, c); err != nil {
		t.Fatal(err)
	}
	stored := &etcdv1.EtcdCluster{}
	if err := childtest.Get(cl, c.Name, stored); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, e := range stored.Status.Certificates {
		keys = append(keys, e.Secret+"/"+e.Key)
	}
	if want := []string{"operator/tls.crt", "server/ca.crt", "server/tls.crt"}; !slices.Equal(keys, want) {
		t.Fatalf("status.certificates %v, want %v", keys, want)
	}
	if at := stored.Status.CertificatesNotAfter; at == nil || !at.Time.Equal(first) {
		t.Fatalf("status.certificatesNotAfter %v, want the operator's certificate's %v", at, first)
	}

	before := writes
	if _, err := syncOnce(cl, c); err != nil || writes != before {
		t.Fatalf("a second look at the same Secrets: %v, %d writes", err, writes-before)
	}
	if err := cl.Delete(context.Background(), operator); err != nil {
		t.Fatal(err)
	}
	_, err := syncOnce(cl, c)
	childtest.ExpectWait(t, err, etcdv1.ReasonSecretMissing)
	if err := childtest.Get(cl, c.Name, stored); err != nil || len(stored.Status.Certificates) != 3 || stored.Status.CertificatesNotAfter == nil {
		t.Fatalf("after a Secret went missing: %v, %+v", err, stored.Status)
	}
}
