package certificates

import (
	"cmp"
	"context"
	"crypto/x509"
	"encoding/pem"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller/kit"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// secretExpiries are the expiry times of the certificates in a TLS Secret: tls.crt's leaf
// (the first certificate: what the member or the operator presents) and, when present, the
// earliest of ca.crt's bundle (an old CA still trusted while a rotation goes on is the first
// to break peers that still use certificates it signed). A key that holds no parseable
// certificate gives none; secretKeysProblem reports it.
func secretExpiries(secret *corev1.Secret) []etcdv1.CertificateExpiry {
	var out []etcdv1.CertificateExpiry
	if certs := pemCertificates(secret.Data[specs.SecretKeyCert]); len(certs) > 0 {
		out = append(out, expiry(secret.Name, specs.SecretKeyCert, certs[0].NotAfter))
	}
	if certs := pemCertificates(secret.Data[specs.SecretKeyCA]); len(certs) > 0 {
		earliest := slices.MinFunc(certs, func(a, b *x509.Certificate) int { return a.NotAfter.Compare(b.NotAfter) })
		out = append(out, expiry(secret.Name, specs.SecretKeyCA, earliest.NotAfter))
	}
	return out
}

func expiry(secret, key string, notAfter time.Time) etcdv1.CertificateExpiry {
	return etcdv1.CertificateExpiry{Secret: secret, Key: key, NotAfter: metav1.NewTime(notAfter.UTC())}
}

// pemCertificates parses every CERTIFICATE block of data, skipping what does not parse.
func pemCertificates(data []byte) []*x509.Certificate {
	var out []*x509.Certificate
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return out
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		if cert, err := x509.ParseCertificate(block.Bytes); err == nil {
			out = append(out, cert)
		}
	}
}

// expiries gathers the certificates' expiry times of the Secrets one look read, once per
// Secret and key: two spec fields may name the same Secret, and status.certificates is a map
// keyed by both.
type expiries []etcdv1.CertificateExpiry

func (e *expiries) add(secret *corev1.Secret) {
	for _, x := range secretExpiries(secret) {
		if !slices.ContainsFunc(*e, func(y etcdv1.CertificateExpiry) bool { return y.Secret == x.Secret && y.Key == x.Key }) {
			*e = append(*e, x)
		}
	}
}

// earliest is the first expiry of all, nil when there is none.
func (e expiries) earliest() *metav1.Time {
	if len(e) == 0 {
		return nil
	}
	first := slices.MinFunc(e, func(a, b etcdv1.CertificateExpiry) int { return a.NotAfter.Compare(b.NotAfter.Time) })
	return first.NotAfter.DeepCopy()
}

// recordExpiries writes what a complete look at the Secrets found into the cluster's status,
// and only when it changed: a renewal (or a replaced Secret) writes once, a cluster at rest
// never. It rides on the reads the check of the Secrets makes anyway: no API request of its
// own but the write.
func recordExpiries(ctx context.Context, cl client.StatusClient, c *etcdv1.EtcdCluster, found expiries) error {
	before := c.DeepCopy()
	slices.SortFunc(found, func(a, b etcdv1.CertificateExpiry) int {
		return cmp.Or(cmp.Compare(a.Secret, b.Secret), cmp.Compare(a.Key, b.Key))
	})
	c.Status.Certificates = found
	c.Status.CertificatesNotAfter = found.earliest()
	if equality.Semantic.DeepEqual(before.Status, c.Status) {
		return nil
	}
	// With the resourceVersion read, as every status write of the cluster's: an older copy
	// must not put older fields back.
	return kit.IgnoreConflict(cl.Status().Patch(ctx, c, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})))
}
