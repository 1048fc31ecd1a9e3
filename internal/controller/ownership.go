package controller

import (
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

// childProblem is an errWaiting that also makes the cluster Degraded.
func childProblem(reason, format string, args ...any) error {
	return errWaiting{reason: reason, message: fmt.Sprintf(format, args...), degraded: true}
}

// notOurs is a NameConflict when obj is not controlled by owner (an ownerKind such as
// "EtcdCluster"), nil otherwise.
func notOurs(obj, owner client.Object, kind, ownerKind string) error {
	if metav1.IsControlledBy(obj, owner) {
		return nil
	}
	return childProblem(etcdv1.ReasonNameConflict, "%s %s already exists and does not belong to %s %s (%s): the operator does not take over or overwrite it; delete or rename it, or give the %s another name",
		kind, obj.GetName(), ownerKind, owner.GetName(), controllerOf(obj), ownerKind)
}

func controllerOf(obj client.Object) string {
	if ref := metav1.GetControllerOf(obj); ref != nil {
		return fmt.Sprintf("controlled by %s %s", ref.Kind, ref.Name)
	}
	return "controlled by nothing"
}

// refusedByAPI turns the API server's refusal of a child object (invalid, forbidden, bad
// request) into an ObjectRefused problem naming the object; other errors pass unchanged.
func refusedByAPI(err error, kind, name string) error {
	if err == nil || !isRefusal(err) {
		return err
	}
	return childProblem(etcdv1.ReasonObjectRefused, "the API server refused %s %s: %v", kind, name, err)
}

func isRefusal(err error) bool {
	return apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err)
}
