package aenixfixture

import (
	"context"
	"errors"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// WithAuth sets spec.security.enableAuth on a legacy EtcdCluster that WithTLS secured (the
// legacy operator requires its client and server Secrets for auth).
func WithAuth(legacy map[string]any) {
	legacy["spec"].(map[string]any)["security"].(map[string]any)["enableAuth"] = true
}

// EnableAuth turns authentication on as the legacy operator's configureAuth does, through a
// client that presents the legacy client certificate (common name root): the role root, the
// user root without a password (etcd then takes it only from a client certificate of that
// common name), root granted the role root, then auth enable. Each step is skipped when done,
// as there.
func EnableAuth(ctx context.Context, cli *clientv3.Client) error {
	if _, err := cli.RoleGet(ctx, "root"); err != nil {
		if !errors.Is(err, rpctypes.ErrRoleNotFound) {
			return err
		}
		if _, err := cli.RoleAdd(ctx, "root"); err != nil {
			return err
		}
	}
	user, err := cli.UserGet(ctx, "root")
	switch {
	case errors.Is(err, rpctypes.ErrUserNotFound):
		if _, err := cli.UserAddWithOptions(ctx, "root", "", &clientv3.UserAddOptions{NoPassword: true}); err != nil {
			return err
		}
	case err != nil:
		return err
	}
	if user == nil || !contains(user.Roles, "root") {
		if _, err := cli.UserGrantRole(ctx, "root", "root"); err != nil {
			return err
		}
	}
	_, err = cli.AuthEnable(ctx)
	return err
}

// EnableAuthWithPassword turns authentication on as Cozystack's operator does (its
// reconcileAuth): user root with the password of spec.auth.rootCredentialsSecretRef, granted
// the role root, then auth enable.
func EnableAuthWithPassword(ctx context.Context, cli *clientv3.Client, password string) error {
	if _, err := cli.UserAdd(ctx, "root", password); err != nil && !errors.Is(err, rpctypes.ErrUserAlreadyExist) {
		return err
	}
	if _, err := cli.UserGrantRole(ctx, "root", "root"); err != nil {
		return err
	}
	_, err := cli.AuthEnable(ctx)
	return err
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
