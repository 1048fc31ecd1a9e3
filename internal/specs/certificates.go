package specs

import (
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

// cert-manager's API, used as unstructured objects so that the operator does not depend on
// cert-manager's Go module (and its dependency tree) to create three kinds of objects.
var (
	CertificateGVK   = schema.GroupVersionKind{Group: "cert-manager.io", Version: "v1", Kind: "Certificate"}
	IssuerGVK        = schema.GroupVersionKind{Group: "cert-manager.io", Version: "v1", Kind: "Issuer"}
	ClusterIssuerGVK = schema.GroupVersionKind{Group: "cert-manager.io", Version: "v1", Kind: "ClusterIssuer"}
)

// Lifetimes of the certificates the operator asks cert-manager for. 90 days is cert-manager's
// own default and the common public-CA lifetime; renewing 30 days early (at two thirds, which
// is cert-manager's default ratio too) leaves a month in which a broken issuer shows up as a
// not-ready Certificate long before anything expires. Renewal costs nothing: etcd loads the
// certificate files at every handshake and the operator reads its Secret at every client.
// spec.tls.validityDuration and renewBefore change them (CertificateLifetime).
const (
	CertificateDuration    = "2160h" // 90 days
	CertificateRenewBefore = "720h"  // 30 days
)

// CertificateLifetime is the duration and renew-before of every Certificate the cluster asks
// cert-manager for: spec.tls.validityDuration and renewBefore as written, else the defaults
// above. A validityDuration without renewBefore renews 30 days early, or at two thirds of the
// lifetime (cert-manager's own ratio) when a third of it is shorter than 30 days, so that a
// short lifetime never gets a renew-before cert-manager refuses. The API's rules have made
// sure both are Go durations; one that does not parse here gets the defaults.
func CertificateLifetime(c *etcdv1.EtcdCluster) (duration, renewBefore string) {
	duration, renewBefore = CertificateDuration, CertificateRenewBefore
	t := c.Spec.TLS
	if t == nil {
		return duration, renewBefore
	}
	if t.ValidityDuration != "" {
		d, err := time.ParseDuration(t.ValidityDuration)
		if err != nil {
			return CertificateDuration, CertificateRenewBefore
		}
		duration = t.ValidityDuration
		if third := d / 3; third < 30*24*time.Hour {
			renewBefore = third.String()
		}
	}
	if t.RenewBefore != "" {
		renewBefore = t.RenewBefore
	}
	return duration, renewBefore
}

// Keys of a kubernetes.io/tls Secret as cert-manager writes them.
const (
	SecretKeyCert = "tls.crt"
	SecretKeyKey  = "tls.key"
	SecretKeyCA   = "ca.crt"
)

// OperatorClientCommonName is the subject of the operator's client certificate. It is not an
// etcd user on purpose: with --client-cert-auth etcd would treat a certificate whose common
// name is a user as that user's login, and the operator authenticates with root's password
// instead, so its certificate alone grants nothing once auth is enabled.
const OperatorClientCommonName = "etcd-operator"

// ServerSecretName is the Secret with the client port's server certificate.
func ServerSecretName(c *etcdv1.EtcdCluster) string {
	if t := clientTLS(c); t != nil && t.ServerSecretRef != nil {
		return t.ServerSecretRef.Name
	}
	return c.Name + "-server-tls"
}

// PeerSecretName is the Secret with the peer certificate.
func PeerSecretName(c *etcdv1.EtcdCluster) string {
	if c.Spec.TLS != nil && c.Spec.TLS.Peer != nil && c.Spec.TLS.Peer.SecretRef != nil {
		return c.Spec.TLS.Peer.SecretRef.Name
	}
	return c.Name + "-peer-tls"
}

// OperatorClientSecretName is the Secret with the operator's client certificate; "" when the
// client port does not require client certificates.
func OperatorClientSecretName(c *etcdv1.EtcdCluster) string {
	if !ClientCertAuth(c) {
		return ""
	}
	if t := clientTLS(c); t.OperatorClientSecretRef != nil {
		return t.OperatorClientSecretRef.Name
	}
	return c.Name + "-operator-client-tls"
}

// ClientCASecretName is the Secret whose ca.crt etcd trusts for client certificates, when that
// is not the server Secret's: the operator's client certificate issued by cert-manager. Its
// issuer (operatorClientIssuerRef) is then the only one whose certificates get through mutual
// TLS. Were it the server certificate's CA, as before, every certificate from a server issuer
// shared with other workloads would get in, and once auth is on, one whose common name is root
// would be etcd's root without a password: etcd takes a client certificate's common name as
// the user. A server issuer can then be shared; the client issuer must be the cluster's own
// (docs/tls.md). With the user's own Secrets the server Secret's ca.crt stays the one trusted:
// the user chose what it holds. "" when no client certificate is required.
func ClientCASecretName(c *etcdv1.EtcdCluster) string {
	t := clientTLS(c)
	if !ClientCertAuth(c) || t.CertManager == nil || t.CertManager.OperatorClientIssuerRef == nil {
		return ""
	}
	return OperatorClientSecretName(c)
}

// RootAppliedSecretName is the operator-owned Secret holding the root password that is set in
// etcd, so that the operator can authenticate to change it when the user's Secret changes.
func RootAppliedSecretName(cluster string) string { return cluster + "-root-applied" }

func clientTLS(c *etcdv1.EtcdCluster) *etcdv1.ClientTLS {
	if c.Spec.TLS == nil {
		return nil
	}
	return c.Spec.TLS.Client
}

// IssuedCertificate is one Certificate the operator asks cert-manager for, with the issuer it
// names and the spec field that issuer comes from (for messages that point at the fix).
type IssuedCertificate struct {
	Object      *unstructured.Unstructured
	SecretName  string
	Issuer      etcdv1.IssuerReference
	IssuerField string
}

// Certificates are the cert-manager Certificates spec.tls asks for: the server certificate,
// the operator's client certificate and the peer certificate, each only when cert-manager
// issues it. Each Certificate is named after the Secret it fills.
// domain is the Kubernetes cluster's DNS domain (cluster.local when empty), for the fully
// qualified names.
func Certificates(c *etcdv1.EtcdCluster, domain string) []IssuedCertificate {
	var out []IssuedCertificate
	if t := clientTLS(c); t != nil && t.CertManager != nil {
		out = append(out, IssuedCertificate{ServerCertificate(c, domain), ServerSecretName(c), t.CertManager.ServerIssuerRef,
			"spec.tls.client.certManager.serverIssuerRef"})
		if ref := t.CertManager.OperatorClientIssuerRef; ref != nil {
			out = append(out, IssuedCertificate{OperatorClientCertificate(c), OperatorClientSecretName(c), *ref,
				"spec.tls.client.certManager.operatorClientIssuerRef"})
		}
	}
	if p := c.Spec.TLS; p != nil && p.Peer != nil && p.Peer.CertManager != nil {
		out = append(out, IssuedCertificate{PeerCertificate(c, domain), PeerSecretName(c), p.Peer.CertManager.IssuerRef,
			"spec.tls.peer.certManager.issuerRef"})
	}
	return out
}

// ServerCertificate serves the client port. It also authenticates as a client, because
// etcdctl inside a member Pod presents it (--cert, docs/tls.md) when etcd requires client
// certificates.
func ServerCertificate(c *etcdv1.EtcdCluster, domain string) *unstructured.Unstructured {
	ref := clientTLS(c).CertManager.ServerIssuerRef
	spec := certificateSpec(c, ServerSecretName(c), ref, []any{"digital signature", "server auth", "client auth"})
	spec["dnsNames"] = toAny(ServerDNSNames(c, domain))
	spec["ipAddresses"] = []any{"127.0.0.1", "::1"}
	return certificate(c, ServerSecretName(c), spec)
}

// PeerCertificate serves the peer port and is presented to other members as a client
// certificate (peer TLS is always mutual).
func PeerCertificate(c *etcdv1.EtcdCluster, domain string) *unstructured.Unstructured {
	ref := c.Spec.TLS.Peer.CertManager.IssuerRef
	spec := certificateSpec(c, PeerSecretName(c), ref, []any{"digital signature", "server auth", "client auth"})
	spec["dnsNames"] = toAny(PeerDNSNames(c, domain))
	spec["ipAddresses"] = []any{"127.0.0.1", "::1"}
	return certificate(c, PeerSecretName(c), spec)
}

// OperatorClientCertificate is the operator's client certificate. It carries no DNS names or
// addresses: the operator's address is not known in advance, and a certificate without them
// is accepted from any address.
func OperatorClientCertificate(c *etcdv1.EtcdCluster) *unstructured.Unstructured {
	ref := *clientTLS(c).CertManager.OperatorClientIssuerRef
	spec := certificateSpec(c, OperatorClientSecretName(c), ref, []any{"digital signature", "client auth"})
	spec["commonName"] = OperatorClientCommonName
	return certificate(c, OperatorClientSecretName(c), spec)
}

// DefaultClusterDomain is the Kubernetes cluster's DNS domain unless the operator is told
// another (--cluster-domain).
const DefaultClusterDomain = "cluster.local"

// ServerDNSNames are the names clients reach the cluster by: every member (a wildcard, so
// that scaling needs no new certificate), the client Service and the headless Service, in the
// short and the fully qualified forms (in the cluster's DNS domain), and localhost for a
// client inside a member Pod.
func ServerDNSNames(c *etcdv1.EtcdCluster, domain string) []string {
	names := memberWildcards(c, domain)
	names = append(names, serviceNames(ClientServiceName(c.Name), c.Namespace, domain)...)
	names = append(names, serviceNames(HeadlessServiceName(c.Name), c.Namespace, domain)...)
	return append(names, "localhost")
}

// PeerDNSNames are the member names and the headless Service. etcd checks a peer's client
// certificate against the address the connection comes from: a wildcard passes when the
// address has a PTR record, the headless Service name (which resolves to every member's
// address, ready or not) passes by forward lookup where there is none.
func PeerDNSNames(c *etcdv1.EtcdCluster, domain string) []string {
	names := memberWildcards(c, domain)
	names = append(names, serviceNames(MembersServiceName(c), c.Namespace, domain)...)
	return append(names, "localhost")
}

func memberWildcards(c *etcdv1.EtcdCluster, domain string) []string {
	svc := MembersServiceName(c) + "." + c.Namespace + ".svc"
	return []string{"*." + svc, "*." + svc + "." + orDefaultDomain(domain)}
}

// serviceNames are the four forms of a Service's name: name, name.ns, name.ns.svc and
// name.ns.svc.<domain>.
func serviceNames(name, namespace, domain string) []string {
	return []string{name, name + "." + namespace, name + "." + namespace + ".svc", name + "." + namespace + ".svc." + orDefaultDomain(domain)}
}

func orDefaultDomain(domain string) string {
	if domain == "" {
		return DefaultClusterDomain
	}
	return domain
}

func certificateSpec(c *etcdv1.EtcdCluster, secretName string, ref etcdv1.IssuerReference, usages []any) map[string]any {
	duration, renewBefore := CertificateLifetime(c)
	return map[string]any{
		"secretName":  secretName,
		"duration":    duration,
		"renewBefore": renewBefore,
		// A new key at every renewal, so a leaked key is only good until the next one.
		"privateKey": map[string]any{"algorithm": "ECDSA", "size": int64(256), "rotationPolicy": "Always"},
		"usages":     usages,
		"issuerRef":  IssuerRef(ref),
	}
}

// IssuerRef is a Certificate's spec.issuerRef naming ref (an Issuer unless ref says otherwise).
func IssuerRef(ref etcdv1.IssuerReference) map[string]any {
	kind := ref.Kind
	if kind == "" {
		kind = IssuerGVK.Kind
	}
	return map[string]any{"name": ref.Name, "kind": kind, "group": CertificateGVK.Group}
}

func certificate(c *etcdv1.EtcdCluster, name string, spec map[string]any) *unstructured.Unstructured {
	labels := withMetadata(ClusterLabels(c.Name), extraLabels(c))
	// The Secret carries the cluster's labels too, so `kubectl get secret -l` finds it, and
	// spec.additionalMetadata's annotations.
	template := map[string]any{"labels": toAnyMap(labels)}
	if a := withMetadata(nil, extraAnnotations(c)); len(a) > 0 {
		template["annotations"] = toAnyMap(a)
	}
	spec["secretTemplate"] = template
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(CertificateGVK)
	u.SetName(name)
	u.SetNamespace(c.Namespace)
	u.SetLabels(labels)
	if a := withMetadata(nil, extraAnnotations(c)); len(a) > 0 {
		u.SetAnnotations(a)
	}
	return u
}

// IssuerGVKFor is the kind an issuer reference names.
func IssuerGVKFor(ref etcdv1.IssuerReference) schema.GroupVersionKind {
	if ref.Kind == ClusterIssuerGVK.Kind {
		return ClusterIssuerGVK
	}
	return IssuerGVK
}

// toAny converts for unstructured content, which holds []any, never []string.
func toAny(in []string) []any {
	out := make([]any, len(in))
	for i, s := range in {
		out[i] = s
	}
	return out
}

func toAnyMap(in map[string]string) map[string]any {
	out := make(map[string]any, len(in))
	for k, v := range in {
		out[k] = v
	}
	return out
}
