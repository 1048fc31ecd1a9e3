package migrate

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// legacyTLSFields are the Secret names of the legacy spec.security.tls, by field.
func legacyTLSFields(legacy map[string]any) map[string]string {
	fields, _, _ := unstructured.NestedStringMap(legacy, "spec", "security", "tls")
	return fields
}

// LegacyTLSSecrets are the Secrets the legacy spec.security.tls names: the command reads
// them for the planner.
func LegacyTLSSecrets(legacy map[string]any) []string {
	var out []string
	for _, name := range legacyTLSFields(legacy) {
		if name != "" {
			out = append(out, name)
		}
	}
	return out
}

// aenixTLSRefusals checks that the legacy cluster's certificates work the way this operator
// uses them, so that the adopted members keep serving with the Secrets they mount and the
// members this operator adds can talk to them:
//   - one CA per port: this operator reads it from the ca.crt of the server (or peer) Secret
//     and etcd verifies client (or peer) certificates against that same file, where the
//     legacy operator kept the CAs in Secrets of their own; they must hold the same CA;
//   - the server certificate names every member (all under the legacy headless Service, the
//     ones this operator adds too) and the client Service <cluster>-client, which is what
//     this operator and kubectl etcd check; the peer certificate names every member too,
//     because peers check each other's names.
//
// The hosts are those the operator uses: c names the adopted members (AnnotationAdoptedSubdomain).
func aenixTLSRefusals(o AenixObserved, c *etcdv1.EtcdCluster, replicas int) []string {
	if c.Spec.TLS == nil {
		return nil
	}
	fields := legacyTLSFields(o.Legacy)
	adopted := specs.MemberHost(c, specs.MemberName(c.Name, 0))
	// The first member this operator adds (under the same Service: AdoptedSubdomainEveryMember).
	added := specs.MemberHost(c, specs.MemberName(c.Name, replicas))
	clientHost := specs.ClientServiceHost(c)
	var out []string
	if t := c.Spec.TLS.Client; t != nil && t.ServerSecretRef != nil {
		out = append(out, secretRefusals(o.Secrets, "spec.security.tls.serverSecret", fields["serverSecret"], true, []string{adopted, clientHost, added}, aenixOperator)...)
		out = append(out, sameCA(o.Secrets, fields["serverSecret"], "serverTrustedCASecret", fields["serverTrustedCASecret"])...)
		if t.OperatorClientSecretRef != nil {
			out = append(out, secretRefusals(o.Secrets, "spec.security.tls.clientSecret", fields["clientSecret"], false, nil, aenixOperator)...)
			// etcd checks client certificates against the server Secret's ca.crt here.
			out = append(out, sameCA(o.Secrets, fields["serverSecret"], "clientTrustedCASecret", fields["clientTrustedCASecret"])...)
		}
	}
	if p := c.Spec.TLS.Peer; p != nil && p.SecretRef != nil {
		out = append(out, secretRefusals(o.Secrets, "spec.security.tls.peerSecret", fields["peerSecret"], true, []string{adopted, added}, aenixOperator)...)
		out = append(out, sameCA(o.Secrets, fields["peerSecret"], "peerTrustedCASecret", fields["peerTrustedCASecret"])...)
	}
	return out
}

// secretRefusals: the Secret exists with a certificate and key (and a CA when withCA) and
// its certificate is valid for every host.
func secretRefusals(secrets map[string]map[string][]byte, field, name string, withCA bool, hosts []string, operator string) []string {
	data, ok := secrets[name]
	if !ok {
		return []string{fmt.Sprintf("Secret %s (%s) does not exist", name, field)}
	}
	keys := []string{specs.SecretKeyCert, specs.SecretKeyKey}
	if withCA {
		keys = append(keys, specs.SecretKeyCA)
	}
	var missing []string
	for _, k := range keys {
		if len(data[k]) == 0 {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return []string{fmt.Sprintf("Secret %s (%s) has no %s: this operator reads the certificate, its key and the CA that signed it from one Secret; add them (the CA is the ca.crt of the legacy CA Secret)",
			name, field, strings.Join(missing, ", "))}
	}
	if len(hosts) == 0 {
		return nil
	}
	cert, err := firstCertificate(data[specs.SecretKeyCert])
	if err != nil {
		return []string{fmt.Sprintf("Secret %s (%s): %s: %v", name, field, specs.SecretKeyCert, err)}
	}
	var unnamed []string
	for _, h := range hosts {
		if cert.VerifyHostname(h) != nil {
			unnamed = append(unnamed, h)
		}
	}
	if len(unnamed) > 0 {
		return []string{fmt.Sprintf("the certificate of Secret %s (%s) is not valid for %s (it names %v): it must name every member, the adopted ones and those this operator adds, and, for the server certificate, the client Service <cluster>-client, which this operator and kubectl etcd check; reissue it with those names (wildcards such as *.%s work) and let %s roll it out first",
			name, field, strings.Join(unnamed, ", "), cert.DNSNames, hostDomain(hosts[len(hosts)-1]), operator)}
	}
	return nil
}

// sameCA: the legacy CA Secret (when set) holds the CA that the Secret's ca.crt holds.
func sameCA(secrets map[string]map[string][]byte, secret, caField, caSecret string) []string {
	if caSecret == "" || secrets[secret] == nil {
		return nil
	}
	ca, ok := secrets[caSecret]
	if !ok {
		return []string{fmt.Sprintf("Secret %s (spec.security.tls.%s) does not exist", caSecret, caField)}
	}
	if !bytes.Equal(bytes.TrimSpace(ca[specs.SecretKeyCA]), bytes.TrimSpace(secrets[secret][specs.SecretKeyCA])) {
		return []string{fmt.Sprintf("the ca.crt of Secret %s (spec.security.tls.%s) is not the ca.crt of Secret %s: this operator trusts one CA per port, the one in %s; issue both from the same CA, or put that CA into %s's ca.crt if it signed the certificates in question",
			caSecret, caField, secret, secret, secret)}
	}
	return nil
}

func firstCertificate(data []byte) (*x509.Certificate, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, fmt.Errorf("no PEM certificate")
	}
	return x509.ParseCertificate(block.Bytes)
}

// hostDomain is a host without its first label.
func hostDomain(host string) string {
	_, domain, _ := strings.Cut(host, ".")
	return domain
}
