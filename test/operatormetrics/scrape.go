// Package operatormetrics scrapes the operator's secure metrics endpoint as Prometheus would:
// over HTTPS, with the token of a ServiceAccount bound to the etcd-operator-metrics-reader
// ClusterRole (config/rbac/metrics_reader_role.yaml). Used by the e2e tests and make bench.
package operatormetrics

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

const (
	// Namespace is where config/default installs the operator.
	Namespace = "etcd-operator-system"
	// Port is the operator's --metrics-bind-address port in config/manager.
	Port = "8443"
	// ReaderRole is the ClusterRole that may GET /metrics.
	ReaderRole = "etcd-operator-metrics-reader"
	scraper    = "etcd-operator-metrics-scraper"
)

// Token makes (or reuses) a ServiceAccount bound to ReaderRole and returns a token of it.
func Token(ctx context.Context, kube kubernetes.Interface) (string, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: scraper, Namespace: Namespace}}
	if _, err := kube.CoreV1().ServiceAccounts(Namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("creating ServiceAccount %s: %w", scraper, err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: scraper},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: ReaderRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: scraper, Namespace: Namespace}},
	}
	if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("creating ClusterRoleBinding %s: %w", scraper, err)
	}
	expiry := int64(3600)
	tr, err := kube.CoreV1().ServiceAccounts(Namespace).CreateToken(ctx, scraper,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("requesting a token of %s: %w", scraper, err)
	}
	return tr.Status.Token, nil
}

// Get fetches /metrics from the operator Pod at ip with token ("" sends none) and returns the
// HTTP status and body. The operator's serving certificate is self-signed (controller-runtime
// makes one at start when none is mounted), so it is not verified: what is tested is that the
// endpoint refuses a caller without a token and serves one with it.
func Get(ctx context.Context, ip, token string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+net.JoinHostPort(ip, Port)+"/metrics", nil)
	if err != nil {
		return 0, nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	client := &http.Client{
		Timeout:   10 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, //nolint:gosec // self-signed, see above
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}
