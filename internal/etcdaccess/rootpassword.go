package etcdaccess

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// RootPasswordKey and RootUsernameKey are the keys of the root credentials Secret.
const (
	RootPasswordKey = "password"
	RootUsernameKey = "username"
)

// Problem is what is wrong with a Secret the operator needs: a condition reason and a message
// that says what to do.
type Problem struct{ Reason, Message string }

func problemf(reason, format string, args ...any) *Problem {
	return &Problem{Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// WantedPassword is root's password from spec.auth.rootCredentialsSecretRef, or the problem
// with that Secret.
func WantedPassword(ctx context.Context, r client.Reader, c *etcdv1.EtcdCluster) (string, *Problem, error) {
	name := c.Spec.Auth.RootCredentialsSecretRef.Name
	s := &corev1.Secret{}
	err := r.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: name}, s)
	if apierrors.IsNotFound(err) {
		return "", problemf(etcdv1.ReasonSecretMissing, "Secret %s, named by spec.auth.rootCredentialsSecretRef, does not exist: create it with root's password under the key %q", name, RootPasswordKey), nil
	}
	if err != nil {
		return "", nil, err
	}
	if user, ok := s.Data[RootUsernameKey]; ok && string(user) != etcd.RootUser {
		return "", problemf(etcdv1.ReasonInvalidUsername, "Secret %s, named by spec.auth.rootCredentialsSecretRef, has username %q: the operator manages only user root; set it to root or remove the key", name, string(user)), nil
	}
	if len(s.Data[RootPasswordKey]) == 0 {
		return "", problemf(etcdv1.ReasonSecretKeyMissing, "Secret %s, named by spec.auth.rootCredentialsSecretRef, has no key %q or it is empty: put root's password there", name, RootPasswordKey), nil
	}
	return string(s.Data[RootPasswordKey]), nil, nil
}

// AppliedPassword is the password the operator last set in etcd; "" before it set one.
func AppliedPassword(ctx context.Context, r client.Reader, c *etcdv1.EtcdCluster) (string, error) {
	s := &corev1.Secret{}
	err := r.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: specs.RootAppliedSecretName(c.Name)}, s)
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	return string(s.Data[RootPasswordKey]), err
}
