package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller/children/auth"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
	"github.com/quorumkeeper/etcd-operator/internal/etcdaccess"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// Authentication inside etcd: turning it on and changing root's password. This stays with the
// cluster reconciler, not in children/auth, because it talks to etcd through the observed
// view's client and reads the view's voters; the component reads and records the passwords
// (children/auth says how they are kept) and AuthReady for it.

// ensureAuth enables authentication once the cluster is at rest, and afterwards applies a
// password changed in the Secret.
func (r *Reconciler) ensureAuth(ctx context.Context, c *etcdv1.EtcdCluster, v *clusterView, a *auth.Component) error {
	if !etcdaccess.AuthWanted(c) {
		return nil
	}
	wanted, p, err := a.Wanted(ctx, c)
	if err != nil {
		return err
	}
	if p != nil || !v.reachable {
		return a.Report(ctx, c, p)
	}
	enabled, err := v.etcd.AuthStatus(ctx)
	if err != nil {
		return err
	}
	if !enabled {
		return r.enableAuth(ctx, c, v, a, wanted)
	}
	if err := r.applyPassword(ctx, c, v, a, wanted); err != nil {
		return err
	}
	note, err := unmanagedAuth(ctx, v.etcd)
	if err != nil {
		return err
	}
	return a.MarkEnabled(ctx, c, note)
}

// unmanagedAuth names the users and roles besides root, which the operator never creates:
// made by hand, or left from before authentication was enabled, they keep what they were
// granted. The operator reports them and deletes nothing: they may be the application's.
func unmanagedAuth(ctx context.Context, cli etcd.Client) (string, error) {
	users, err := cli.UserList(ctx)
	if err != nil {
		return "", err
	}
	roles, err := cli.RoleList(ctx)
	if err != nil {
		return "", err
	}
	notRoot := func(names []string, root string) []string {
		var out []string
		for _, n := range names {
			if n != root {
				out = append(out, n)
			}
		}
		return out
	}
	users, roles = notRoot(users, etcd.RootUser), notRoot(roles, etcd.RootRole)
	if len(users) == 0 && len(roles) == 0 {
		return "", nil
	}
	return fmt.Sprintf("; users the operator did not create: [%s], roles: [%s]; they keep every permission granted to them (also before authentication was on): review them with etcdctl user get and role get, and remove what should not be there",
		strings.Join(users, ", "), strings.Join(roles, ", ")), nil
}

// enableAuth creates root with the wanted password and the root role, then enables auth.
// The password is recorded first: should the operator die right after enabling, it must
// know the password to log in again. While auth is off, etcd needs no login for any of it.
func (r *Reconciler) enableAuth(ctx context.Context, c *etcdv1.EtcdCluster, v *clusterView, a *auth.Component, wanted string) error {
	if why := notAtRest(c, v); why != "" {
		return a.Report(ctx, c, &etcdaccess.Problem{Reason: etcdv1.ReasonWaitingForCluster, Message: fmt.Sprintf(
			"authentication is enabled once a quorum of voters is healthy; until then the client Service %s has no endpoints: %s", specs.ClientServiceName(c.Name), why)})
	}
	if err := a.RecordApplied(ctx, c, wanted); err != nil {
		return err
	}
	err := v.etcd.UserAdd(ctx, etcd.RootUser, wanted)
	if errors.Is(err, etcd.ErrUserExists) {
		// Left by an earlier attempt, perhaps with an older password.
		err = v.etcd.UserChangePassword(ctx, etcd.RootUser, wanted)
	}
	if err != nil {
		return fmt.Errorf("creating user root: %w", err)
	}
	if err := v.etcd.UserGrantRole(ctx, etcd.RootUser, etcd.RootRole); err != nil {
		return fmt.Errorf("granting root the root role: %w", err)
	}
	// Listed while auth is still off, when no login is needed: users made before it keep
	// their roles once it is on.
	note, err := unmanagedAuth(ctx, v.etcd)
	if err != nil {
		return err
	}
	if err := v.etcd.AuthEnable(ctx); err != nil {
		return fmt.Errorf("enabling authentication: %w", err)
	}
	r.event(ctx, c, corev1.EventTypeNormal, etcdv1.ReasonAuthEnabled, "EnableAuth", "created user root with the root role and enabled authentication; the password is in Secret %s", c.Spec.Auth.RootCredentialsSecretRef.Name)
	return a.MarkEnabled(ctx, c, note)
}

// notAtRest says why auth cannot be enabled yet: a quorum of voters must be healthy. Not
// every member: one that cannot be scheduled would keep a cluster meant to have auth serving
// without it for as long. Enabling is one raft proposal, which members that join later
// receive like any other.
func notAtRest(c *etcdv1.EtcdCluster, v *clusterView) string {
	total, healthy := v.voters()
	switch {
	case ptrOr(c.Spec.Replicas, 3) == 0:
		return "the cluster is paused"
	case total == 0 || healthy < etcd.Quorum(total):
		return fmt.Sprintf("%d of %d voters are healthy, a quorum is needed", healthy, total)
	}
	return ""
}

// applyPassword makes etcd's root password the wanted one. If etcd already accepts it (a
// crash after the change, before the record; or a change made by hand), it is only recorded.
func (r *Reconciler) applyPassword(ctx context.Context, c *etcdv1.EtcdCluster, v *clusterView, a *auth.Component, wanted string) error {
	applied, err := a.Applied(ctx, c)
	if err != nil || applied == wanted {
		return err
	}
	err = v.etcd.Authenticate(ctx, etcd.RootUser, wanted)
	switch {
	case err == nil:
		return a.RecordApplied(ctx, c, wanted)
	case !errors.Is(err, etcd.ErrAuthFailed):
		return err
	}
	// The client is logged in with the applied password: etcd accepted that one.
	if err := v.etcd.UserChangePassword(ctx, etcd.RootUser, wanted); err != nil {
		return fmt.Errorf("changing root's password: %w", err)
	}
	if err := a.RecordApplied(ctx, c, wanted); err != nil {
		return err
	}
	r.event(ctx, c, corev1.EventTypeNormal, etcdv1.ReasonRootPasswordChanged, "ChangePassword", "changed root's password in etcd to the one in Secret %s", c.Spec.Auth.RootCredentialsSecretRef.Name)
	return nil
}
