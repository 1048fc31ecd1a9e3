package etcdaccess

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/carotation"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// SecretClientFactory opens etcd clients the way spec.tls and spec.auth say: it trusts the
// ca.crt of the server Secret, presents the operator's client certificate where etcd requires
// one, and logs in as root where auth is wanted. The Secrets are read at every call (from the
// manager's cache) and nothing is kept, so a certificate cert-manager renewed, a Secret the
// user replaced or a password the operator changed is used by the very next client.
type SecretClientFactory struct {
	Reader client.Reader
	// Open makes the client from the assembled configuration; etcd.New outside tests.
	Open func(etcd.Config) (etcd.Client, error)
}

// NewSecretClientFactory is the client factory both reconcilers use (kit.ClientFactory).
func NewSecretClientFactory(r client.Reader) func(context.Context, *etcdv1.EtcdCluster, []string) (etcd.Client, error) {
	f := &SecretClientFactory{Reader: r, Open: etcd.New}
	return f.New
}

// New opens a client of cluster c for the given endpoints.
func (f *SecretClientFactory) New(ctx context.Context, c *etcdv1.EtcdCluster, endpoints []string) (etcd.Client, error) {
	cfg := etcd.Config{Endpoints: endpoints}
	if specs.ClientTLS(c) {
		tlsCfg, err := clientTLSConfig(ctx, f.Reader, c)
		if err != nil {
			return nil, err
		}
		cfg.TLS = tlsCfg
	}
	passwords, err := rootPasswords(ctx, f.Reader, c)
	if err != nil {
		return nil, err
	}
	if len(passwords) == 0 {
		return f.Open(cfg)
	}
	// The applied password is what etcd has, except right after a crash between changing it
	// in etcd and recording it: then the wanted one works. While auth is still off, etcd
	// ignores credentials, so the first attempt succeeds.
	var refused error
	for _, password := range passwords {
		cfg.Username, cfg.Password = etcd.RootUser, password
		cli, err := f.Open(cfg)
		if err == nil {
			return cli, nil
		}
		if !errors.Is(err, etcd.ErrAuthFailed) {
			return nil, err
		}
		refused = err
	}
	return nil, fmt.Errorf("etcd refuses root's password from Secret %s and the last applied one (Secret %s): %w",
		c.Spec.Auth.RootCredentialsSecretRef.Name, specs.RootAppliedSecretName(c.Name), refused)
}

// clientTLSConfig trusts the server Secret's CA and, with mutual TLS, presents the operator's
// client certificate.
func clientTLSConfig(ctx context.Context, r client.Reader, c *etcdv1.EtcdCluster) (*tls.Config, error) {
	server, err := getSecret(ctx, r, c.Namespace, specs.ServerSecretName(c))
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(server.Data[specs.SecretKeyCA]) {
		return nil, fmt.Errorf("the Secret %s: %s holds no PEM certificate", server.Name, specs.SecretKeyCA)
	}
	if carotation.Active(c.Status.CARotation) {
		// While a CA rotation moves the server certificates, a member still serves the old
		// one until its kubelet updates its Secret volume: trust the old and the new CAs the
		// rotation wrote down (specs.CABundleKeyServer).
		bundle := &corev1.Secret{}
		err := r.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: specs.CABundleSecretName(c.Name)}, bundle)
		if client.IgnoreNotFound(err) != nil {
			return nil, err
		}
		roots.AppendCertsFromPEM(bundle.Data[specs.CABundleKeyServer])
	}
	cfg := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	if name := specs.OperatorClientSecretName(c); name != "" {
		s, err := getSecret(ctx, r, c.Namespace, name)
		if err != nil {
			return nil, err
		}
		pair, err := tls.X509KeyPair(s.Data[specs.SecretKeyCert], s.Data[specs.SecretKeyKey])
		if err != nil {
			return nil, fmt.Errorf("the Secret %s: %s and %s are no certificate and key pair: %w", name, specs.SecretKeyCert, specs.SecretKeyKey, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// rootPasswords are the passwords to log in as root with, the last applied first; none when
// spec.auth is off or no password is known yet.
func rootPasswords(ctx context.Context, r client.Reader, c *etcdv1.EtcdCluster) ([]string, error) {
	if !AuthWanted(c) {
		return nil, nil
	}
	var out []string
	applied, err := AppliedPassword(ctx, r, c)
	if err != nil {
		return nil, err
	}
	if applied != "" {
		out = append(out, applied)
	}
	wanted, problem, err := WantedPassword(ctx, r, c)
	if err != nil {
		return nil, err
	}
	if problem == nil && wanted != applied {
		out = append(out, wanted)
	}
	return out, nil
}

// AuthWanted: the cluster is to have authentication, with root's password from a Secret.
func AuthWanted(c *etcdv1.EtcdCluster) bool {
	return c.Spec.Auth != nil && c.Spec.Auth.Enabled && c.Spec.Auth.RootCredentialsSecretRef != nil
}

// getSecret reads a Secret; a missing one is an error that names it.
func getSecret(ctx context.Context, r client.Reader, namespace, name string) (*corev1.Secret, error) {
	s := &corev1.Secret{}
	err := r.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, s)
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("the Secret %s/%s does not exist: %w", namespace, name, err)
	}
	return s, err
}
