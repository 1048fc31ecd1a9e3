package etcd

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestAuthOverMutualTLS runs the operator's auth flow against a real etcd that requires
// client certificates: root is created and granted, auth enabled, wrong passwords are
// refused, and a password change takes effect for new logins.
func TestAuthOverMutualTLS(t *testing.T) {
	t.Parallel()
	forEachRelease(t, testAuthOverMutualTLS)
}

func testAuthOverMutualTLS(t *testing.T, r release) {
	pki := newTestPKI(t)
	proc := newMemberSpecOn(t, r, "auth0", "https",
		"--cert-file", pki.serverCert, "--key-file", pki.serverKey,
		"--trusted-ca-file", pki.caCert, "--client-cert-auth")
	proc.start(t, initialCluster([]*etcdMember{proc}), "new", "token-"+t.Name())
	ctx := t.Context()

	cfg := Config{Endpoints: []string{proc.clientURL}, TLS: pki.clientTLS(t, true)}
	anon := newTestClient(t, cfg)
	waitForLeader(t, anon, proc.clientURL)
	enableRootAuth(t, anon, "first-password")

	checkWithoutLogin(t, anon, r, proc.clientURL)

	expectLoginRefused(t, cfg, "wrong-password")
	root := login(t, cfg, "first-password")
	if on, err := root.AuthStatus(shortContext(t)); err != nil || !on {
		t.Fatalf("AuthStatus after enabling = %v, %v", on, err)
	}
	if _, members, err := root.MemberList(shortContext(t)); err != nil || len(members) != 1 {
		t.Fatalf("MemberList as root: %v %v", members, err)
	}
	if err := root.Healthy(ctx, proc.clientURL); err != nil {
		t.Fatalf("Healthy as root: %v", err)
	}
	if err := root.Authenticate(shortContext(t), RootUser, "wrong-password"); !errors.Is(err, ErrAuthFailed) {
		t.Fatalf("Authenticate with a wrong password: %v", err)
	}
	if err := root.Authenticate(shortContext(t), RootUser, "first-password"); err != nil {
		t.Fatalf("Authenticate with the right password: %v", err)
	}

	if err := root.UserChangePassword(shortContext(t), RootUser, "second-password"); err != nil {
		t.Fatal(err)
	}
	expectLoginRefused(t, cfg, "first-password")
	again := login(t, cfg, "second-password")
	if err := again.AuthEnable(shortContext(t)); err != nil {
		t.Fatalf("AuthEnable when enabled must be a no-op: %v", err)
	}
}

// enableRootAuth is the operator's sequence: root with its role, then the switch.
func enableRootAuth(t *testing.T, c Client, password string) {
	t.Helper()
	if on, err := c.AuthStatus(shortContext(t)); err != nil || on {
		t.Fatalf("AuthStatus of a new cluster = %v, %v", on, err)
	}
	if err := c.AuthEnable(shortContext(t)); !errors.Is(err, ErrRootUserNotExist) {
		t.Fatalf("AuthEnable without root: %v, want ErrRootUserNotExist", err)
	}
	if err := c.UserAdd(shortContext(t), RootUser, password); err != nil {
		t.Fatal(err)
	}
	if err := c.UserAdd(shortContext(t), RootUser, password); !errors.Is(err, ErrUserExists) {
		t.Fatalf("second UserAdd: %v, want ErrUserExists", err)
	}
	if err := c.AuthEnable(shortContext(t)); !errors.Is(err, ErrRootRoleNotExist) {
		t.Fatalf("AuthEnable before the grant: %v, want ErrRootRoleNotExist", err)
	}
	if err := c.UserChangePassword(shortContext(t), "nobody", "x"); !errors.Is(err, ErrUserNotFound) {
		t.Fatalf("UserChangePassword of an unknown user: %v", err)
	}
	if err := c.Authenticate(shortContext(t), RootUser, password); !errors.Is(err, ErrAuthNotEnabled) {
		t.Fatalf("Authenticate while auth is off: %v, want ErrAuthNotEnabled", err)
	}
	for range 2 { // the second grant is a no-op
		if err := c.UserGrantRole(shortContext(t), RootUser, RootRole); err != nil {
			t.Fatal(err)
		}
	}
	expectOnlyRoot(t, c)
	if err := c.AuthEnable(shortContext(t)); err != nil {
		t.Fatal(err)
	}
}

// expectOnlyRoot checks UserList and RoleList against a cluster where only root exists.
func expectOnlyRoot(t *testing.T, c Client) {
	t.Helper()
	users, uerr := c.UserList(shortContext(t))
	roles, rerr := c.RoleList(shortContext(t))
	if uerr != nil || rerr != nil || !slices.Equal(users, []string{RootUser}) || slices.ContainsFunc(roles, func(r string) bool { return r != RootRole }) {
		t.Fatalf("users %v (%v), roles %v (%v); want root only", users, uerr, roles, rerr)
	}
}

func login(t *testing.T, cfg Config, password string) Client {
	t.Helper()
	cfg.Username, cfg.Password = RootUser, password
	return newTestClient(t, cfg)
}

func expectLoginRefused(t *testing.T, cfg Config, password string) {
	t.Helper()
	cfg.Username, cfg.Password, cfg.DialTimeout = RootUser, password, 3*time.Second
	c, err := New(cfg)
	if err == nil {
		_ = c.Close()
		t.Fatal("New with a wrong password succeeded")
	}
	if !errors.Is(err, ErrAuthFailed) {
		t.Fatalf("New with a wrong password: %v, want ErrAuthFailed", err)
	}
	if strings.Contains(err.Error(), password) {
		t.Fatalf("the error shows the password: %v", err)
	}
}

// TestCredentialsAreIgnoredWhileAuthIsOff is what lets the operator pass root's credentials
// before it has enabled authentication.
func TestCredentialsAreIgnoredWhileAuthIsOff(t *testing.T) {
	t.Parallel()
	cluster := startStaticCluster(t, 1)
	c := login(t, Config{Endpoints: endpointsOf(cluster)}, "not-set-yet")
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	if _, _, err := c.MemberList(ctx); err != nil {
		t.Fatalf("MemberList with credentials while auth is off: %v", err)
	}
}

// checkWithoutLogin checks what etcd r answers, with auth on, a client that has not logged in
// and whose certificate's common name ("client") names no user.
func checkWithoutLogin(t *testing.T, anon Client, r release, endpoint string) {
	t.Helper()
	// Without a password login, etcd takes the client certificate's common name ("client")
	// for the user name, and there is no such user: the user API is closed.
	if err := anon.UserChangePassword(shortContext(t), RootUser, "x"); !errors.Is(err, ErrUserNotFound) {
		t.Fatalf("UserChangePassword without login: %v, want ErrUserNotFound (common name is no user)", err)
	}
	// Before 3.7 only root may ask whether auth is on; 3.7 answers anyone.
	if on, err := anon.AuthStatus(shortContext(t)); r.version.AuthStatusNeedsRoot() && !errors.Is(err, ErrUserNotFound) {
		t.Fatalf("AuthStatus without login on %s: %v, %v; want ErrUserNotFound", r.version, on, err)
	} else if !r.version.AuthStatusNeedsRoot() && (err != nil || !on) {
		t.Fatalf("AuthStatus without login on %s: %v, %v; want enabled", r.version, on, err)
	}
	// 3.6.0 to 3.6.11 answer a status to root only; the others to any user a request
	// authenticates as, a common name that names no user included.
	if _, err := anon.Status(shortContext(t), endpoint); r.version.StatusNeedsRoot() && !errors.Is(err, ErrUserNotFound) {
		t.Fatalf("Status without login on %s: %v; want ErrUserNotFound", r.version, err)
	} else if !r.version.StatusNeedsRoot() && err != nil {
		t.Fatalf("Status without login on %s: %v", r.version, err)
	}
}

// TestLoginWhileAuthOffIsReported is what made the takeover of a Cozystack cluster with auth
// fail: the operator's client logged in with root's password while etcd still had
// authentication off (clientv3 then goes on without a token), and kept it after the legacy
// operator turned authentication on. Over mutual TLS etcd takes such a tokenless request for
// the certificate's common name, which names no user: "user name not found", and clientv3,
// which logs in again only on ErrUserEmpty, never does. The client says so
// (LoggedInWhileAuthOff), so that it is not kept; a new one logs in.
func TestLoginWhileAuthOffIsReported(t *testing.T) {
	t.Parallel()
	r := newestRelease(t)
	pki := newTestPKI(t)
	proc := newMemberSpecOn(t, r, "login0", "https",
		"--cert-file", pki.serverCert, "--key-file", pki.serverKey,
		"--trusted-ca-file", pki.caCert, "--client-cert-auth")
	proc.start(t, initialCluster([]*etcdMember{proc}), "new", "token-"+t.Name())
	cfg := Config{Endpoints: []string{proc.clientURL}, TLS: pki.clientTLS(t, true)}
	anon := newTestClient(t, cfg)
	waitForLeader(t, anon, proc.clientURL)
	if LoggedInWhileAuthOff(anon) {
		t.Fatal("a client without credentials reports a login while auth was off")
	}

	early := login(t, cfg, "root-password")
	if !LoggedInWhileAuthOff(early) {
		t.Fatal("a client that logged in while auth was off does not say so")
	}
	// Another client turns auth on, as the legacy operator did.
	enableRootAuth(t, anon, "root-password")
	if _, err := early.UserList(shortContext(t)); !errors.Is(err, ErrUserNotFound) {
		t.Fatalf("UserList through the client made while auth was off: %v; want ErrUserNotFound (clientv3 did not log in again)", err)
	}
	if !LoggedInWhileAuthOff(early) {
		t.Fatal("the client made while auth was off no longer says so, yet it has no token")
	}

	late := login(t, cfg, "root-password")
	if LoggedInWhileAuthOff(late) {
		t.Fatal("a client that logged in with auth on says it logged in while auth was off")
	}
	if users, err := late.UserList(shortContext(t)); err != nil || !slices.Equal(users, []string{RootUser}) {
		t.Fatalf("UserList through a client made with auth on: %v, %v", users, err)
	}
	// Checking another password does not change what the client says of its own login.
	if err := late.Authenticate(shortContext(t), RootUser, "wrong"); !errors.Is(err, ErrAuthFailed) {
		t.Fatalf("Authenticate with a wrong password: %v", err)
	}
	if LoggedInWhileAuthOff(late) {
		t.Fatal("checking a password changed what the client says of its own login")
	}
}

// TestPromoteAsRootByCertificateThroughAFollower is the aenix takeover's stalled scale-out: the
// legacy operator's root has no password and is the common name of a client certificate. A
// follower forwards a promotion to the leader with the caller's token only, so the leader took
// this root for no user and the follower answered "request timed out" after etcd's request
// timeout, at every attempt that did not reach the leader directly. Promote asks the leader.
func TestPromoteAsRootByCertificateThroughAFollower(t *testing.T) {
	t.Parallel()
	r := newestRelease(t)
	pki := newTestPKI(t)
	tlsArgs := []string{"--cert-file", pki.serverCert, "--key-file", pki.serverKey, "--trusted-ca-file", pki.caCert, "--client-cert-auth"}
	cluster := make([]*etcdMember, 3)
	for i := range cluster {
		cluster[i] = newMemberSpecOn(t, r, fmt.Sprintf("c%d", i), "https", tlsArgs...)
	}
	for _, m := range cluster {
		m.start(t, initialCluster(cluster), "new", "token-"+t.Name())
	}
	asRoot := pki.clientTLSWith(t, pki.rootCert, pki.rootKey)
	all := newTestClient(t, Config{Endpoints: endpointsOf(cluster), TLS: asRoot})
	var leader Status
	for _, m := range cluster {
		leader = waitForLeader(t, all, m.clientURL)
	}
	enableRootAuth(t, all, "unused-password")

	// Root by its certificate, through a follower alone.
	viaFollower := newTestClient(t, Config{Endpoints: []string{endpointOfMember(t, all, cluster, leader.Leader)}, TLS: asRoot})
	if users, err := viaFollower.UserList(shortContext(t)); err != nil || !slices.Equal(users, []string{RootUser}) {
		t.Fatalf("UserList as root by certificate: %v, %v", users, err)
	}
	joiner := newMemberSpecOn(t, r, "c3", "https", tlsArgs...)
	learner := addLearner(t, viaFollower, joiner.peerURL)
	startJoiningMember(t, joiner, cluster)
	promoteWhenReady(t, viaFollower, learner.ID, "")
	checkAllVoters(t, all, 4)
}
