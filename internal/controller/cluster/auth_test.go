package cluster

import (
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
	"github.com/quorumkeeper/etcd-operator/internal/testpki"
)

const (
	firstPassword  = "first-Pa55word"
	secondPassword = "second-Pa55word"
)

// authHarness is a cluster with client and peer TLS from user Secrets and auth from Secret
// "root", all in place.
func authHarness(t *testing.T, rootData map[string][]byte) *secureHarness {
	t.Helper()
	ca := testpki.NewCA(t)
	objs := []corev1.Secret{
		*secret("server", tlsData(t, ca, "server")), *secret("operator", tlsData(t, ca, "operator")), *secret("peer", tlsData(t, ca, "peer")),
	}
	h := newSecureHarness(t, false, func(c *etcdv1.EtcdCluster) {
		userSecretsSpec(c)
		c.Spec.Auth = &etcdv1.AuthSpec{Enabled: true, RootCredentialsSecretRef: &corev1.LocalObjectReference{Name: "root"}}
	}, &objs[0], &objs[1], &objs[2])
	if rootData != nil {
		h.create(secret("root", rootData))
	}
	return h
}

// runningWithAuth is a bootstrapped cluster on which the operator has enabled auth.
func runningWithAuth(t *testing.T) *secureHarness {
	t.Helper()
	h := authHarness(t, map[string][]byte{"password": []byte(firstPassword)})
	h.reconcile()
	h.running() // the reconcile in here finds the cluster up and enables auth
	if !h.etcd.AuthEnabled() {
		t.Fatalf("auth not enabled on a running cluster; calls %v", h.etcd.Calls())
	}
	h.events()
	return h
}

func TestAuthEnabledOnceTheClusterIsUp(t *testing.T) {
	h := authHarness(t, map[string][]byte{"username": []byte("root"), "password": []byte(firstPassword)})
	h.reconcile() // bootstrap: members created, nothing to talk to yet
	if h.etcd.AuthEnabled() || len(h.members()) != 3 {
		t.Fatalf("auth %v with %d members", h.etcd.AuthEnabled(), len(h.members()))
	}
	c := h.clusterObj()
	for _, m := range h.members() {
		h.etcd.SeedMember(m.Name, specs.PeerURL(c, m.Name), specs.ClientURL(c, m.Name))
	}
	h.reconcile()
	got := append(h.etcd.CallsTo("UserAdd"), append(h.etcd.CallsTo("UserGrantRole"), h.etcd.CallsTo("AuthEnable")...)...)
	if want := []string{"UserAdd(root)", "UserGrantRole(root,root)", "AuthEnable()"}; !slices.Equal(got, want) {
		t.Fatalf("auth calls %q, want %q", got, want)
	}
	if h.etcd.Password("root") != firstPassword || string(h.secret("db-root-applied").Data["password"]) != firstPassword {
		t.Fatal("etcd and the applied-password Secret must both hold the Secret's password")
	}
	if !metav1.IsControlledBy(h.secret("db-root-applied"), h.clusterObj()) {
		t.Fatal("the applied-password Secret must belong to the cluster")
	}
	if !h.clusterObj().Status.AuthEnabled {
		t.Fatal("status.authEnabled not set")
	}
	h.expectCondition(etcdv1.ConditionAuthReady, metav1.ConditionTrue, etcdv1.ReasonAuthEnabled, "Secret root")

	// At rest: logged in as root, no more auth changes, no writes.
	h.etcd.ResetCalls()
	h.reconcile()
	before := h.clusterObj().ResourceVersion
	h.reconcile()
	if after := h.clusterObj().ResourceVersion; after != before {
		t.Fatalf("a cluster at rest was written: %s -> %s", before, after)
	}
	for _, m := range []string{"UserAdd", "UserChangePassword", "AuthEnable"} {
		if calls := h.etcd.CallsTo(m); len(calls) != 0 {
			t.Fatalf("%s called again at rest: %v", m, calls)
		}
	}
	if cfg := h.lastOpened(); cfg.Username != "root" || cfg.Password != firstPassword {
		t.Fatalf("the operator's client logs in as %q", cfg.Username)
	}
	checkNoPasswordIn(t, h, firstPassword)
}

// Auth goes on as soon as a quorum of voters is healthy, not when every member is: one
// member that never starts must not keep the cluster serving without auth. Until then the
// client Service selects no Pod.
func TestAuthIsEnabledOnceAQuorumIsHealthy(t *testing.T) {
	h := authHarness(t, map[string][]byte{"password": []byte(firstPassword)})
	h.reconcile()
	c := h.clusterObj()
	var ids []uint64
	for _, m := range h.members() {
		ids = append(ids, h.etcd.SeedMember(m.Name, specs.PeerURL(c, m.Name), specs.ClientURL(c, m.Name)).ID)
	}
	h.etcd.SetDown(ids[1], true)
	h.etcd.SetDown(ids[2], true) // 1 of 3 voters: no quorum
	h.reconcile()
	if h.etcd.AuthEnabled() || len(h.etcd.CallsTo("UserAdd")) != 0 {
		t.Fatalf("auth touched without a quorum: %v", h.etcd.Calls())
	}
	if sel := h.clientServiceSelector(); sel[etcdv1.LabelMember] != "" || len(sel) != len(specs.ClusterLabels("db"))+1 {
		t.Fatalf("client Service selects %v before auth is on; want no member Pod", sel)
	}

	h.etcd.SetDown(ids[1], false) // 2 of 3: a quorum, the third still down
	h.reconcile()
	if !h.etcd.AuthEnabled() {
		t.Fatalf("auth not enabled with a healthy quorum; calls %v", h.etcd.Calls())
	}
	h.reconcile()
	if sel := h.clientServiceSelector(); len(sel) != len(specs.ClusterLabels("db")) {
		t.Fatalf("client Service selects %v once auth is on; want the cluster's members", sel)
	}
}

func (h *secureHarness) clientServiceSelector() map[string]string {
	h.t.Helper()
	svc := &corev1.Service{}
	if err := h.api.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "db-client"}, svc); err != nil {
		h.t.Fatal(err)
	}
	return svc.Spec.Selector
}

func TestAuthGateKeepsMembersBackWithoutAPassword(t *testing.T) {
	h := authHarness(t, nil)
	h.reconcile()
	if n := len(h.members()); n != 0 {
		t.Fatalf("%d members created while root's password is unknown", n)
	}
	h.expectCondition(etcdv1.ConditionAuthReady, metav1.ConditionFalse, etcdv1.ReasonSecretMissing, "Secret root, named by spec.auth.rootCredentialsSecretRef, does not exist")
	if ev := h.events(); !slices.ContainsFunc(ev, func(e string) bool { return strings.HasPrefix(e, "Warning SecretMissing Secret root") }) {
		t.Fatalf("events %q, want a warning about Secret root", ev)
	}

	h.create(secret("root", map[string][]byte{"username": []byte("admin"), "password": []byte(firstPassword)}))
	h.reconcile()
	h.expectCondition(etcdv1.ConditionAuthReady, metav1.ConditionFalse, etcdv1.ReasonInvalidUsername, `username "admin"`)

	h.setSecretData("root", map[string][]byte{"pass": []byte(firstPassword)})
	h.reconcile()
	h.expectCondition(etcdv1.ConditionAuthReady, metav1.ConditionFalse, etcdv1.ReasonSecretKeyMissing, `no key "password"`)

	h.setSecretData("root", map[string][]byte{"password": []byte(firstPassword)})
	h.reconcile()
	if n := len(h.members()); n != 3 {
		t.Fatalf("%d members once the password is readable", n)
	}
	checkNoPasswordIn(t, h, firstPassword)
}

func TestPasswordChangeInTheSecretIsApplied(t *testing.T) {
	h := runningWithAuth(t)
	h.etcd.ResetCalls()
	h.setSecretData("root", map[string][]byte{"password": []byte(secondPassword)})
	h.reconcile()
	if calls := h.etcd.CallsTo("UserChangePassword"); !slices.Equal(calls, []string{"UserChangePassword(root)"}) {
		t.Fatalf("UserChangePassword calls %q", calls)
	}
	if h.etcd.Password("root") != secondPassword || string(h.secret("db-root-applied").Data["password"]) != secondPassword {
		t.Fatal("the new password is not in etcd and in the applied-password Secret")
	}
	if ev := h.events(); !slices.ContainsFunc(ev, func(e string) bool { return strings.Contains(e, "RootPasswordChanged") }) {
		t.Fatalf("events %q, want RootPasswordChanged", ev)
	}
	h.reconcile()
	if n := len(h.etcd.CallsTo("UserChangePassword")); n != 1 {
		t.Fatalf("password changed %d times", n)
	}
	if cfg := h.lastOpened(); cfg.Password != secondPassword {
		t.Fatal("the operator does not log in with the new password")
	}
	checkNoPasswordIn(t, h, firstPassword, secondPassword)
}

// TestCrashBetweenPasswordChangeAndRecord: etcd has the new password, the applied Secret the
// old one. The factory falls back to the Secret's password and the operator only records it.
func TestCrashBetweenPasswordChangeAndRecord(t *testing.T) {
	h := runningWithAuth(t)
	h.etcd.SetPassword("root", secondPassword)
	h.setSecretData("root", map[string][]byte{"password": []byte(secondPassword)})
	h.etcd.ResetCalls()
	h.reconcile()
	if calls := h.etcd.CallsTo("UserChangePassword"); len(calls) != 0 {
		t.Fatalf("changed again: %q", calls)
	}
	if got := string(h.secret("db-root-applied").Data["password"]); got != secondPassword {
		t.Fatal("the password etcd accepts was not recorded")
	}
	if !slices.Equal(h.etcd.CallsTo("Login"), []string{"Login(root)", "Login(root)"}) {
		t.Fatalf("logins %q: want the applied password refused, then the Secret's", h.etcd.CallsTo("Login"))
	}
	h.expectCondition(etcdv1.ConditionAuthReady, metav1.ConditionTrue, etcdv1.ReasonAuthEnabled, "")
}

func TestPasswordChangedBehindTheOperatorsBack(t *testing.T) {
	h := runningWithAuth(t)
	h.etcd.SetPassword("root", "set-with-etcdctl")
	h.reconcile()
	h.expectCondition(etcdv1.ConditionAuthReady, metav1.ConditionFalse, etcdv1.ReasonAuthFailed, "set the Secret's password to root's current password")
	h.setSecretData("root", map[string][]byte{"password": []byte("set-with-etcdctl")})
	h.reconcile()
	h.expectCondition(etcdv1.ConditionAuthReady, metav1.ConditionTrue, etcdv1.ReasonAuthEnabled, "")
	if got := string(h.secret("db-root-applied").Data["password"]); got != "set-with-etcdctl" {
		t.Fatal("the recovered password was not recorded")
	}
	checkNoPasswordIn(t, h, firstPassword, "set-with-etcdctl")
}

// checkNoPasswordIn fails if a password shows in events, conditions or etcd's call record.
func checkNoPasswordIn(t *testing.T, h *secureHarness, passwords ...string) {
	t.Helper()
	var seen []string
	seen = append(seen, h.events()...)
	seen = append(seen, h.etcd.Calls()...)
	for _, cond := range h.clusterObj().Status.Conditions {
		seen = append(seen, cond.Message)
	}
	for _, s := range seen {
		for _, p := range passwords {
			if strings.Contains(s, p) {
				t.Fatalf("a password shows in %q", s)
			}
		}
	}
}

// Users and roles the operator did not make (here, before auth was on) are named in AuthReady
// and a Warning event, and left alone.
func TestUsersAndRolesTheOperatorDidNotCreateAreReported(t *testing.T) {
	h := authHarness(t, map[string][]byte{"password": []byte(firstPassword)})
	h.etcd.SeedUser("app", "app-Pa55word", "writer")
	h.etcd.SeedRole("writer")
	h.reconcile()
	h.running()
	h.reconcile()
	h.expectCondition(etcdv1.ConditionAuthReady, metav1.ConditionTrue, etcdv1.ReasonAuthEnabled, "users the operator did not create: [app], roles: [writer]")
	if ev := strings.Join(h.events(), "\n"); !strings.Contains(ev, "Warning "+etcdv1.ReasonUnmanagedUsersOrRoles) {
		t.Fatalf("no %s warning among events:\n%s", etcdv1.ReasonUnmanagedUsersOrRoles, ev)
	}
	if h.etcd.Password("app") != "app-Pa55word" {
		t.Fatal("the operator changed a user it did not create")
	}
	h.reconcile()
	if ev := h.events(); len(ev) != 0 {
		t.Fatalf("the same users were announced again: %q", ev)
	}
}

// Until auth is on, members take writes from anyone who reaches them: the NetworkPolicy that
// admits the operator alone to 2379 is there before the first member, and goes once auth is
// on (the cluster has no spec.networkPolicy).
func TestOnlyTheOperatorReachesMembersBeforeAuthIsOn(t *testing.T) {
	h := authHarness(t, map[string][]byte{"password": []byte(firstPassword)})
	h.r.OperatorNamespace = "ops"
	h.reconcile()
	if len(h.members()) != 3 {
		t.Fatalf("%d members bootstrapped", len(h.members()))
	}
	np := &networkingv1.NetworkPolicy{}
	if err := h.api.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "db"}, np); err != nil {
		t.Fatalf("no NetworkPolicy while auth is pending: %v", err)
	}
	for _, rule := range np.Spec.Ingress {
		if rule.Ports[0].Port.IntVal != specs.ClientPort {
			continue
		}
		if len(rule.From) != 1 || rule.From[0].PodSelector.MatchLabels[etcdv1.LabelName] != specs.ManagerName {
			t.Fatalf("2379 admits %+v before auth is on; want the operator alone", rule.From)
		}
	}
	c := h.clusterObj()
	for _, m := range h.members() {
		h.etcd.SeedMember(m.Name, specs.PeerURL(c, m.Name), specs.ClientURL(c, m.Name))
	}
	h.reconcile()
	if !h.etcd.AuthEnabled() {
		t.Fatalf("auth not enabled; calls %v", h.etcd.Calls())
	}
	h.reconcile()
	if err := h.api.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "db"}, np); !apierrors.IsNotFound(err) {
		t.Fatalf("the NetworkPolicy stays once auth is on: %v", err)
	}
}

// A NetworkPolicy of the cluster's name that is someone else's would leave the members open
// before auth is on: no member is created.
func TestNoMemberBeforeAuthWhileThePolicyCannotBeMade(t *testing.T) {
	h := authHarness(t, map[string][]byte{"password": []byte(firstPassword)})
	h.create(&networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns"}})
	h.reconcile()
	if n := len(h.members()); n != 0 {
		t.Fatalf("%d members created without the policy that keeps clients out until auth is on", n)
	}
}
