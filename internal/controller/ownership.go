package controller

import (
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Reasons for child objects the cluster cannot have. Both show in Degraded (and hold back
// the step that needs the object) instead of only in the operator's log.
const (
	// ReasonNameConflict: an object with the name the operator needs exists and is not
	// controlled by this cluster (or member). The operator never takes it over or overwrites
	// it: it may be another cluster's (clusters "db" and "db-client" would both need the
	// Service "db-client") or something a person made.
	ReasonNameConflict = "NameConflict"
	// ReasonObjectRefused: the API server refused to create or update a child object (an
	// admission webhook, a quota, a policy): its message is quoted.
	ReasonObjectRefused = "ObjectRefused"
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
	return childProblem(ReasonNameConflict, "%s %s already exists and does not belong to %s %s (%s): the operator does not take over or overwrite it; delete or rename it, or give the %s another name",
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
	return childProblem(ReasonObjectRefused, "the API server refused %s %s: %v", kind, name, err)
}

func isRefusal(err error) bool {
	return apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err)
}
