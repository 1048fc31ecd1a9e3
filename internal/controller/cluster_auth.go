package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller/kit"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
	"github.com/quorumkeeper/etcd-operator/internal/etcdaccess"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// How root's password is kept. etcd changes a password only for a client logged in as root,
// that is, with the current password; a hash of it would tell the operator that the Secret
// changed but not let it log in to apply the change. So the password that is set in etcd is
// kept in a Secret the operator owns, <cluster>-root-applied, next to the user's Secret and
// no more exposed than it. A change is: log in with the applied password, change it in etcd,
// then record the new one. A crash between the last two leaves etcd with the new password
// and the record with the old; the client factory then falls back to the user's password, and
// the next reconcile finds that etcd accepts it and only records it.

// rootPasswordKey is the key of root's password in the root credentials Secrets.
const rootPasswordKey = etcdaccess.RootPasswordKey

// wantedPassword is root's password from spec.auth.rootCredentialsSecretRef, or the problem
// with that Secret.
func wantedPassword(ctx context.Context, r client.Reader, c *etcdv1.EtcdCluster) (string, *problem, error) {
	password, p, err := etcdaccess.WantedPassword(ctx, r, c)
	if p != nil {
		return "", &problem{reason: p.Reason, message: p.Message}, err
	}
	return password, nil, err
}

// authGate keeps a cluster that is to have auth from creating members while root's password
// cannot be read: it would run, and take writes, without authentication for as long. Nor
// before the NetworkPolicy that keeps other clients away from the members until auth is on
// is in place: a member serves as soon as it starts, and the operator enables auth only once
// a quorum answers. Once auth is on, a broken Secret only stops password changes (ensureAuth
// reports it).
func (r *ClusterReconciler) authGate(ctx context.Context, c *etcdv1.EtcdCluster) error {
	if !etcdaccess.AuthWanted(c) || c.Status.AuthEnabled {
		return nil
	}
	if err := r.children().NetworkPolicy.Sync(ctx, c, kit.Facts{}); err != nil {
		return err
	}
	_, p, err := wantedPassword(ctx, r, c)
	if err != nil || p == nil {
		return err
	}
	if err := r.setAuthCondition(ctx, c, p); err != nil {
		return err
	}
	return waitFor(p.reason, "%s", p.message)
}

// ensureAuth enables authentication once the cluster is at rest, and afterwards applies a
// password changed in the Secret.
func (r *ClusterReconciler) ensureAuth(ctx context.Context, c *etcdv1.EtcdCluster, v *clusterView) error {
	if !etcdaccess.AuthWanted(c) {
		return nil
	}
	wanted, p, err := wantedPassword(ctx, r, c)
	if err != nil {
		return err
	}
	if p != nil || !v.reachable {
		return r.setAuthCondition(ctx, c, p)
	}
	enabled, err := v.etcd.AuthStatus(ctx)
	if err != nil {
		return err
	}
	if !enabled {
		return r.enableAuth(ctx, c, v, wanted)
	}
	if err := r.applyPassword(ctx, c, v, wanted); err != nil {
		return err
	}
	note, err := unmanagedAuth(ctx, v.etcd)
	if err != nil {
		return err
	}
	return r.markAuthEnabled(ctx, c, note)
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

// reportRefusedLogin says so when etcd refused every password the operator knows: the
// cluster then looks unreachable, and this is why.
func (r *ClusterReconciler) reportRefusedLogin(ctx context.Context, c *etcdv1.EtcdCluster, v *clusterView) error {
	if !etcdaccess.AuthWanted(c) || !errors.Is(v.clientErr, etcd.ErrAuthFailed) {
		return nil
	}
	return r.setAuthCondition(ctx, c, problemf(etcdv1.ReasonAuthFailed, "etcd refuses both root's password from Secret %s and the one the operator last applied: set the Secret's password to root's current password in etcd",
		c.Spec.Auth.RootCredentialsSecretRef.Name))
}

// setAuthCondition reports p on AuthReady; a nil p leaves the condition as it is (nothing
// to talk to, so nothing new is known).
func (r *ClusterReconciler) setAuthCondition(ctx context.Context, c *etcdv1.EtcdCluster, p *problem) error {
	if p == nil {
		return nil
	}
	return r.setCondition(ctx, c, metav1.Condition{Type: etcdv1.ConditionAuthReady, Status: metav1.ConditionFalse, Reason: p.reason, Message: p.message})
}

// enableAuth creates root with the wanted password and the root role, then enables auth.
// The password is recorded first: should the operator die right after enabling, it must
// know the password to log in again. While auth is off, etcd needs no login for any of it.
func (r *ClusterReconciler) enableAuth(ctx context.Context, c *etcdv1.EtcdCluster, v *clusterView, wanted string) error {
	if why := notAtRest(c, v); why != "" {
		return r.setAuthCondition(ctx, c, problemf(etcdv1.ReasonWaitingForCluster, "authentication is enabled once a quorum of voters is healthy; until then the client Service %s has no endpoints: %s", specs.ClientServiceName(c.Name), why))
	}
	if err := r.recordApplied(ctx, c, wanted); err != nil {
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
	return r.markAuthEnabled(ctx, c, note)
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
	case total == 0 || healthy < quorum(total):
		return fmt.Sprintf("%d of %d voters are healthy, a quorum is needed", healthy, total)
	}
	return ""
}

// applyPassword makes etcd's root password the wanted one. If etcd already accepts it (a
// crash after the change, before the record; or a change made by hand), it is only recorded.
func (r *ClusterReconciler) applyPassword(ctx context.Context, c *etcdv1.EtcdCluster, v *clusterView, wanted string) error {
	applied, err := etcdaccess.AppliedPassword(ctx, r, c)
	if err != nil || applied == wanted {
		return err
	}
	err = v.etcd.Authenticate(ctx, etcd.RootUser, wanted)
	switch {
	case err == nil:
		return r.recordApplied(ctx, c, wanted)
	case !errors.Is(err, etcd.ErrAuthFailed):
		return err
	}
	// The client is logged in with the applied password: etcd accepted that one.
	if err := v.etcd.UserChangePassword(ctx, etcd.RootUser, wanted); err != nil {
		return fmt.Errorf("changing root's password: %w", err)
	}
	if err := r.recordApplied(ctx, c, wanted); err != nil {
		return err
	}
	r.event(ctx, c, corev1.EventTypeNormal, etcdv1.ReasonRootPasswordChanged, "ChangePassword", "changed root's password in etcd to the one in Secret %s", c.Spec.Auth.RootCredentialsSecretRef.Name)
	return nil
}

// recordApplied writes the operator-owned Secret with the password set in etcd.
func (r *ClusterReconciler) recordApplied(ctx context.Context, c *etcdv1.EtcdCluster, password string) error {
	s := &corev1.Secret{}
	err := r.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: specs.RootAppliedSecretName(c.Name)}, s)
	if apierrors.IsNotFound(err) {
		s = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: specs.RootAppliedSecretName(c.Name), Namespace: c.Namespace, Labels: specs.ClusterLabels(c.Name)},
			Type:       corev1.SecretTypeOpaque,
			Data:       map[string][]byte{rootPasswordKey: []byte(password)},
		}
		if err := controllerutil.SetControllerReference(c, s, r.Scheme()); err != nil {
			return err
		}
		return kit.RefusedByAPI(r.Create(ctx, s), "Secret", s.Name)
	}
	if err != nil {
		return err
	}
	if err := kit.NotOurs(s, c, "Secret", "EtcdCluster"); err != nil {
		return err
	}
	if string(s.Data[rootPasswordKey]) == password {
		return nil
	}
	s.Data = map[string][]byte{rootPasswordKey: []byte(password)}
	return r.Update(ctx, s)
}

// markAuthEnabled records in the status that etcd has auth on with the wanted password, and
// names the users and roles the operator did not create (note), with a Warning event when
// that list changes.
func (r *ClusterReconciler) markAuthEnabled(ctx context.Context, c *etcdv1.EtcdCluster, note string) error {
	if !c.Status.AuthEnabled {
		patch := client.MergeFrom(c.DeepCopy())
		c.Status.AuthEnabled = true
		if err := r.Status().Patch(ctx, c, patch); err != nil {
			return err
		}
	}
	msg := fmt.Sprintf("authentication is on; root's password is the one in Secret %s", c.Spec.Auth.RootCredentialsSecretRef.Name) + note
	if old := meta.FindStatusCondition(c.Status.Conditions, etcdv1.ConditionAuthReady); note != "" && (old == nil || old.Message != msg) {
		r.event(ctx, c, corev1.EventTypeWarning, etcdv1.ReasonUnmanagedUsersOrRoles, "CheckAuth", "%s", strings.TrimPrefix(note, "; "))
	}
	return r.setCondition(ctx, c, metav1.Condition{Type: etcdv1.ConditionAuthReady, Status: metav1.ConditionTrue, Reason: etcdv1.ReasonAuthEnabled, Message: msg})
}
