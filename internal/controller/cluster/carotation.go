package cluster

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/carotation"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// The CA bundle and the probe certificates are the operator's own. A probe's Secret, which
// cert-manager leaves behind when its Certificate goes, is emptied once the rotation is done:
// the operator deletes no Secret (docs/install.md).
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update

// servedGrace is how long after a certificate was issued a member that cannot be asked (a
// NetworkPolicy keeps the operator from its peer port) is taken to serve it: the kubelet
// updates a Secret volume within its sync period (a minute by default) plus its cache's.
const servedGrace = 3 * time.Minute

// rotationRetry is how soon a rotation waiting for members to serve re-issued certificates
// looks again: that wait ends with no event the controller watches.
const rotationRetry = 10 * time.Second

// rotationLook is what observeRotation read besides the decision's input: enough to act.
type rotationLook struct {
	in carotation.Observed
	// bundle is the bundle's data this stage needs.
	bundle map[string][]byte
	// current is the bundle Secret as it is (nil: none).
	current *corev1.Secret
}

// rotateCAs takes the next step of a CA rotation (internal/carotation decides it). Waiting is
// no step: the rolling restart after it restarts the members the rotation marked.
func (r *Reconciler) rotateCAs(ctx context.Context, c *etcdv1.EtcdCluster, v *clusterView) (bool, error) {
	if c.Spec.TLS == nil {
		return false, nil
	}
	if ownSecretsOnly(c) {
		return r.reloadOwnCAs(ctx, c, v)
	}
	look, err := r.observeRotation(ctx, c, v)
	if err != nil {
		return false, err
	}
	d := carotation.Next(look.in)
	if d.Action != carotation.None {
		log.FromContext(ctx).V(1).Info("CA rotation", "action", d.Action, "why", d.Why)
	}
	switch d.Action {
	case carotation.None:
		return false, nil
	case carotation.Wait:
		v.caRotation = rotationCondition(c, c.Status.CARotation.Stage, d.Why)
		if c.Status.CARotation.Stage == etcdv1.ReasonReissuingOnNewCA {
			v.caRotationRetry = rotationRetry
		}
		return false, nil
	case carotation.Record:
		return true, r.recordRotation(ctx, c, d, look.in.Applied)
	case carotation.Probe:
		return r.probe(ctx, c, v, d)
	case carotation.WriteBundle:
		return true, r.writeBundle(ctx, c, look)
	case carotation.MarkMembers:
		return true, r.markMembers(ctx, v, specs.CABundleSecretName(c.Name), specs.CABundleHash(look.bundle))
	case carotation.CleanUp:
		if err := r.deleteProbes(ctx, c); err != nil {
			return false, err
		}
		return true, r.recordRotation(ctx, c, d, nil)
	}
	return false, fmt.Errorf("CA rotation: unknown action %q", d.Action)
}

func rotationCondition(c *etcdv1.EtcdCluster, stage, why string) *metav1.Condition {
	status := metav1.ConditionTrue
	if stage == etcdv1.ReasonCARotated {
		status = metav1.ConditionFalse
	}
	return &metav1.Condition{Type: etcdv1.ConditionCARotation, Status: status, Reason: stage, Message: why, ObservedGeneration: c.Generation}
}

// recordRotation writes the decided stage into status at once, with the resourceVersion read:
// the step it guards acts only on a later look that sees it.
func (r *Reconciler) recordRotation(ctx context.Context, c *etcdv1.EtcdCluster, d carotation.Decision, applied []etcdv1.CertificateIssuer) error {
	before := c.DeepCopy()
	next := d.Status.DeepCopy()
	if !carotation.Active(c.Status.CARotation) && next.Stage == etcdv1.ReasonTrustingBoth {
		next.StartedAt = &metav1.Time{Time: r.now().Truncate(time.Second)}
		next.PodIssuers = applied
		if old := c.Status.CARotation; old != nil {
			next.PodIssuers, next.BundleHash = old.PodIssuers, old.BundleHash
		}
	}
	c.Status.CARotation = next
	if !d.Quiet {
		meta.SetStatusCondition(&c.Status.Conditions, *rotationCondition(c, next.Stage, d.Why))
	}
	if err := r.Status().Patch(ctx, c, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return err
	}
	if !d.Quiet {
		r.event(ctx, c, corev1.EventTypeNormal, next.Stage, "RotateCA", "%s", d.Why)
	}
	return nil
}

// observeRotation reads what carotation.Next needs: the Certificates' issuers always, and
// during a rotation the probes, the bundle, the members and what they serve.
func (r *Reconciler) observeRotation(ctx context.Context, c *etcdv1.EtcdCluster, v *clusterView) (rotationLook, error) {
	look := rotationLook{}
	look.in.Status, look.in.Wanted = c.Status.CARotation, specs.WantedIssuers(c)
	for _, w := range look.in.Wanted {
		ref, ok, err := r.certificateIssuer(ctx, c, w.Certificate)
		if err != nil {
			return look, err
		}
		if ok {
			look.in.Applied = append(look.in.Applied, etcdv1.CertificateIssuer{Certificate: w.Certificate, Issuer: ref})
		}
	}
	if !carotation.Active(c.Status.CARotation) {
		return look, nil
	}
	return look, r.observeActiveRotation(ctx, c, v, &look)
}

// observeActiveRotation is observeRotation during a rotation.
func (r *Reconciler) observeActiveRotation(ctx context.Context, c *etcdv1.EtcdCluster, v *clusterView, look *rotationLook) error {
	in, rot := &look.in, c.Status.CARotation
	newCAs, known, err := r.probedCAs(ctx, c, rot.To)
	if err != nil {
		return err
	}
	in.NewCAsKnown = known
	if !known && rot.Stage == etcdv1.ReasonTrustingBoth {
		return nil
	}
	if look.bundle, err = r.wantedBundle(ctx, c, rot, newCAs); err != nil {
		return err
	}
	if look.current, err = r.readSecret(ctx, c, specs.CABundleSecretName(c.Name)); err != nil {
		return err
	}
	// Written and recorded: a crash between the Secret's write and the status patch writes
	// again, so the hash members are marked with and new members start with is the bundle's.
	in.BundleCurrent = look.current != nil && sameBundle(look.current.Data, look.bundle) &&
		c.Status.CARotation.BundleHash == specs.CABundleHash(look.bundle)
	in.MembersMarked = membersMarked(v, specs.CABundleSecretName(c.Name), specs.CABundleHash(look.bundle))
	outdated, down := r.classifyPods(c, v, v.pods)
	in.MembersRestarted = in.MembersMarked && len(outdated) == 0 && len(down) == 0
	if rot.Stage == etcdv1.ReasonReissuingOnNewCA {
		if in.Reissued, err = r.reissued(ctx, c, v, rot.To, newCAs); err != nil {
			return err
		}
		in.OperatorClientMoved = in.Reissued && r.operatorClientAnswers(ctx, c, v)
	}
	return nil
}

// membersMarked: every member's spec names bundle ("" for the cluster's own Secrets) with hash.
func membersMarked(v *clusterView, bundle, hash string) bool {
	for _, m := range v.members {
		if m.Spec.TLS == nil || m.Spec.TLS.CABundleSecretName != bundle || m.Spec.TLS.CABundleHash != hash {
			return false
		}
	}
	return len(v.members) > 0
}

// certificateIssuer is the issuer the cluster's Certificate name names; false when there is
// no such Certificate of the cluster's.
func (r *Reconciler) certificateIssuer(ctx context.Context, c *etcdv1.EtcdCluster, name string) (etcdv1.IssuerReference, bool, error) {
	cert := &unstructured.Unstructured{}
	cert.SetGroupVersionKind(specs.CertificateGVK)
	err := r.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: name}, cert)
	if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
		return etcdv1.IssuerReference{}, false, nil
	}
	if err != nil {
		return etcdv1.IssuerReference{}, false, err
	}
	if !metav1.IsControlledBy(cert, c) {
		return etcdv1.IssuerReference{}, false, nil
	}
	n, _, _ := unstructured.NestedString(cert.Object, "spec", "issuerRef", "name")
	k, _, _ := unstructured.NestedString(cert.Object, "spec", "issuerRef", "kind")
	return etcdv1.IssuerReference{Name: n, Kind: k}, n != "", nil
}

// probedCAs are the CAs of the new issuers, by the Certificate they will issue: each probe's
// ca.crt, once its Secret holds a certificate that issuer signed under that CA.
func (r *Reconciler) probedCAs(ctx context.Context, c *etcdv1.EtcdCluster, to []etcdv1.CertificateIssuer) (map[string][]byte, bool, error) {
	out := map[string][]byte{}
	for _, t := range to {
		ref, ok, err := r.certificateIssuer(ctx, c, specs.CAProbeName(t.Certificate))
		if err != nil || !ok || ref.Name != t.Issuer.Name || kindOf(ref) != kindOf(t.Issuer) {
			return nil, false, err
		}
		s, err := r.readSecret(ctx, c, specs.CAProbeName(t.Certificate))
		if err != nil || s == nil {
			return nil, false, err
		}
		if s.Annotations["cert-manager.io/issuer-name"] != t.Issuer.Name || !signedBy(s.Data[specs.SecretKeyCert], s.Data[specs.SecretKeyCA]) {
			return nil, false, nil
		}
		out[t.Certificate] = s.Data[specs.SecretKeyCA]
	}
	return out, true, nil
}

func kindOf(ref etcdv1.IssuerReference) string {
	if ref.Kind == "" {
		return specs.IssuerGVK.Kind
	}
	return ref.Kind
}

// wantedBundle is the bundle this stage needs: for each side, the CA of its certificate
// Secret, with the new issuer's CA beside it while both are trusted, or that alone once the
// old one is dropped.
func (r *Reconciler) wantedBundle(ctx context.Context, c *etcdv1.EtcdCluster, rot *etcdv1.CARotationStatus, newCAs map[string][]byte) (map[string][]byte, error) {
	sides := map[string]string{} // bundle key -> the Certificate (Secret) whose CA it holds
	if specs.ClientTLS(c) {
		sides[specs.CABundleKeyServer] = specs.ServerSecretName(c)
		sides[specs.CABundleKeyClient] = specs.ServerSecretName(c)
		if n := specs.ClientCASecretName(c); n != "" {
			sides[specs.CABundleKeyClient] = n
		}
	}
	if specs.PeerSecretTLS(c) {
		sides[specs.CABundleKeyPeer] = specs.PeerSecretName(c)
	}
	out := map[string][]byte{specs.CABundleKeyClient: nil, specs.CABundleKeyPeer: nil, specs.CABundleKeyServer: nil}
	for key, name := range sides {
		newCA, rotated := newCAs[name]
		if rotated && !carotation.TrustsBoth(rot) {
			out[key] = joinCAs(newCA)
			continue
		}
		s, err := r.readSecret(ctx, c, name)
		if err != nil {
			return nil, err
		}
		if s == nil {
			return nil, fmt.Errorf("CA rotation: the Secret %s is missing", name)
		}
		out[key] = joinCAs(s.Data[specs.SecretKeyCA], newCA)
	}
	return out, nil
}

func sameBundle(have, want map[string][]byte) bool {
	for k, v := range want {
		if !bytes.Equal(have[k], v) {
			return false
		}
	}
	return true
}

// joinCAs is the distinct certificates of the PEM inputs, in order, as one PEM file.
func joinCAs(pems ...[]byte) []byte {
	var out []byte
	var seen [][]byte
	for _, p := range pems {
		for {
			var b *pem.Block
			b, p = pem.Decode(p)
			if b == nil {
				break
			}
			if b.Type != "CERTIFICATE" || slices.ContainsFunc(seen, func(s []byte) bool { return bytes.Equal(s, b.Bytes) }) {
				continue
			}
			seen = append(seen, b.Bytes)
			out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: b.Bytes})...)
		}
	}
	return out
}

// signedBy: the first certificate of certPEM was signed by one of the CAs of caPEM.
func signedBy(certPEM, caPEM []byte) bool {
	b, _ := pem.Decode(certPEM)
	if b == nil {
		return false
	}
	leaf, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		return false
	}
	return signedByCert(leaf, caPEM)
}

func signedByCert(leaf *x509.Certificate, caPEM []byte) bool {
	for rest := caPEM; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			return false
		}
		ca, err := x509.ParseCertificate(b.Bytes)
		if err == nil && leaf.CheckSignatureFrom(ca) == nil {
			return true
		}
	}
}

// reissued: every Certificate the rotation moves holds a certificate of its new CA, and every
// member serves it on the port it secures (the operator's client certificate is served by
// no one).
func (r *Reconciler) reissued(ctx context.Context, c *etcdv1.EtcdCluster, v *clusterView, to []etcdv1.CertificateIssuer, newCAs map[string][]byte) (bool, error) {
	for _, t := range to {
		s, err := r.readSecret(ctx, c, t.Certificate)
		if err != nil || s == nil {
			return false, err
		}
		if !signedBy(s.Data[specs.SecretKeyCert], newCAs[t.Certificate]) {
			return false, nil
		}
		urlOf := map[string]func(*etcdv1.EtcdCluster, string) string{
			specs.ServerSecretName(c): specs.ClientURL,
			specs.PeerSecretName(c):   specs.PeerURL,
		}[t.Certificate]
		if urlOf == nil {
			continue
		}
		urls := make([]string, 0, len(v.members))
		for _, m := range v.members {
			urls = append(urls, urlOf(c, m.Name))
		}
		if !r.allServe(ctx, urls, newCAs[t.Certificate], issuedAt(s.Data[specs.SecretKeyCert])) {
			return false, nil
		}
	}
	return true, nil
}

// allServe: every member at urls serves a certificate of caPEM (serves), all asked at once,
// so that members whose packets are dropped cost one dial timeout together, not one each
// within the step's deadline.
func (r *Reconciler) allServe(ctx context.Context, urls []string, caPEM []byte, issued time.Time) bool {
	answers := make(chan bool, len(urls))
	for _, u := range urls {
		go func() { answers <- r.serves(ctx, u, caPEM, issued) }()
	}
	all := true
	for range urls {
		all = <-answers && all
	}
	return all
}

func issuedAt(certPEM []byte) time.Time {
	b, _ := pem.Decode(certPEM)
	if b == nil {
		return time.Time{}
	}
	leaf, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		return time.Time{}
	}
	return leaf.NotBefore
}

// serves: the member at rawURL presents a certificate of caPEM. The certificate is read from
// the handshake before any verification (the operator may have no certificate the peer port
// accepts); a member that cannot be reached counts once servedGrace passed since issue.
func (r *Reconciler) serves(ctx context.Context, rawURL string, caPEM []byte, issued time.Time) bool {
	u, err := url.Parse(rawURL)
	if err != nil {
		return false
	}
	var leaf *x509.Certificate
	cfg := &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12, //nolint:gosec // only reads the served certificate
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			if len(raw) > 0 {
				leaf, _ = x509.ParseCertificate(raw[0])
			}
			return nil
		}}
	dialCtx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	conn, err := (&tls.Dialer{Config: cfg, NetDialer: &net.Dialer{}}).DialContext(dialCtx, "tcp", u.Host)
	if conn != nil {
		_ = conn.Close()
	}
	if leaf != nil {
		return signedByCert(leaf, caPEM)
	}
	return err != nil && !issued.IsZero() && r.now().After(issued.Add(servedGrace))
}

// operatorClientAnswers: a client opened now, with the operator's current client certificate,
// gets an answer from etcd.
func (r *Reconciler) operatorClientAnswers(ctx context.Context, c *etcdv1.EtcdCluster, v *clusterView) bool {
	if r.NewClient == nil {
		return false
	}
	var endpoints []string
	for _, m := range v.members {
		endpoints = append(endpoints, specs.ClientURL(c, m.Name))
	}
	cli, err := r.NewClient(ctx, c, endpoints)
	if err == nil {
		defer func() { _ = cli.Close() }()
		callCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, _, err = cli.MemberList(callCtx)
	}
	if err != nil {
		// The rotation waits on it (its condition says so); why is in the log.
		log.FromContext(ctx).V(1).Info("the operator's client with its new certificate got no answer", "error", err.Error())
	}
	return err == nil
}

// ensureProbes asks each new issuer for a probe certificate.
// probe makes the probe Certificates; once they are as they should be, what is left is
// waiting for the new issuers to sign them, which is no step: their Secrets wake the cluster
// (clustersForSecret), rotationRetry bounds the wait, and the condition says what it waits for.
func (r *Reconciler) probe(ctx context.Context, c *etcdv1.EtcdCluster, v *clusterView, d carotation.Decision) (bool, error) {
	acted, err := r.ensureProbes(ctx, c)
	if err != nil || acted {
		return acted, err
	}
	v.caRotation = rotationCondition(c, c.Status.CARotation.Stage, d.Why+": waiting for the new issuers to sign "+probeNames(c.Status.CARotation.To))
	v.caRotationRetry = rotationRetry
	return false, nil
}

func probeNames(to []etcdv1.CertificateIssuer) string {
	names := make([]string, 0, len(to))
	for _, t := range to {
		names = append(names, specs.CAProbeName(t.Certificate))
	}
	return strings.Join(names, ", ")
}

// ensureProbes creates or corrects each probe Certificate; acted is true when it wrote one.
func (r *Reconciler) ensureProbes(ctx context.Context, c *etcdv1.EtcdCluster) (acted bool, err error) {
	for _, t := range c.Status.CARotation.To {
		want := specs.CAProbeCertificate(c, t.Certificate, t.Issuer)
		have := &unstructured.Unstructured{}
		have.SetGroupVersionKind(specs.CertificateGVK)
		err := r.Get(ctx, client.ObjectKeyFromObject(want), have)
		if apierrors.IsNotFound(err) {
			if err := controllerutil.SetControllerReference(c, want, r.Scheme()); err != nil {
				return acted, err
			}
			if err := r.Create(ctx, want); client.IgnoreAlreadyExists(err) != nil {
				return acted, err
			}
			acted = true
			continue
		}
		if err != nil {
			return acted, err
		}
		if !metav1.IsControlledBy(have, c) {
			return acted, waitFor(etcdv1.ReasonCertificateConflict, "Certificate %s exists and does not belong to this cluster: delete or rename it, so that the CA rotation can learn the new issuer's CA", have.GetName())
		}
		wantSpec, _, _ := unstructured.NestedMap(want.Object, "spec")
		haveSpec, _, _ := unstructured.NestedMap(have.Object, "spec")
		if !equality.Semantic.DeepEqual(wantSpec, haveSpec) {
			_ = unstructured.SetNestedMap(have.Object, wantSpec, "spec")
			if err := r.Update(ctx, have); err != nil {
				return acted, err
			}
			acted = true
		}
	}
	return acted, nil
}

// deleteProbes deletes the probe Certificates and empties their Secrets: their certificates
// are good clients of the cluster.
func (r *Reconciler) deleteProbes(ctx context.Context, c *etcdv1.EtcdCluster) error {
	for _, t := range c.Status.CARotation.To {
		name := specs.CAProbeName(t.Certificate)
		cert := &unstructured.Unstructured{}
		cert.SetGroupVersionKind(specs.CertificateGVK)
		cert.SetNamespace(c.Namespace)
		cert.SetName(name)
		if err := r.Delete(ctx, cert); client.IgnoreNotFound(err) != nil {
			return err
		}
		s, err := r.readSecret(ctx, c, name)
		if err != nil {
			return err
		}
		if s != nil && holdsKeyMaterial(s) {
			s.Data = emptiedProbeData(s)
			if err := r.Update(ctx, s); err != nil {
				return err
			}
		}
	}
	return nil
}

// holdsKeyMaterial: some key of s has a value.
func holdsKeyMaterial(s *corev1.Secret) bool {
	for _, v := range s.Data {
		if len(v) > 0 {
			return true
		}
	}
	return false
}

// emptiedProbeData is what a probe Secret keeps once its certificate is no longer needed:
// nothing, but a kubernetes.io/tls Secret (what cert-manager writes) must keep tls.crt and
// tls.key, which the API server otherwise refuses ("Required value"), so they stay, empty.
func emptiedProbeData(s *corev1.Secret) map[string][]byte {
	if s.Type != corev1.SecretTypeTLS {
		return nil
	}
	return map[string][]byte{corev1.TLSCertKey: {}, corev1.TLSPrivateKeyKey: {}}
}

// writeBundle writes the bundle this stage needs and records its fingerprint, which members
// created from then on start with.
func (r *Reconciler) writeBundle(ctx context.Context, c *etcdv1.EtcdCluster, look rotationLook) error {
	s := look.current
	if s == nil {
		s = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: specs.CABundleSecretName(c.Name),
			Labels: specs.ClusterLabels(c.Name)}}
		if err := controllerutil.SetControllerReference(c, s, r.Scheme()); err != nil {
			return err
		}
	} else if !metav1.IsControlledBy(s, c) {
		return waitFor(etcdv1.ReasonNameConflict, "Secret %s exists and does not belong to this cluster: delete or rename it, so that the CA rotation can write the CAs members trust", s.Name)
	}
	s.Data = look.bundle
	var err error
	if look.current == nil {
		err = r.Create(ctx, s)
	} else {
		err = r.Update(ctx, s)
	}
	if err != nil {
		return err
	}
	before := c.DeepCopy()
	c.Status.CARotation.BundleHash = specs.CABundleHash(look.bundle)
	return r.Status().Patch(ctx, c, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
}

// markMembers sets the bundle ("" for a cluster's own Secrets) and the fingerprint of the CAs
// to trust on every member's spec; the rolling restart then restarts them one at a time, the
// leader last.
func (r *Reconciler) markMembers(ctx context.Context, v *clusterView, bundle, hash string) error {
	for _, m := range v.members {
		if m.Spec.TLS == nil {
			continue
		}
		if m.Spec.TLS.CABundleSecretName == bundle && m.Spec.TLS.CABundleHash == hash {
			continue
		}
		patch := client.MergeFrom(m.DeepCopy())
		m.Spec.TLS.CABundleSecretName, m.Spec.TLS.CABundleHash = bundle, hash
		if err := r.Patch(ctx, m, patch); err != nil {
			return err
		}
	}
	return nil
}

// readSecret is the Secret name of c's namespace, nil when there is none.
func (r *Reconciler) readSecret(ctx context.Context, c *etcdv1.EtcdCluster, name string) (*corev1.Secret, error) {
	s := &corev1.Secret{}
	err := r.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: name}, s)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return s, nil
}

// ownSecretsOnly: every certificate of the cluster is one of the user's Secrets.
func ownSecretsOnly(c *etcdv1.EtcdCluster) bool {
	t := c.Spec.TLS
	if t.Client != nil && t.Client.CertManager != nil || t.Peer != nil && t.Peer.CertManager != nil {
		return false
	}
	return specs.ClientTLS(c) || specs.PeerSecretTLS(c)
}

// reloadOwnCAs restarts the members, one at a time, when the ca.crt of the cluster's own
// Secrets changed (carotation.NextForSecrets).
func (r *Reconciler) reloadOwnCAs(ctx context.Context, c *etcdv1.EtcdCluster, v *clusterView) (bool, error) {
	current, ok, err := r.ownCAsHash(ctx, c)
	if err != nil || !ok {
		return false, err // a Secret missing or without ca.crt: TLSReady says so
	}
	in := carotation.SecretsObserved{Status: c.Status.CARotation, Current: current, Now: r.now()}
	if rot := c.Status.CARotation; rot != nil {
		in.MembersMarked = membersMarked(v, "", rot.SecretsHash)
	}
	outdated, down := r.classifyPods(c, v, v.pods)
	in.MembersRestarted = in.MembersMarked && len(outdated) == 0 && len(down) == 0
	d := carotation.NextForSecrets(in)
	switch {
	case d.Quiet:
		// A first look, no rotation: written with the rest of the status (noteOwnCAs).
		return false, nil
	case d.Action == carotation.Record:
		return true, r.recordRotation(ctx, c, d, nil)
	case d.Action == carotation.MarkMembers:
		return true, r.markMembers(ctx, v, "", c.Status.CARotation.SecretsHash)
	case d.Action == carotation.Wait:
		v.caRotation = rotationCondition(c, c.Status.CARotation.Stage, d.Why)
		v.caRotationRetry = carotation.Settle
	}
	return false, nil
}

// noteOwnCAs records, at the first look of a cluster with its own certificate Secrets, the
// fingerprint of the ca.crt its members were started with, so that a later change of it is
// seen. It is no step: the record goes with the reconcile's status write.
func (r *Reconciler) noteOwnCAs(ctx context.Context, c *etcdv1.EtcdCluster, v *clusterView) error {
	if c.Spec.TLS == nil || !ownSecretsOnly(c) || (c.Status.CARotation != nil && c.Status.CARotation.SecretsHash != "") {
		return nil
	}
	current, ok, err := r.ownCAsHash(ctx, c)
	if err != nil || !ok {
		return err
	}
	if d := carotation.NextForSecrets(carotation.SecretsObserved{Status: c.Status.CARotation, Current: current}); d.Quiet {
		v.caRotationStatus = d.Status
	}
	return nil
}

// ownCAsHash fingerprints the ca.crt members trust from the cluster's own Secrets (the server
// Secret's for clients, the peer Secret's for peers); false when one cannot be read.
func (r *Reconciler) ownCAsHash(ctx context.Context, c *etcdv1.EtcdCluster) (string, bool, error) {
	data := map[string][]byte{}
	for key, name := range map[string]string{specs.CABundleKeyClient: specs.ServerSecretName(c), specs.CABundleKeyPeer: specs.PeerSecretName(c)} {
		if key == specs.CABundleKeyClient && !specs.ClientTLS(c) || key == specs.CABundleKeyPeer && !specs.PeerSecretTLS(c) {
			continue
		}
		s, err := r.readSecret(ctx, c, name)
		if err != nil || s == nil || len(s.Data[specs.SecretKeyCA]) == 0 {
			return "", false, err
		}
		data[key] = s.Data[specs.SecretKeyCA]
	}
	return specs.CABundleHash(data), true, nil
}
