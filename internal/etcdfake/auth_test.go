package etcdfake

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/quorumkeeper/etcd-operator/internal/etcd"
)

func TestAuthEnableNeedsRootWithTheRootRole(t *testing.T) {
	f := threeVoters(t)
	ctx := t.Context()
	if err := f.AuthEnable(ctx); !errors.Is(err, etcd.ErrRootUserNotExist) {
		t.Fatalf("AuthEnable without root: %v", err)
	}
	if err := f.UserAdd(ctx, "root", "s3cret-1"); err != nil {
		t.Fatal(err)
	}
	if err := f.UserAdd(ctx, "root", "s3cret-1"); !errors.Is(err, etcd.ErrUserExists) {
		t.Fatalf("second UserAdd: %v", err)
	}
	if err := f.AuthEnable(ctx); !errors.Is(err, etcd.ErrRootRoleNotExist) {
		t.Fatalf("AuthEnable before the grant: %v", err)
	}
	if err := f.UserGrantRole(ctx, "root", "root"); err != nil {
		t.Fatal(err)
	}
	if err := f.Authenticate(ctx, "root", "s3cret-1"); !errors.Is(err, etcd.ErrAuthNotEnabled) {
		t.Fatalf("Authenticate while auth is off: %v", err)
	}
	if err := f.AuthEnable(ctx); err != nil || !f.AuthEnabled() {
		t.Fatalf("AuthEnable: %v", err)
	}
	if err := f.AuthEnable(ctx); err != nil {
		t.Fatalf("second AuthEnable must be a no-op: %v", err)
	}
	if on, err := f.AuthStatus(ctx); !on || err != nil {
		t.Fatalf("AuthStatus = %v, %v", on, err)
	}
}

// withRootAuth is a cluster with root (password s3cret-1) and auth enabled.
func withRootAuth(t *testing.T) *Cluster {
	t.Helper()
	f := threeVoters(t)
	for _, err := range []error{
		f.UserAdd(t.Context(), "root", "s3cret-1"), f.UserGrantRole(t.Context(), "root", "root"), f.AuthEnable(t.Context()),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	f.ResetCalls()
	return f
}

func TestAuthEnabledNeedsRootLogin(t *testing.T) {
	f := withRootAuth(t)
	ctx := t.Context()
	// Without credentials the user API is closed now; a wrong password logs nobody in.
	if err := f.UserChangePassword(ctx, "root", "x"); !errors.Is(err, etcd.ErrUserEmpty) {
		t.Fatalf("anonymous UserChangePassword: %v", err)
	}
	if _, err := f.Login("root", "wrong"); !errors.Is(err, etcd.ErrAuthFailed) {
		t.Fatalf("Login with a wrong password: %v", err)
	}
	if err := f.Authenticate(ctx, "root", "wrong"); !errors.Is(err, etcd.ErrAuthFailed) {
		t.Fatalf("Authenticate with a wrong password: %v", err)
	}
	root, err := f.Login("root", "s3cret-1")
	if err != nil {
		t.Fatal(err)
	}
	if err := root.UserChangePassword(ctx, "root", "s3cret-2"); err != nil {
		t.Fatal(err)
	}
	if f.Password("root") != "s3cret-2" {
		t.Fatal("password not changed")
	}
	if _, err := f.Login("root", "s3cret-1"); !errors.Is(err, etcd.ErrAuthFailed) {
		t.Fatalf("old password still logs in: %v", err)
	}
	if err := root.UserAdd(ctx, "app", "p"); err != nil {
		t.Fatal(err)
	}
	app, err := f.Login("app", "p")
	if err != nil {
		t.Fatal(err)
	}
	if err := app.UserGrantRole(ctx, "app", "root"); !errors.Is(err, etcd.ErrPermissionDenied) {
		t.Fatalf("a user without the root role granted itself root: %v", err)
	}
	if err := root.UserGrantRole(ctx, "app", "reader"); !errors.Is(err, etcd.ErrRoleNotFound) {
		t.Fatalf("grant of an unknown role: %v", err)
	}
	for _, call := range f.Calls() {
		if strings.Contains(call, "s3cret") {
			t.Fatalf("a password was recorded: %q", call)
		}
	}
	if got := f.CallsTo("UserChangePassword"); !slices.Equal(got, []string{"UserChangePassword(root)", "UserChangePassword(root)"}) { // the refused one and the change
		t.Fatalf("UserChangePassword calls %q", got)
	}
}

func TestLoginIgnoresCredentialsWhileAuthIsOff(t *testing.T) {
	f := threeVoters(t)
	c, err := f.Login("root", "anything")
	if err != nil {
		t.Fatalf("Login while auth is off: %v", err)
	}
	if err := c.UserAdd(t.Context(), "root", "p"); err != nil {
		t.Fatalf("UserAdd through the session: %v", err)
	}
	if err := c.Close(); err != nil || f.AuthEnabled() {
		t.Fatal("closing a session must leave the cluster as it was")
	}
	if _, _, err := f.MemberList(t.Context()); err != nil {
		t.Fatalf("the cluster after a session closed: %v", err)
	}
}
