package migrate

import (
	"fmt"
	"strings"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// Authentication in a cluster being taken over. etcd keeps it on throughout: adoption changes
// nothing in etcd, and this operator goes on with the root credentials the cluster already
// has. The two operators set root up differently:
//   - the legacy etcd.aenix.io operator creates user root without a password and reaches
//     etcd with its client certificate (spec.security.tls.clientSecret), whose common name
//     root etcd takes as the user once authentication is on. This operator presents that same
//     certificate (spec.tls.client.operatorClientSecretRef), so it is root too; root gets no
//     password (etcd keeps a user made without one so), and spec.auth, which manages root's
//     password, stays unset.
//   - Cozystack's operator creates root with the password of spec.auth.rootCredentialsSecretRef,
//     the same field this operator reads: the EtcdCluster keeps naming that Secret.
// Either way the command checks, through the members and with exactly those credentials, that
// etcd has authentication on and takes them as root; the plan is refused otherwise.

// EtcdAuth is what the command learned of authentication in etcd, through the members, with
// the credentials this operator will use. Never a password.
type EtcdAuth struct {
	// Known is true when etcd said whether authentication is on (Enabled).
	Known, Enabled bool
	// CredentialsProblem is what is wrong with root's password Secret (spec.auth of a
	// Cozystack cluster), or that etcd refuses its password; "" when nothing is.
	CredentialsProblem string
	// RootErr is why a request only root may make (listing the users) failed with those
	// credentials; "" when it succeeded or was not asked (authentication off).
	RootErr string
}

// on: etcd said that authentication is on.
func (a EtcdAuth) on() bool { return a.Known && a.Enabled }

// legacyEnableAuth is the legacy spec.security.enableAuth.
func legacyEnableAuth(legacy map[string]any) bool {
	spec, _ := legacy["spec"].(map[string]any)
	sec, _ := spec["security"].(map[string]any)
	on, _ := sec["enableAuth"].(bool)
	return on
}

// aenixAuth settles the adopted cluster's authentication: spec.auth stays unset (convert.Legacy
// asks for a password the legacy root never had) and, when etcd has authentication on, the
// operator's client certificate must be root's. It returns what the dry run says about auth
// ("" without auth) and the refusals.
func aenixAuth(o AenixObserved, c *etcdv1.EtcdCluster) (string, []string) {
	c.Spec.Auth = nil
	wanted := legacyEnableAuth(o.Legacy)
	a := o.Auth
	if !wanted && !a.on() {
		return "", nil
	}
	if !a.Known {
		return "", []string{"whether etcd has authentication on could not be read through the members: adopt a cluster that answers"}
	}
	if !a.Enabled {
		return "", []string{"spec.security.enableAuth is on but etcd has authentication off: the legacy operator has not finished turning it on; let it finish (start it again until etcd has auth on), then stop it and migrate"}
	}
	if c.Spec.TLS == nil || c.Spec.TLS.Client == nil || c.Spec.TLS.Client.OperatorClientSecretRef == nil || specs.OperatorClientSecretName(c) == "" {
		return "", []string{"etcd has authentication on, and the legacy operator's root user has no password: it is reached with the client certificate of spec.security.tls.clientSecret (common name root), and the cluster sets none (with spec.security.tls.serverSecret and clientSecret, etcd requires client certificates)"}
	}
	secret := specs.OperatorClientSecretName(c)
	var out []string
	if data, ok := o.Secrets[secret]; ok {
		if cert, err := firstCertificate(data[specs.SecretKeyCert]); err != nil {
			out = append(out, fmt.Sprintf("Secret %s (spec.security.tls.clientSecret): %s: %v", secret, specs.SecretKeyCert, err))
		} else if cn := cert.Subject.CommonName; cn != etcd.RootUser {
			out = append(out, fmt.Sprintf("the client certificate of Secret %s (spec.security.tls.clientSecret) has common name %q: with authentication on, etcd takes a client certificate's common name as the user, and the legacy operator's root (which has no password) is reached by a certificate with common name root; put such a certificate into that Secret (and let the legacy operator use it) first",
				secret, cn))
		}
	}
	if a.RootErr != "" {
		out = append(out, fmt.Sprintf("etcd refused a request only root may make (listing its users) with the client certificate of Secret %s: %s; this operator could not change membership or take snapshots with it", secret, a.RootErr))
	}
	how := "spec.security.enableAuth"
	if !wanted {
		how = "etcd (spec.security.enableAuth is off: it was turned on by hand)"
	}
	return fmt.Sprintf("on, as %s says, and it stays on: nothing changes in etcd. Root, which the legacy operator created without a password, is the common name of the client certificate in Secret %s, which this operator presents (spec.tls.client.operatorClientSecretRef) and is root with; spec.auth stays unset (it manages a root password, and this root has none). Clients keep their users and certificates",
		how, secret), out
}

// adoptionNotes drops what convert.Legacy says about auth and clients, which is true of a
// new cluster made from the legacy manifest but not of an adoption: it keeps the legacy root
// as it is (aenixAuth) instead of asking for a password, and the legacy client Service as a
// client Service (specs.AdoptedClientService).
func adoptionNotes(notes []string) []string {
	var out []string
	for _, n := range notes {
		if strings.HasPrefix(n, "auth: ") || strings.HasPrefix(n, "spec.security.enableAuth ") || strings.HasPrefix(n, "clients: ") {
			continue
		}
		out = append(out, n)
	}
	return out
}

// cozystackAuth checks a Cozystack cluster's authentication: with spec.auth enabled, etcd has
// it on (Cozystack's operator finished turning it on) and takes the password of the Secret
// spec.auth names, which the EtcdCluster keeps naming; without spec.auth, etcd must not need
// a login this operator lacks. It returns what the dry run says about auth and the refusals.
func cozystackAuth(c *etcdv1.EtcdCluster, a EtcdAuth) (string, []string) {
	wanted := c.Spec.Auth != nil && c.Spec.Auth.Enabled
	if !wanted && !a.on() {
		return "", nil
	}
	if !a.Known {
		return "", []string{"whether etcd has authentication on could not be read through the members: adopt a cluster that answers"}
	}
	if !wanted {
		if a.RootErr != "" {
			return "", []string{fmt.Sprintf("etcd has authentication on but spec.auth is not set, and a request only root may make (listing its users) failed: %s; this operator could not change membership or take snapshots", a.RootErr)}
		}
		return "on in etcd though spec.auth is not set: this operator's client certificate is root in etcd, which is how it keeps working; nothing changes in etcd", nil
	}
	secret := "(none)"
	if c.Spec.Auth.RootCredentialsSecretRef != nil {
		secret = c.Spec.Auth.RootCredentialsSecretRef.Name
	}
	var out []string
	if !a.Enabled {
		out = append(out, "spec.auth is enabled but etcd has authentication off: Cozystack's operator has not finished turning it on; let it finish (status.authEnabled), then stop it and migrate")
	}
	if a.CredentialsProblem != "" {
		out = append(out, a.CredentialsProblem)
	}
	if a.RootErr != "" {
		out = append(out, fmt.Sprintf("etcd refused a request only root may make (listing its users) when logged in as root with the password of Secret %s: %s", secret, a.RootErr))
	}
	return fmt.Sprintf("on, and it stays on: nothing changes in etcd. Root's password is the one in Secret %s (spec.auth.rootCredentialsSecretRef, unchanged), which etcd accepts; this operator logs in with it and records it as applied (Secret %s)",
		secret, specs.RootAppliedSecretName(c.Name)), out
}
