package chart

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// endpoint is the ServiceMonitor's one endpoint.
func endpoint(t *testing.T, objects map[string]*unstructured.Unstructured) map[string]any {
	t.Helper()
	endpoints, _, _ := unstructured.NestedSlice(mustGet(t, objects, "ServiceMonitor/operators/"+fullname).Object, "spec", "endpoints")
	if len(endpoints) != 1 {
		t.Fatalf("ServiceMonitor endpoints %v", endpoints)
	}
	return endpoints[0].(map[string]any)
}

func str(obj map[string]any, fields ...string) string {
	s, _, _ := unstructured.NestedString(obj, fields...)
	return s
}

// With cert-manager the operator serves a certificate for its Service's name, and the
// ServiceMonitor verifies it against the CA cert-manager writes beside it, authenticating
// with the token of a ServiceAccount that may read the metrics and no more.
func TestServiceMonitorVerifiesTheOperatorsCertificate(t *testing.T) {
	objects := render(t, "metrics.serviceMonitor.enabled=true", "metrics.certificate.certManager.enabled=true")
	secret := fullname + "-metrics-cert"
	host := fullname + "-metrics.operators.svc"
	ep := endpoint(t, objects)
	if ep["scheme"] != "https" || str(ep, "tlsConfig", "serverName") != host ||
		str(ep, "tlsConfig", "ca", "secret", "name") != secret || str(ep, "tlsConfig", "ca", "secret", "key") != "ca.crt" {
		t.Errorf("endpoint %v: want https verified against %s's ca.crt as %s", ep, secret, host)
	}
	if skip, found, _ := unstructured.NestedBool(ep, "tlsConfig", "insecureSkipVerify"); found && skip {
		t.Error("the ServiceMonitor skips verification though the certificate can be verified")
	}
	if _, found := ep["bearerTokenFile"]; found {
		t.Error("the ServiceMonitor uses the deprecated bearerTokenFile")
	}
	checkScraper(t, objects, ep)
	checkCertificate(t, objects, secret, host)
	checkServesFrom(t, objects, secret)
}

// checkScraper: the endpoint sends the token of a ServiceAccount bound to the metrics reader role.
func checkScraper(t *testing.T, objects map[string]*unstructured.Unstructured, ep map[string]any) {
	t.Helper()
	token := fullname + "-metrics-scraper-token"
	if str(ep, "authorization", "type") != "Bearer" || str(ep, "authorization", "credentials", "name") != token || str(ep, "authorization", "credentials", "key") != "token" {
		t.Errorf("authorization %v: want Bearer with %s's token", ep["authorization"], token)
	}
	tokenSecret := mustGet(t, objects, "Secret/operators/"+token)
	if str(tokenSecret.Object, "type") != "kubernetes.io/service-account-token" || tokenSecret.GetAnnotations()["kubernetes.io/service-account.name"] != fullname+"-metrics-scraper" {
		t.Errorf("token Secret %v: want a token of the scraper ServiceAccount", tokenSecret.Object)
	}
	mustGet(t, objects, "ServiceAccount/operators/"+fullname+"-metrics-scraper")
	binding := mustGet(t, objects, "ClusterRoleBinding//"+fullname+"-metrics-scraper")
	checkSubjects(t, binding, fullname+"-metrics-scraper")
	if str(binding.Object, "roleRef", "name") != fullname+"-metrics-reader" {
		t.Errorf("the scraper is bound to %v, want the metrics reader role", binding.Object["roleRef"])
	}
}

// checkCertificate: cert-manager issues the serving certificate for host from the release's CA.
func checkCertificate(t *testing.T, objects map[string]*unstructured.Unstructured, secret, host string) {
	t.Helper()
	cert := mustGet(t, objects, "Certificate/operators/"+secret)
	dnsNames, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
	if str(cert.Object, "spec", "secretName") != secret || !slices.Contains(dnsNames, host) {
		t.Errorf("Certificate %v: want %s for %s", cert.Object["spec"], secret, host)
	}
	if str(cert.Object, "spec", "issuerRef", "name") != fullname+"-metrics-ca" {
		t.Errorf("Certificate issuer %v, want the release's own CA", cert.Object["spec"])
	}
	mustGet(t, objects, "Issuer/operators/"+fullname+"-metrics-ca")
	mustGet(t, objects, "Issuer/operators/"+fullname+"-selfsigned")
	if isCA, _, _ := unstructured.NestedBool(mustGet(t, objects, "Certificate/operators/"+fullname+"-metrics-ca").Object, "spec", "isCA"); !isCA {
		t.Error("the release's CA certificate is no CA")
	}
}

// checkServesFrom: the operator is told to serve the certificate of the Secret it mounts.
func checkServesFrom(t *testing.T, objects map[string]*unstructured.Unstructured, secret string) {
	t.Helper()
	const dir = "/etc/etcd-operator/metrics-cert"
	if !slices.Contains(args(t, objects), "--metrics-cert-path="+dir) {
		t.Errorf("args %v lack --metrics-cert-path=%s", args(t, objects), dir)
	}
	mounts, _, _ := unstructured.NestedSlice(container(t, objects), "volumeMounts")
	volumes, _, _ := unstructured.NestedSlice(mustGet(t, objects, "Deployment/operators/"+fullname).Object, "spec", "template", "spec", "volumes")
	if len(mounts) != 1 || str(mounts[0].(map[string]any), "mountPath") != dir || len(volumes) != 1 || str(volumes[0].(map[string]any), "secret", "secretName") != secret {
		t.Errorf("mounts %v, volumes %v: want %s at %s", mounts, volumes, secret, dir)
	}
}

func TestMetricsCertificateChoices(t *testing.T) {
	// An issuer of the user's: no CA of the release's.
	objects := render(t, "metrics.certificate.certManager.enabled=true", "metrics.certificate.certManager.issuerRef.name=corp-ca", "metrics.certificate.certManager.issuerRef.kind=ClusterIssuer")
	cert := mustGet(t, objects, "Certificate/operators/"+fullname+"-metrics-cert")
	if str(cert.Object, "spec", "issuerRef", "name") != "corp-ca" || str(cert.Object, "spec", "issuerRef", "kind") != "ClusterIssuer" {
		t.Errorf("issuerRef %v, want the ClusterIssuer corp-ca", cert.Object["spec"])
	}
	for key := range objects {
		if strings.HasPrefix(key, "Issuer/") {
			t.Errorf("%s made though an issuer is named", key)
		}
	}
	// A Secret of the user's, its CA elsewhere, another server name.
	objects = render(t, "metrics.certificate.secretName=my-cert", "metrics.serviceMonitor.enabled=true",
		"metrics.serviceMonitor.tls.ca.secretName=corp-ca", "metrics.serviceMonitor.tls.ca.key=root.pem", "metrics.serviceMonitor.tls.serverName=metrics.example")
	checkServesFrom(t, objects, "my-cert")
	ep := endpoint(t, objects)
	if str(ep, "tlsConfig", "ca", "secret", "name") != "corp-ca" || str(ep, "tlsConfig", "ca", "secret", "key") != "root.pem" || str(ep, "tlsConfig", "serverName") != "metrics.example" {
		t.Errorf("tlsConfig %v", ep["tlsConfig"])
	}
	for key := range objects {
		if strings.HasPrefix(key, "Certificate/") {
			t.Errorf("%s made though the certificate is the user's", key)
		}
	}
	// No certificate: the operator self-signs, nothing is mounted.
	objects = render(t)
	if slices.ContainsFunc(args(t, objects), func(a string) bool { return strings.HasPrefix(a, "--metrics-cert-path") }) {
		t.Errorf("args %v: --metrics-cert-path without a certificate", args(t, objects))
	}
	_, stderr, err := tryHelm(t, templateArgs(chartDir, "metrics.certificate.certManager.enabled=true", "metrics.certificate.secretName=x")...)
	if err == nil || !strings.Contains(stderr, "set one") {
		t.Errorf("certManager and secretName both: err %v %s, want refused", err, stderr)
	}
}

// A certificate no one can verify gets no ServiceMonitor, unless insecure is asked for by name.
func TestServiceMonitorInsecureIsExplicit(t *testing.T) {
	_, stderr, err := tryHelm(t, templateArgs(chartDir, "metrics.serviceMonitor.enabled=true")...)
	if err == nil || !strings.Contains(stderr, "metrics.serviceMonitor.tls.insecureSkipVerify=true") {
		t.Errorf("a ServiceMonitor of the self-signed certificate: err %v, stderr %s; want refused, naming the choices", err, stderr)
	}
	ep := endpoint(t, render(t, "metrics.serviceMonitor.enabled=true", "metrics.serviceMonitor.tls.insecureSkipVerify=true"))
	if skip, _, _ := unstructured.NestedBool(ep, "tlsConfig", "insecureSkipVerify"); !skip {
		t.Errorf("tlsConfig %v, want insecureSkipVerify as asked", ep["tlsConfig"])
	}
	// A token of the user's: no scraper of the chart's.
	objects := render(t, "metrics.serviceMonitor.enabled=true", "metrics.certificate.certManager.enabled=true", "metrics.serviceMonitor.tokenSecret.name=prom-token")
	if got := str(endpoint(t, objects), "authorization", "credentials", "name"); got != "prom-token" {
		t.Errorf("credentials %q, want prom-token", got)
	}
	for key := range objects {
		if strings.Contains(key, "metrics-scraper") {
			t.Errorf("%s made though the token is the user's", key)
		}
	}
	// Plain HTTP: no TLS and no token to send.
	ep = endpoint(t, render(t, "metrics.serviceMonitor.enabled=true", "metrics.secure=false"))
	if _, found := ep["tlsConfig"]; found || ep["authorization"] != nil || ep["scheme"] == "https" {
		t.Errorf("plain HTTP endpoint %v", ep)
	}
}
