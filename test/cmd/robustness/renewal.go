package main

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
	"github.com/quorumkeeper/etcd-operator/test/robustness"
)

// The TLS scenario's CA: a self-signed Issuer signs a root, a CA Issuer signs every
// certificate of the cluster and the workload's client certificate (as docs/tls-journey.md).
const (
	caIssuer        = "etcd-ca"
	appClientSecret = "app-client-tls"
)

// tlsSpec is the cluster's TLS: server, peer and operator client certificates from caIssuer,
// so mutual TLS on both ports.
func tlsSpec() *etcdv1.EtcdClusterTLS {
	ref := etcdv1.IssuerReference{Name: caIssuer}
	return &etcdv1.EtcdClusterTLS{
		Client: &etcdv1.ClientTLS{CertManager: &etcdv1.ClientCertManager{ServerIssuerRef: ref, OperatorClientIssuerRef: &ref}},
		Peer:   &etcdv1.PeerTLS{CertManager: &etcdv1.PeerCertManager{IssuerRef: ref}},
	}
}

// setUpCA makes the CA Issuers and the workload's client certificate in the cluster's
// namespace and keeps the client TLS configuration for the workload's clients.
func (c *cluster) setUpCA(ctx context.Context) error {
	objs := []*unstructured.Unstructured{
		certManagerObject("Issuer", "selfsigned", map[string]any{"selfSigned": map[string]any{}}),
		certManagerObject("Certificate", "etcd-root-ca", map[string]any{
			"isCA": true, "commonName": "etcd-root-ca", "secretName": "etcd-root-ca",
			"privateKey": map[string]any{"algorithm": "ECDSA", "size": int64(256)},
			"issuerRef":  map[string]any{"name": "selfsigned", "kind": "Issuer"},
		}),
		certManagerObject("Issuer", caIssuer, map[string]any{"ca": map[string]any{"secretName": "etcd-root-ca"}}),
		certManagerObject("Certificate", "app-client", map[string]any{
			"secretName": appClientSecret, "commonName": "app",
			"usages":     []any{"digital signature", "client auth"},
			"privateKey": map[string]any{"algorithm": "ECDSA", "size": int64(256)},
			"issuerRef":  map[string]any{"name": caIssuer},
		}),
	}
	for _, o := range objs {
		o.SetNamespace(c.ns)
		if err := c.e.k8s.Create(ctx, o); err != nil {
			return fmt.Errorf("%s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	return poll(ctx, 2*time.Minute, "Secret "+appClientSecret+" issued", func(ctx context.Context) error {
		s := &corev1.Secret{}
		if err := c.e.k8s.Get(ctx, client.ObjectKey{Namespace: c.ns, Name: appClientSecret}, s); err != nil {
			return err
		}
		cfg, err := robustness.ClientTLS(s.Data[specs.SecretKeyCA], s.Data[specs.SecretKeyCert], s.Data[specs.SecretKeyKey],
			specs.ClientServiceName(c.name)+"."+c.ns+".svc")
		if err != nil {
			return err
		}
		c.tls = cfg
		return nil
	})
}

func certManagerObject(kind, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetAPIVersion("cert-manager.io/v1")
	u.SetKind(kind)
	u.SetName(name)
	return u
}

// renewalTrial has cert-manager renew the server, peer and operator client certificates at
// once (as `cmctl renew` does: an Issuing condition on each Certificate) while the workload
// runs; every member must serve the new server certificate and the cluster stay settled.
func renewalTrial(ctx context.Context, t *trialEnv) error {
	ec, err := t.c.get(ctx)
	if err != nil {
		return err
	}
	secrets := []string{specs.ServerSecretName(ec), specs.PeerSecretName(ec), specs.OperatorClientSecretName(ec)}
	logf("trial %d: certificates %v renewed", t.index, secrets)
	before := map[string]string{}
	for _, s := range secrets {
		if before[s], err = t.c.secretSerial(ctx, s); err != nil {
			return err
		}
		if err := t.c.renew(ctx, s); err != nil {
			return err
		}
	}
	for _, s := range secrets {
		err := poll(ctx, 2*time.Minute, s+" renewed", func(ctx context.Context) error {
			now, err := t.c.secretSerial(ctx, s)
			if err == nil && now == before[s] {
				err = fmt.Errorf("still serial %s", now)
			}
			return err
		})
		if err != nil {
			return err
		}
	}
	if err := t.c.waitServed(ctx, specs.ServerSecretName(ec)); err != nil {
		return err
	}
	return t.c.waitSettled(ctx, t.replicas, time.Time{})
}

// renew asks cert-manager to reissue the Certificate of the same name as its Secret (the
// operator names them alike).
func (c *cluster) renew(ctx context.Context, certificate string) error {
	u := certManagerObject("Certificate", certificate, nil)
	u.SetNamespace(c.ns)
	patch := []byte(`[{"op":"add","path":"/status/conditions/-","value":{"type":"Issuing","status":"True","reason":"ManuallyTriggered","message":"renewal by the robustness scenario"}}]`)
	return c.e.k8s.Status().Patch(ctx, u, client.RawPatch(types.JSONPatchType, patch))
}

// secretSerial is the serial number of the certificate in a Secret's tls.crt.
func (c *cluster) secretSerial(ctx context.Context, name string) (string, error) {
	s := &corev1.Secret{}
	if err := c.e.k8s.Get(ctx, client.ObjectKey{Namespace: c.ns, Name: name}, s); err != nil {
		return "", err
	}
	cert, err := robustness.ParseCertificate(s.Data[specs.SecretKeyCert])
	if err != nil {
		return "", fmt.Errorf("certificate in Secret %s: %w", name, err)
	}
	return cert.SerialNumber.String(), nil
}

// waitServed waits until every member serves, to a new connection on the client port, the
// certificate now in the Secret.
func (c *cluster) waitServed(ctx context.Context, secret string) error {
	return poll(ctx, 3*time.Minute, "every member serving the certificate of "+secret, func(ctx context.Context) error {
		want, err := c.secretSerial(ctx, secret)
		if err != nil {
			return err
		}
		pods, err := c.pods(ctx)
		if err != nil {
			return err
		}
		for _, p := range pods {
			if p.Status.PodIP == "" {
				return fmt.Errorf("member %s has no Pod IP yet", p.Name)
			}
			got, err := robustness.ServedSerial(p.Status.PodIP, specs.ClientPort, c.tls)
			if err != nil {
				return fmt.Errorf("member %s: %w", p.Name, err)
			}
			if got != want {
				return fmt.Errorf("member %s serves serial %s, the Secret has %s", p.Name, got, want)
			}
		}
		return nil
	})
}
