// Package auth keeps the Kubernetes side of an EtcdCluster's authentication: root's password
// read from the user's Secret (spec.auth.rootCredentialsSecretRef), the password set in etcd
// recorded in the Secret the operator owns (<cluster>-root-applied), status.authEnabled, and
// the AuthReady condition. Turning auth on and changing root's password in etcd need the
// etcd client of the observed view and stay with the cluster reconciler, which records each
// result through this component.
package auth

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller/kit"
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

// The only Secret the operator writes is <cluster>-root-applied (RecordApplied), with Create
// and Update; Kubernetes cannot narrow create to names, docs/install.md says why it is needed.
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update

const kind = "Secret"

// Component keeps root's password Secrets and reports on AuthReady.
type Component struct {
	objects  kit.Objects
	recorder events.EventRecorder
}

// New is the component over the cluster's child objects, recording its events with recorder
// (nil in tests).
func New(objects kit.Objects, recorder events.EventRecorder) *Component {
	return &Component{objects: objects, recorder: recorder}
}

// Pending is true for a cluster that is to have auth and has not got it yet: its members
// serve without authentication until the operator turns it on.
func Pending(c *etcdv1.EtcdCluster) bool {
	return etcdaccess.AuthWanted(c) && !c.Status.AuthEnabled
}

// Sync keeps a cluster that is to have auth from creating members while root's password
// cannot be read: it would run, and take writes, without authentication for as long. Once
// auth is on, a broken Secret only stops password changes (the reconciler reports it through
// Report). It also says so when etcd refused every password the operator knows
// (loginRefused, which only the reconciler's look at etcd learns: the observed client's error
// is etcd.ErrAuthFailed): the cluster then looks unreachable, and this is why.
func (a *Component) Sync(ctx context.Context, c *etcdv1.EtcdCluster, loginRefused bool) error {
	if err := a.gate(ctx, c); err != nil {
		return err
	}
	if !etcdaccess.AuthWanted(c) || !loginRefused {
		return nil
	}
	return a.Report(ctx, c, &etcdaccess.Problem{Reason: etcdv1.ReasonAuthFailed, Message: fmt.Sprintf(
		"etcd refuses both root's password from Secret %s and the one the operator last applied: set the Secret's password to root's current password in etcd",
		c.Spec.Auth.RootCredentialsSecretRef.Name)})
}

// gate waits, with the Secret's problem on AuthReady, while auth is pending and root's
// password cannot be read.
func (a *Component) gate(ctx context.Context, c *etcdv1.EtcdCluster) error {
	if !Pending(c) {
		return nil
	}
	_, p, err := a.Wanted(ctx, c)
	if err != nil || p == nil {
		return err
	}
	if err := a.Report(ctx, c, p); err != nil {
		return err
	}
	return kit.Waiting{Reason: p.Reason, Message: p.Message}
}

// Wanted is root's password from spec.auth.rootCredentialsSecretRef, or the problem with that
// Secret.
func (a *Component) Wanted(ctx context.Context, c *etcdv1.EtcdCluster) (string, *etcdaccess.Problem, error) {
	return etcdaccess.WantedPassword(ctx, a.objects.Client, c)
}

// Applied is the password the operator last set in etcd; "" before it set one.
func (a *Component) Applied(ctx context.Context, c *etcdv1.EtcdCluster) (string, error) {
	return etcdaccess.AppliedPassword(ctx, a.objects.Client, c)
}

// Report sets AuthReady False with p; a nil p leaves the condition as it is (nothing to talk
// to, so nothing new is known).
func (a *Component) Report(ctx context.Context, c *etcdv1.EtcdCluster, p *etcdaccess.Problem) error {
	if p == nil {
		return nil
	}
	return kit.SetCondition(ctx, a.objects.Client, a.recorder, c, metav1.Condition{Type: etcdv1.ConditionAuthReady, Status: metav1.ConditionFalse, Reason: p.Reason, Message: p.Message})
}

// RecordApplied writes the operator-owned Secret with the password set in etcd.
func (a *Component) RecordApplied(ctx context.Context, c *etcdv1.EtcdCluster, password string) error {
	s := &corev1.Secret{}
	err := a.objects.Client.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: specs.RootAppliedSecretName(c.Name)}, s)
	if apierrors.IsNotFound(err) {
		s = &corev1.Secret{
			ObjectMeta: specs.WithAdditionalMetadata(c, metav1.ObjectMeta{Name: specs.RootAppliedSecretName(c.Name), Namespace: c.Namespace, Labels: specs.ClusterLabels(c.Name)}),
			Type:       corev1.SecretTypeOpaque,
			Data:       map[string][]byte{etcdaccess.RootPasswordKey: []byte(password)},
		}
		// Not CreateOwned: a Secret of this name that appeared meanwhile must fail the write,
		// since auth goes on in etcd only once the password is recorded.
		if err := controllerutil.SetControllerReference(c, s, a.objects.Client.Scheme()); err != nil {
			return err
		}
		return kit.RefusedByAPI(a.objects.Client.Create(ctx, s), kind, s.Name)
	}
	if err != nil {
		return err
	}
	if err := kit.NotOurs(s, c, kind, "EtcdCluster"); err != nil {
		return err
	}
	if string(s.Data[etcdaccess.RootPasswordKey]) == password {
		return nil
	}
	s.Data = map[string][]byte{etcdaccess.RootPasswordKey: []byte(password)}
	return a.objects.Client.Update(ctx, s)
}

// MarkEnabled records in the status that etcd has auth on with the wanted password, and
// names the users and roles the operator did not create (note), with a Warning event when
// that list changes.
func (a *Component) MarkEnabled(ctx context.Context, c *etcdv1.EtcdCluster, note string) error {
	if !c.Status.AuthEnabled {
		patch := client.MergeFrom(c.DeepCopy())
		c.Status.AuthEnabled = true
		if err := a.objects.Client.Status().Patch(ctx, c, patch); err != nil {
			return err
		}
	}
	msg := fmt.Sprintf("authentication is on; root's password is the one in Secret %s", c.Spec.Auth.RootCredentialsSecretRef.Name) + note
	if old := meta.FindStatusCondition(c.Status.Conditions, etcdv1.ConditionAuthReady); note != "" && (old == nil || old.Message != msg) {
		kit.Emit(ctx, a.recorder, c, nil, corev1.EventTypeWarning, etcdv1.ReasonUnmanagedUsersOrRoles, "CheckAuth", "%s", strings.TrimPrefix(note, "; "))
	}
	return kit.SetCondition(ctx, a.objects.Client, a.recorder, c, metav1.Condition{Type: etcdv1.ConditionAuthReady, Status: metav1.ConditionTrue, Reason: etcdv1.ReasonAuthEnabled, Message: msg})
}
