package migrate

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/testpki"
)

// aenixAuthObserved is aenixTLSObserved with spec.security.enableAuth on and etcd having
// authentication on, the client certificate (common name root) accepted as root.
func aenixAuthObserved(t *testing.T) (AenixObserved, *testpki.CA) {
	o, ca := aenixTLSObserved(t)
	o.Legacy["spec"].(map[string]any)["security"].(map[string]any)["enableAuth"] = true
	o.Auth = EtcdAuth{Known: true, Enabled: true}
	return o, ca
}

// A legacy cluster with auth is taken over with the root it has: the client certificate of
// spec.security.tls.clientSecret, whose common name is root. spec.auth stays unset (it would
// ask for a password the legacy root never had), and the dry run says so.
func TestPlanAenixTakesOverAuthWithTheRootCertificate(t *testing.T) {
	o, _ := aenixAuthObserved(t)
	p := PlanAenix(o)
	if len(p.Refusals) != 0 {
		t.Fatalf("refusals: %v", p.Refusals)
	}
	if p.Cluster.Spec.Auth != nil {
		t.Errorf("spec.auth %+v, want unset: the legacy root has no password", p.Cluster.Spec.Auth)
	}
	if ref := p.Cluster.Spec.TLS.Client.OperatorClientSecretRef; ref == nil || ref.Name != "lg-client-cert" {
		t.Errorf("operator client certificate %+v, want the legacy clientSecret lg-client-cert", ref)
	}
	out := p.Describe()
	for _, want := range []string{"authentication: on, as spec.security.enableAuth says, and it stays on: nothing changes in etcd",
		"the client certificate in Secret lg-client-cert", "spec.auth stays unset"} {
		if !strings.Contains(out, want) {
			t.Errorf("describe lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "create the Secret lg-root") {
		t.Errorf("describe asks for a root password Secret:\n%s", out)
	}
}

func TestPlanAenixAuth(t *testing.T) {
	for name, tc := range map[string]struct {
		change        func(t *testing.T, o *AenixObserved, ca *testpki.CA)
		refusal, auth string
	}{
		"not read": {change: func(_ *testing.T, o *AenixObserved, _ *testpki.CA) { o.Auth = EtcdAuth{} },
			refusal: "whether etcd has authentication on could not be read"},
		"off in etcd": {change: func(_ *testing.T, o *AenixObserved, _ *testpki.CA) { o.Auth.Enabled = false },
			refusal: "spec.security.enableAuth is on but etcd has authentication off"},
		"certificate of another user": {change: func(t *testing.T, o *AenixObserved, ca *testpki.CA) {
			o.Secrets["lg-client-cert"] = ca.SecretData(t, testpki.Request{CommonName: "etcd-operator"})
		}, refusal: `the client certificate of Secret lg-client-cert (spec.security.tls.clientSecret) has common name "etcd-operator"`},
		"not root in etcd": {change: func(_ *testing.T, o *AenixObserved, _ *testpki.CA) { o.Auth.RootErr = "etcdserver: permission denied" },
			refusal: "etcd refused a request only root may make (listing its users) with the client certificate of Secret lg-client-cert: etcdserver: permission denied"},
		"turned on by hand": {change: func(_ *testing.T, o *AenixObserved, _ *testpki.CA) {
			delete(o.Legacy["spec"].(map[string]any)["security"].(map[string]any), "enableAuth")
		}, auth: "etcd (spec.security.enableAuth is off: it was turned on by hand)"},
		"none": {change: func(_ *testing.T, o *AenixObserved, _ *testpki.CA) {
			delete(o.Legacy["spec"].(map[string]any)["security"].(map[string]any), "enableAuth")
			o.Auth.Enabled = false
		}},
	} {
		t.Run(name, func(t *testing.T) {
			o, ca := aenixAuthObserved(t)
			tc.change(t, &o, ca)
			p := PlanAenix(o)
			got := strings.Join(p.Refusals, "\n")
			checkAuthPlan(t, got, p.Refusals, p.Auth, tc.refusal, tc.auth)
		})
	}
}

// Auth needs the client certificate: a cluster without client TLS cannot be reached as root.
func TestPlanAenixRefusesAuthWithoutAClientCertificate(t *testing.T) {
	o := aenixObserved()
	o.Legacy["spec"].(map[string]any)["security"] = map[string]any{"enableAuth": true}
	o.Auth = EtcdAuth{Known: true, Enabled: true}
	p := PlanAenix(o)
	if !strings.Contains(strings.Join(p.Refusals, "\n"), "it is reached with the client certificate of spec.security.tls.clientSecret") {
		t.Errorf("refusals %q", p.Refusals)
	}
}

// cozystackAuthObserved is observedTLS with spec.auth naming Secret cz-root and etcd having
// authentication on, accepting that Secret's password.
func cozystackAuthObserved(t *testing.T) Observed {
	o := observedTLS(t)
	o.Cluster.Spec.Auth = &etcdv1.AuthSpec{Enabled: true, RootCredentialsSecretRef: &corev1.LocalObjectReference{Name: "cz-root"}}
	o.Auth = EtcdAuth{Known: true, Enabled: true}
	return o
}

// A Cozystack cluster with auth keeps spec.auth as it is: this operator reads root's
// password from the same Secret, so there is nothing to change; the dry run says so.
func TestPlanCozystackTakesOverAuthWithTheSameSecret(t *testing.T) {
	p := PlanCozystack(cozystackAuthObserved(t))
	if len(p.Refusals) != 0 || len(p.Members) != 2 {
		t.Fatalf("plan %+v", p)
	}
	out := p.Describe()
	for _, want := range []string{"authentication: on, and it stays on: nothing changes in etcd", "the one in Secret cz-root (spec.auth.rootCredentialsSecretRef, unchanged)",
		"records it as applied (Secret cz-root-applied)"} {
		if !strings.Contains(out, want) {
			t.Errorf("describe lacks %q:\n%s", want, out)
		}
	}
}

func TestPlanCozystackAuth(t *testing.T) {
	for name, tc := range map[string]struct {
		change        func(o *Observed)
		refusal, auth string
	}{
		"not read":    {change: func(o *Observed) { o.Auth = EtcdAuth{} }, refusal: "whether etcd has authentication on could not be read"},
		"off in etcd": {change: func(o *Observed) { o.Auth.Enabled = false }, refusal: "spec.auth is enabled but etcd has authentication off: Cozystack's operator has not finished"},
		"secret problem": {change: func(o *Observed) {
			o.Auth.CredentialsProblem = "Secret cz-root, named by spec.auth.rootCredentialsSecretRef, does not exist"
		}, refusal: "Secret cz-root, named by spec.auth.rootCredentialsSecretRef, does not exist"},
		"not root": {change: func(o *Observed) { o.Auth.RootErr = "etcdserver: permission denied" },
			refusal: "etcd refused a request only root may make (listing its users) when logged in as root with the password of Secret cz-root"},
		"on by hand without spec.auth, not root": {change: func(o *Observed) {
			o.Cluster.Spec.Auth = nil
			o.Auth.RootErr = "etcdserver: user name is empty"
		}, refusal: "etcd has authentication on but spec.auth is not set"},
		"on by hand without spec.auth, root by certificate": {change: func(o *Observed) { o.Cluster.Spec.Auth = nil },
			auth: "on in etcd though spec.auth is not set"},
		"none": {change: func(o *Observed) {
			o.Cluster.Spec.Auth = nil
			o.Auth.Enabled = false
		}},
	} {
		t.Run(name, func(t *testing.T) {
			o := cozystackAuthObserved(t)
			tc.change(&o)
			p := PlanCozystack(o)
			got := strings.Join(p.Refusals, "\n")
			checkAuthPlan(t, got, p.Refusals, p.Auth, tc.refusal, tc.auth)
		})
	}
}

// checkAuthPlan: the refusals (got, joined) contain wantRefusal, or, when none is wanted, there
// are none and the plan's authentication line contains wantAuth (nothing without auth).
func checkAuthPlan(t *testing.T, got string, refusals []string, auth, wantRefusal, wantAuth string) {
	t.Helper()
	switch {
	case wantRefusal != "" && !strings.Contains(got, wantRefusal):
		t.Errorf("refusals %q, want one containing %q", refusals, wantRefusal)
	case wantRefusal == "" && got != "":
		t.Errorf("refusals %q, want none", refusals)
	case wantRefusal == "" && !strings.Contains(auth, wantAuth):
		t.Errorf("auth %q, want it to contain %q", auth, wantAuth)
	case wantRefusal == "" && wantAuth == "" && auth != "":
		t.Errorf("auth %q, want nothing said without auth", auth)
	}
}
