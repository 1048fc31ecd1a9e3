// Package certificates keeps an EtcdCluster's TLS material in place: the cert-manager
// Certificates spec.tls asks for (checking their issuers first), and every certificate Secret
// the members and the operator mount, issued or named by the user. It reports on the
// cluster's TLSReady condition.
package certificates

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/carotation"
	"github.com/quorumkeeper/etcd-operator/internal/controller/kit"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// Certificates are created and corrected with Update; their owner reference deletes them, not
// the operator (as Services are: see children/services); delete stays granted because the
// admission plugin OwnerReferencesPermissionEnforcement lets only who may delete an object set
// its owner references. Secrets are only read here (children/auth writes the one it owns).
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups=cert-manager.io,resources=certificates,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups=cert-manager.io,resources=issuers;clusterissuers,verbs=get;list;watch

// Component keeps the Certificates and checks the certificate Secrets.
type Component struct {
	objects  kit.Objects
	recorder events.EventRecorder
	// clusterDomain is the Kubernetes cluster's DNS domain, for the fully qualified names in
	// certificates; cluster.local when empty.
	clusterDomain string
}

// New is the component over the cluster's child objects, recording its events with recorder
// (nil in tests).
func New(objects kit.Objects, recorder events.EventRecorder, clusterDomain string) *Component {
	return &Component{objects: objects, recorder: recorder, clusterDomain: clusterDomain}
}

// Sync creates the cert-manager Certificates spec.tls asks for and checks that every
// certificate Secret exists with valid keys. It records TLSReady. Only a Secret that is
// missing or unusable holds the cluster back (a kit.Waiting, which keeps members from being
// created and requeues): the certificates are per cluster (wildcards over the members), so
// healing, scaling and rolling need no new certificate and go on while an issuer is broken.
// Such a problem only stops renewal, and TLSReady says so. It depends on no fact of the view.
func (t *Component) Sync(ctx context.Context, c *etcdv1.EtcdCluster, _ kit.Facts) error {
	if c.Spec.TLS == nil {
		return nil
	}
	var found expiries
	p, blocking, err := t.tlsProblem(ctx, c, &found)
	if err != nil {
		return err
	}
	if !blocking {
		// Every Secret was read: what they hold is the whole list. A blocking problem stops
		// the look at the first bad Secret, and the list stays as the last whole look left it.
		if err := recordExpiries(ctx, t.objects.Client, c, found); err != nil {
			return err
		}
	}
	cond := metav1.Condition{Type: etcdv1.ConditionTLSReady, Status: metav1.ConditionTrue, Reason: etcdv1.ReasonCertificatesReady,
		Message: "every certificate Secret exists with tls.crt, tls.key and ca.crt"}
	if p != nil {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, p.reason, p.message
		if !blocking {
			cond.Message += "; " + issuedStillInUse
		}
	}
	if err := kit.SetCondition(ctx, t.objects.Client, t.recorder, c, cond); err != nil {
		return err
	}
	if p != nil && blocking {
		return kit.Waiting{Reason: p.reason, Message: p.message}
	}
	return nil
}

// issuedStillInUse ends TLSReady's message when the issuer fails but every Secret is usable.
const issuedStillInUse = "the certificates already issued stay in use: members are still healed, scaled and restarted with them; only a new issue or renewal waits for the fix"

// problem is why something the cluster needs is not in place: a condition reason and a
// message that names the object, the spec field and the fix.
type problem struct{ reason, message string }

func problemf(reason, format string, args ...any) *problem {
	return &problem{reason: reason, message: fmt.Sprintf(format, args...)}
}

// tlsProblem is the first thing missing for TLS, and whether it blocks the cluster (a Secret
// the members or the operator need is missing or unusable) or only the issuing of new
// certificates. Every Certificate is asked for before any Secret is checked, so that
// cert-manager issues them all at once. When a Secret is missing because its issuer is
// broken, the issuer is named: it is what needs the fix. The certificates' expiry times of
// the Secrets it reads are added to found.
func (t *Component) tlsProblem(ctx context.Context, c *etcdv1.EtcdCluster, found *expiries) (p *problem, blocking bool, err error) {
	issued := specs.Certificates(c, t.clusterDomain)
	certs := make([]*unstructured.Unstructured, len(issued))
	var issuing *problem
	for i, ic := range issued {
		ip, err := t.checkIssuer(ctx, c, ic)
		if err != nil {
			return nil, false, err
		}
		if ip != nil {
			issuing = firstProblem(issuing, ip)
			continue
		}
		have, cp, err := t.applyCertificate(ctx, c, ic)
		if err != nil {
			return nil, false, err
		}
		if cp != nil && cp.reason == etcdv1.ReasonCertificateConflict {
			return cp, true, nil // someone else's Certificate would fill the cluster's Secret
		}
		issuing = firstProblem(issuing, cp)
		certs[i] = have
	}
	secrets := make([]tlsSecret, 0, len(issued)+3)
	for _, ic := range issued {
		// Every issued Secret needs its ca.crt, the operator's client certificate's too:
		// members trust that CA for clients (specs.ClientCASecretName).
		secrets = append(secrets, tlsSecret{ic.SecretName, "Certificate " + ic.Object.GetName(), true})
	}
	secrets = append(secrets, userTLSSecrets(c)...)
	for i, s := range secrets {
		var cert *unstructured.Unstructured
		if i < len(certs) {
			cert = certs[i]
		}
		sp, err := t.checkTLSSecret(ctx, c, s, cert, found)
		if err != nil {
			return nil, false, err
		}
		if sp != nil {
			return firstProblem(issuing, sp), true, nil
		}
	}
	return issuing, false, nil
}

func firstProblem(first, next *problem) *problem {
	if first != nil {
		return first
	}
	return next
}

// tlsSecret is a certificate Secret the cluster needs, the keys it must have, and where it
// comes from (a spec field or a Certificate) for messages.
type tlsSecret struct {
	name, source string
	needCA       bool
}

// userTLSSecrets are the Secrets spec.tls names directly.
func userTLSSecrets(c *etcdv1.EtcdCluster) []tlsSecret {
	var out []tlsSecret
	if t := c.Spec.TLS.Client; t != nil && t.ServerSecretRef != nil {
		out = append(out, tlsSecret{t.ServerSecretRef.Name, "spec.tls.client.serverSecretRef", true})
	}
	if t := c.Spec.TLS.Client; t != nil && t.OperatorClientSecretRef != nil {
		out = append(out, tlsSecret{t.OperatorClientSecretRef.Name, "spec.tls.client.operatorClientSecretRef", false})
	}
	if p := c.Spec.TLS.Peer; p != nil && p.SecretRef != nil {
		out = append(out, tlsSecret{p.SecretRef.Name, "spec.tls.peer.secretRef", true})
	}
	return out
}

func certManagerMissing(field string) *problem {
	return problemf(etcdv1.ReasonCertManagerMissing, "cert-manager is not installed (the API has no cert-manager.io/v1 kinds), but %s asks for it: install cert-manager, or name your own Secrets in spec.tls instead of certManager", field)
}

// checkIssuer requires the issuer to exist and be Ready: cert-manager would leave the
// Certificate pending otherwise, and the user needs to know which object to fix.
func (t *Component) checkIssuer(ctx context.Context, c *etcdv1.EtcdCluster, ic specs.IssuedCertificate) (*problem, error) {
	gvk := specs.IssuerGVKFor(ic.Issuer)
	key := types.NamespacedName{Name: ic.Issuer.Name}
	where := "ClusterIssuer " + ic.Issuer.Name
	if gvk == specs.IssuerGVK {
		key.Namespace = c.Namespace
		where = fmt.Sprintf("Issuer %s in namespace %s", ic.Issuer.Name, c.Namespace)
	}
	issuer := &unstructured.Unstructured{}
	issuer.SetGroupVersionKind(gvk)
	err := t.objects.Client.Get(ctx, key, issuer)
	switch {
	case meta.IsNoMatchError(err):
		return certManagerMissing(ic.IssuerField), nil
	case apierrors.IsNotFound(err):
		return problemf(etcdv1.ReasonIssuerNotFound, "%s, named by %s, does not exist: create it, or name an existing issuer there", where, ic.IssuerField), nil
	case err != nil:
		return nil, err
	}
	if ok, why := certManagerReady(issuer); !ok {
		return problemf(etcdv1.ReasonIssuerNotReady, "%s, named by %s, is not ready: %s; see kubectl describe %s", where, ic.IssuerField, why, strings.ToLower(gvk.Kind)), nil
	}
	return nil, nil
}

// certManagerReady reads a cert-manager object's Ready condition.
func certManagerReady(u *unstructured.Unstructured) (bool, string) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, raw := range conds {
		cond, ok := raw.(map[string]any)
		if !ok || cond["type"] != "Ready" {
			continue
		}
		if cond["status"] == "True" {
			return true, ""
		}
		return false, fmt.Sprintf("%v: %v", cond["reason"], cond["message"])
	}
	return false, "it has no Ready condition yet"
}

// applyCertificate creates the Certificate, or brings the fields the operator sets back to
// what the builder says (an operator upgrade may add a name), leaving cert-manager's own.
func (t *Component) applyCertificate(ctx context.Context, c *etcdv1.EtcdCluster, ic specs.IssuedCertificate) (*unstructured.Unstructured, *problem, error) {
	want := ic.Object
	have := &unstructured.Unstructured{}
	have.SetGroupVersionKind(specs.CertificateGVK)
	err := t.objects.Client.Get(ctx, client.ObjectKeyFromObject(want), have)
	switch {
	case meta.IsNoMatchError(err):
		return nil, certManagerMissing(ic.IssuerField), nil
	case apierrors.IsNotFound(err):
		return t.createCertificate(ctx, c, ic)
	case err != nil:
		return nil, nil, err
	}
	if !metav1.IsControlledBy(have, c) {
		return nil, problemf(etcdv1.ReasonCertificateConflict, "Certificate %s exists and does not belong to this cluster: delete or rename it, so that the operator can issue the cluster's own", have.GetName()), nil
	}
	// An issuer changes only as the CA rotation moves it: until every member trusts the new
	// CA, and for a CA the members do not trust, a certificate would be refused
	// (internal/carotation).
	if issuer, moving := carotation.IssuerNow(c.Status.CARotation, want.GetName()); moving {
		want = withIssuerRef(want, specs.IssuerRef(issuer))
	} else if ref, found, _ := unstructured.NestedMap(have.Object, "spec", "issuerRef"); found {
		want = withIssuerRef(want, ref)
	}
	return have, nil, t.correctCertificate(ctx, have, want)
}

// withIssuerRef is want naming the issuer ref.
func withIssuerRef(want *unstructured.Unstructured, ref map[string]any) *unstructured.Unstructured {
	out := want.DeepCopy()
	_ = unstructured.SetNestedMap(out.Object, ref, "spec", "issuerRef")
	return out
}

// createCertificate creates the Certificate controlled by the cluster, with an event that
// names it as the related object: the events API folds events that differ only by the object
// they are about into one series that keeps the first message ("created Certificate
// db-server-tls (x2)" for three Certificates).
func (t *Component) createCertificate(ctx context.Context, c *etcdv1.EtcdCluster, ic specs.IssuedCertificate) (*unstructured.Unstructured, *problem, error) {
	want := ic.Object
	if err := controllerutil.SetControllerReference(c, want, t.objects.Client.Scheme()); err != nil {
		return nil, nil, err
	}
	if err := t.objects.Client.Create(ctx, want); err != nil {
		if kit.IsRefusal(err) {
			return nil, problemf(etcdv1.ReasonObjectRefused, "the API server refused Certificate %s: %v", want.GetName(), err), nil
		}
		return nil, nil, client.IgnoreAlreadyExists(err)
	}
	kit.Emit(ctx, t.recorder, c, want, corev1.EventTypeNormal, etcdv1.ReasonCertificateCreated, "CreateCertificate", "created Certificate %s, issued by %s %s", want.GetName(), specs.IssuerGVKFor(ic.Issuer).Kind, ic.Issuer.Name)
	return want, nil, nil
}

func (t *Component) correctCertificate(ctx context.Context, have, want *unstructured.Unstructured) error {
	spec, _, _ := unstructured.NestedMap(have.Object, "spec")
	wantSpec, _, _ := unstructured.NestedMap(want.Object, "spec")
	if spec == nil {
		spec = map[string]any{}
	}
	changed := false
	for k, v := range wantSpec {
		if !equality.Semantic.DeepEqual(spec[k], v) {
			spec[k], changed = v, true
		}
	}
	if !changed {
		return nil
	}
	if err := unstructured.SetNestedMap(have.Object, spec, "spec"); err != nil {
		return err
	}
	return kit.IgnoreConflict(t.objects.Client.Update(ctx, have))
}

// checkTLSSecret requires the Secret with parseable keys. For an issued Secret, cert (the
// Certificate) explains a missing Secret: cert-manager has not issued it yet, or why not. A
// usable Secret's expiry times are added to found.
func (t *Component) checkTLSSecret(ctx context.Context, c *etcdv1.EtcdCluster, s tlsSecret, cert *unstructured.Unstructured, found *expiries) (*problem, error) {
	secret := &corev1.Secret{}
	err := t.objects.Client.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: s.name}, secret)
	if apierrors.IsNotFound(err) {
		if cert != nil {
			if ok, why := certManagerReady(cert); !ok {
				return problemf(etcdv1.ReasonCertificateNotReady, "Certificate %s has not been issued yet (%s); see kubectl describe certificate %s", cert.GetName(), why, cert.GetName()), nil
			}
		}
		return problemf(etcdv1.ReasonSecretMissing, "Secret %s (%s) does not exist: create a kubernetes.io/tls Secret with %s", s.name, s.source, keyList(s.needCA)), nil
	}
	if err != nil {
		return nil, err
	}
	if p := secretKeysProblem(secret, s); p != nil {
		return p, nil
	}
	found.add(secret)
	return nil, nil
}

func keyList(needCA bool) string {
	if needCA {
		return "tls.crt, tls.key and ca.crt"
	}
	return "tls.crt and tls.key"
}

// secretKeysProblem checks what etcd and the operator will do with the keys, so that a bad
// Secret is reported here instead of as a member that crashes at start.
func secretKeysProblem(secret *corev1.Secret, s tlsSecret) *problem {
	keys := []string{specs.SecretKeyCert, specs.SecretKeyKey}
	if s.needCA {
		keys = append(keys, specs.SecretKeyCA)
	}
	var missing []string
	for _, k := range keys {
		if len(secret.Data[k]) == 0 {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return problemf(etcdv1.ReasonSecretKeyMissing, "Secret %s (%s) lacks %s: it needs %s", s.name, s.source, strings.Join(missing, ", "), keyList(s.needCA))
	}
	if _, err := tls.X509KeyPair(secret.Data[specs.SecretKeyCert], secret.Data[specs.SecretKeyKey]); err != nil {
		return problemf(etcdv1.ReasonSecretInvalid, "Secret %s (%s): tls.crt and tls.key are not a matching PEM certificate and key: %v", s.name, s.source, err)
	}
	if s.needCA && !x509.NewCertPool().AppendCertsFromPEM(secret.Data[specs.SecretKeyCA]) {
		return problemf(etcdv1.ReasonSecretInvalid, "Secret %s (%s): ca.crt holds no PEM certificate", s.name, s.source)
	}
	return nil
}
