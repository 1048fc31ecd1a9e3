package specs

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

// The CA bundle of a cluster whose CA was rotated: an operator-owned Secret whose keys hold
// the CAs members trust (mounted at CABundleDir, in place of the certificate Secrets' ca.crt)
// and those the operator's client trusts for the server certificate (not mounted).
const (
	caBundleDir = "/etc/etcd/tls/ca-bundle"
	// CABundleKeyClient holds the CAs etcd trusts for client certificates (--trusted-ca-file).
	CABundleKeyClient = "client-ca.crt"
	// CABundleKeyPeer holds the CAs etcd trusts for peers (--peer-trusted-ca-file).
	CABundleKeyPeer = "peer-ca.crt"
	// CABundleKeyServer holds the CAs the operator's client trusts for members' server
	// certificates while a rotation moves them: the old and the new.
	CABundleKeyServer = "server-ca.crt"
)

// CABundleSecretName is the cluster's CA bundle Secret.
func CABundleSecretName(cluster string) string { return cluster + "-ca-bundle" }

// CAProbeName names the Certificate (and Secret) the operator asks a new issuer for during a
// rotation, only to learn that issuer's CA (its ca.crt).
func CAProbeName(certificate string) string { return certificate + "-ca-probe" }

// CAProbeCommonName is the probe certificate's subject: no etcd user, like the operator's own.
const CAProbeCommonName = "etcd-operator-ca-probe"

// CAProbeCertificate is the probe Certificate for the cluster's Certificate named certificate,
// from issuer: a short-lived client certificate nobody presents, deleted when the rotation is
// done.
func CAProbeCertificate(c *etcdv1.EtcdCluster, of string, issuer etcdv1.IssuerReference) *unstructured.Unstructured {
	name := CAProbeName(of)
	spec := certificateSpec(c, name, issuer, []any{"digital signature", "client auth"})
	spec["commonName"] = CAProbeCommonName
	spec["duration"], spec["renewBefore"] = "1h", "20m"
	return certificate(c, name, spec)
}

// CABundleHash fingerprints what a member loads from the bundle (the client and the peer
// CAs): a member whose record differs restarts.
func CABundleHash(data map[string][]byte) string {
	sum := sha256.New()
	for _, k := range []string{CABundleKeyClient, CABundleKeyPeer} {
		sum.Write([]byte(k))
		sum.Write([]byte{0})
		sum.Write(data[k])
		sum.Write([]byte{0})
	}
	return hex.EncodeToString(sum.Sum(nil)[:8])
}

// WantedIssuers are the issuers spec.tls names for each of the cluster's Certificates.
func WantedIssuers(c *etcdv1.EtcdCluster) []etcdv1.CertificateIssuer {
	var out []etcdv1.CertificateIssuer
	for _, ic := range Certificates(c, "") {
		out = append(out, etcdv1.CertificateIssuer{Certificate: ic.Object.GetName(), Issuer: ic.Issuer})
	}
	return out
}

// caBundle is the member's CABundleSecretName.
func caBundle(m *etcdv1.EtcdMember) string {
	if m.Spec.TLS == nil {
		return ""
	}
	return m.Spec.TLS.CABundleSecretName
}

// podIssuerTLS is spec.tls with each issuer the cluster's Pods were first built with
// (status.caRotation.podIssuers) in place of the one spec.tls names now: issuers never reach a
// Pod, and a rotation restarts members only through their CABundleHash.
func podIssuerTLS(c *etcdv1.EtcdCluster, t *etcdv1.EtcdClusterTLS) {
	r := c.Status.CARotation
	if r == nil || len(r.PodIssuers) == 0 {
		return
	}
	issuerOf := func(cert string, ref *etcdv1.IssuerReference) {
		if i := slices.IndexFunc(r.PodIssuers, func(p etcdv1.CertificateIssuer) bool { return p.Certificate == cert }); i >= 0 && ref != nil {
			*ref = r.PodIssuers[i].Issuer
		}
	}
	if t.Client != nil && t.Client.CertManager != nil {
		issuerOf(ServerSecretName(c), &t.Client.CertManager.ServerIssuerRef)
		issuerOf(c.Name+"-operator-client-tls", t.Client.CertManager.OperatorClientIssuerRef)
	}
	if t.Peer != nil && t.Peer.CertManager != nil {
		issuerOf(PeerSecretName(c), &t.Peer.CertManager.IssuerRef)
	}
}
