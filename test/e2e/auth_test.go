package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

// The journey's cluster with authentication (docs/tls-journey.md, step 5, in a namespace of
// its own with step 1's CA, as the journey says): root's password
// from the Secret is the only way in; a changed Secret changes it; scaling and a pause with
// resume work with TLS and auth on and keep the members' identities.
func TestAuthRootPasswordScaleAndPause(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	journeyCA(t, ns)
	applyJourney(t, ns, "etcd-cluster-auth.yaml")
	waitSettled(t, ns, journeyCluster, 3, 5*time.Minute)
	waitAuthEnabled(t, ns)
	if out := kubectl(t, ns, "get", "etcd", journeyCluster, "-o", "jsonpath={.status.authEnabled}"); out != "true" {
		t.Fatalf("status.authEnabled is %q", out)
	}
	password := string(getSecret(t, ns, "secure-root").Data["password"])
	certOnly := access{TLS: secretTLS(t, journeyAppClient(t, ns), clientServiceHost(ns, journeyCluster))}
	checkOnlyPasswordLetsIn(t, ns, certOnly, password)

	member := journeyCluster + "-1" // the member the journey's commands exec into
	if out := guideEtcdctl(t, ns, journeyCluster, member, "--user", "root:"+password, "put", "greeting", "hello"); strings.TrimSpace(out) != "OK" {
		t.Fatalf("etcdctl put as root in %s: %q", member, out)
	}
	// etcdctl in a member presents the server certificate, whose common name is no user.
	if out, err := runKubectl(ns, "", guideEtcdctlArgs(ns, journeyCluster, member, "put", "greeting", "hello")...); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("etcdctl put without a user in %s: %v %q; want permission denied", member, err, out)
	}

	const newPassword = "another-long-random-string"
	kubectl(t, ns, "patch", "secret", "secure-root", "-p", `{"stringData":{"password":"`+newPassword+`"}}`)
	eventually(t, 2*time.Minute, "the new password accepted", func() error {
		return tryPut(ns, journeyCluster, root(certOnly, newPassword))
	})
	checkOnlyPasswordLetsIn(t, ns, certOnly, newPassword)
	if err := tryPut(ns, journeyCluster, root(certOnly, password)); !isAuthFailed(err) {
		t.Fatalf("the old password after the change: %v; want authentication failed", err)
	}

	scaleAndPauseWithAuth(t, ns, root(certOnly, newPassword))
}

// scaleAndPauseWithAuth scales 3 -> 4 -> 3, pauses and resumes with kubectl scale while a
// client logged in as root writes; the resumed members are the ones that were paused.
func scaleAndPauseWithAuth(t *testing.T, ns string, asRoot access) {
	t.Helper()
	w := startWriterWith(t, ns, journeyCluster, "auth", asRoot)
	scale := func(n int) {
		kubectl(t, ns, "scale", "etcd/"+journeyCluster, fmt.Sprintf("--replicas=%d", n))
	}
	for _, n := range []int{4, 3} {
		scale(n)
		waitSettled(t, ns, journeyCluster, int32(n), 5*time.Minute)
		checkMembershipWith(t, ns, journeyCluster, n, asRoot)
	}
	before := memberIDs(getCluster(t, ns, journeyCluster))
	scale(0)
	waitPaused(t, ns, journeyCluster, 3)
	scale(3)
	after := memberIDs(waitSettled(t, ns, journeyCluster, 3, 5*time.Minute))
	if fmt.Sprint(sorted(after)) != fmt.Sprint(sorted(before)) {
		t.Fatalf("member IDs changed across the pause: %v, then %v", before, after)
	}
	checkMembershipWith(t, ns, journeyCluster, 3, asRoot)
	w.stopAndVerify(t, 20)
}

func waitAuthEnabled(t *testing.T, ns string) {
	t.Helper()
	waitAuthEnabledOf(t, ns, journeyCluster)
}

func waitAuthEnabledOf(t *testing.T, ns, cluster string) {
	t.Helper()
	eventually(t, 3*time.Minute, "authentication enabled", func() error {
		c := getCluster(t, ns, cluster)
		cond := meta.FindStatusCondition(c.Status.Conditions, etcdv1.ConditionAuthReady)
		if !c.Status.AuthEnabled || cond == nil || cond.Status != "True" {
			return fmt.Errorf("authEnabled %v, AuthReady %+v", c.Status.AuthEnabled, cond)
		}
		return nil
	})
}

// checkOnlyPasswordLetsIn is checkOnlyPasswordLetsInto the journey's cluster.
func checkOnlyPasswordLetsIn(t *testing.T, ns string, certOnly access, password string) {
	t.Helper()
	checkOnlyPasswordLetsInto(t, ns, journeyCluster, certOnly, password)
}

// checkOnlyPasswordLetsInto asserts that a client with a certificate from the CA can write as
// root with password, and cannot without a password or with a wrong one.
func checkOnlyPasswordLetsInto(t *testing.T, ns, cluster string, certOnly access, password string) {
	t.Helper()
	// With --client-cert-auth etcd takes the certificate's common name ("app") as the user
	// when there is no password login; app has no permissions.
	if err := tryPut(ns, cluster, certOnly); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("a client without credentials: %v; want permission denied", err)
	}
	if err := tryPut(ns, cluster, root(certOnly, password+"-wrong")); !isAuthFailed(err) {
		t.Fatalf("a wrong password: %v; want authentication failed", err)
	}
	if err := tryPut(ns, cluster, root(certOnly, password)); err != nil {
		t.Fatalf("root with the password from the Secret: %v", err)
	}
}

func root(a access, password string) access {
	a.Username, a.Password = "root", password
	return a
}

func isAuthFailed(err error) bool {
	return err != nil && strings.Contains(err.Error(), "authentication failed")
}
