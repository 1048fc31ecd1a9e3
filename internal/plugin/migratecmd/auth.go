package migratecmd

import (
	"context"
	"errors"
	"fmt"
	"time"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
	"github.com/quorumkeeper/etcd-operator/internal/etcdaccess"
	"github.com/quorumkeeper/etcd-operator/internal/plugin/cli"
	"github.com/quorumkeeper/etcd-operator/internal/plugin/migrate"
)

// observeAuth asks etcd, with the client e (connected and, where there is a password, logged
// in exactly as this operator will be), whether authentication is on and, if so, whether it
// takes e as root: listing the users is a request only root may make.
func observeAuth(ctx context.Context, e etcd.Client) migrate.EtcdAuth {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	on, err := e.AuthStatus(ctx)
	if err != nil {
		return migrate.EtcdAuth{}
	}
	a := migrate.EtcdAuth{Known: true, Enabled: on}
	if on {
		if _, err := e.UserList(ctx); err != nil {
			a.RootErr = err.Error()
		}
	}
	return a
}

// observeCozystackAuth is observeAuth through the session, and, when spec.auth is enabled,
// what is wrong with root's password Secret or that etcd refuses its password. The password
// is read and checked here and goes nowhere else.
func observeCozystackAuth(ctx context.Context, s *cli.Session) (migrate.EtcdAuth, error) {
	a := observeAuth(ctx, s.Etcd)
	c := s.Cluster
	if !etcdaccess.AuthWanted(c) {
		return a, nil
	}
	password, problem, err := etcdaccess.WantedPassword(ctx, s.Kube.Client, c)
	if err != nil {
		return a, cli.ExplainForbidden(err, "get secrets")
	}
	if problem != nil {
		a.CredentialsProblem = problem.Message
		return a, nil
	}
	if !a.Enabled {
		return a, nil
	}
	a.CredentialsProblem = checkRootPassword(ctx, s.Etcd, c, password)
	return a, nil
}

// checkRootPassword says what is wrong when etcd does not take password as root's; "" when it
// does.
func checkRootPassword(ctx context.Context, e etcd.Client, c *etcdv1.EtcdCluster, password string) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err := e.Authenticate(ctx, etcd.RootUser, password)
	switch {
	case err == nil:
		return ""
	case errors.Is(err, etcd.ErrAuthFailed):
		return fmt.Sprintf("etcd refuses root's password from Secret %s (spec.auth.rootCredentialsSecretRef): put root's current password there (the one Cozystack's operator set in etcd)",
			c.Spec.Auth.RootCredentialsSecretRef.Name)
	}
	return fmt.Sprintf("checking root's password from Secret %s against etcd: %v", c.Spec.Auth.RootCredentialsSecretRef.Name, err)
}
