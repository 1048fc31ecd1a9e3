package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// cert-manager, started on request, issues a CA chain: self-signed root, CA Issuer, server
// certificate, as the TLS journey of the operator needs.
func TestCertManagerIssuesACertificateChain(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	manifest := filepath.Join(t.TempDir(), "chain.yaml")
	chain := `apiVersion: cert-manager.io/v1
kind: Issuer
metadata: {name: selfsigned}
spec: {selfSigned: {}}
---
apiVersion: cert-manager.io/v1
kind: Certificate
metadata: {name: root-ca}
spec: {isCA: true, commonName: root-ca, secretName: root-ca, issuerRef: {name: selfsigned}}
---
apiVersion: cert-manager.io/v1
kind: Issuer
metadata: {name: etcd-ca}
spec: {ca: {secretName: root-ca}}
---
apiVersion: cert-manager.io/v1
kind: Certificate
metadata: {name: server}
spec: {secretName: server-tls, dnsNames: [example.default.svc], issuerRef: {name: etcd-ca}}
`
	if err := os.WriteFile(manifest, []byte(chain), 0o600); err != nil {
		t.Fatal(err)
	}
	kubectl(t, ns, "apply", "-f", manifest)
	eventually(t, 2*time.Minute, "the server certificate issued by the CA Issuer", func() error {
		res := kubectlRun(ns, "wait", "certificate/server", "--for=condition=Ready", "--timeout=5s")
		if res.code != 0 {
			return res.err
		}
		return nil
	}, func() string { return kubectlRun(ns, "describe", "certificates,issuers").stdout })
	keys := kubectl(t, ns, "get", "secret", "server-tls", "-o", "go-template={{range $k, $v := .data}}{{$k}} {{end}}")
	for _, key := range []string{"ca.crt", "tls.crt", "tls.key"} {
		if !strings.Contains(keys, key) {
			t.Errorf("secret server-tls lacks %s (has %s)", key, keys)
		}
	}
}

// MinIO, started on request, answers on the bridge address, reachable from Pods.
func TestMinIOServesPods(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	createPod(t, ns, toolboxPod("client", "sleep", "600"))
	waitRunningReady(t, ns, "client")
	eventually(t, time.Minute, "MinIO's health endpoint from a Pod", func() error {
		res := kubectlRun(ns, "exec", "client", "--", toolbox, "get", "http://10.213.0.1:9000/minio/health/live")
		if res.code != 0 {
			return res.err
		}
		return nil
	}, nil)
}
