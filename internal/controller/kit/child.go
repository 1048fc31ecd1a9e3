package kit

import (
	"context"
	"fmt"
	"reflect"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

// Waiting says the cluster is not ready for the next change; the reconcile comes back soon.
// Degraded marks a wait on something broken (a child object the cluster cannot have), which
// Degraded reports too. It lives here, not with the cluster reconciler, because the packages
// that keep the cluster's child objects return it.
type Waiting struct {
	Reason, Message string
	Degraded        bool
	// RetryIn, when set, is when to look again: a wait that ends at a known time.
	RetryIn time.Duration
}

func (e Waiting) Error() string { return e.Message }

// ChildProblem is a Waiting that also makes the cluster Degraded.
func ChildProblem(reason, format string, args ...any) error {
	return Waiting{Reason: reason, Message: fmt.Sprintf(format, args...), Degraded: true}
}

// NotOurs is a NameConflict when obj is not controlled by owner (an ownerKind such as
// "EtcdCluster"), nil otherwise.
func NotOurs(obj, owner client.Object, kind, ownerKind string) error {
	if metav1.IsControlledBy(obj, owner) {
		return nil
	}
	return ChildProblem(etcdv1.ReasonNameConflict, "%s %s already exists and does not belong to %s %s (%s): the operator does not take over or overwrite it; delete or rename it, or give the %s another name",
		kind, obj.GetName(), ownerKind, owner.GetName(), ControllerOf(obj), ownerKind)
}

// ControllerOf names what controls obj, for messages about an object the operator may not take.
func ControllerOf(obj client.Object) string {
	if ref := metav1.GetControllerOf(obj); ref != nil {
		return fmt.Sprintf("controlled by %s %s", ref.Kind, ref.Name)
	}
	return "controlled by nothing"
}

// RefusedByAPI turns the API server's refusal of a child object (invalid, forbidden, bad
// request) into an ObjectRefused problem naming the object, and so does its failure to store
// one (an internal error, such as "failed to allocate a serviceIP ...: range is full" when the
// Service CIDR is used up): the cluster cannot go on without it, and the person must see why
// in the status rather than in the operator's log. It clears with the next look that finds
// the object made. Other errors (the API server unreachable, a conflict) pass unchanged.
func RefusedByAPI(err error, kind, name string) error {
	switch {
	case err == nil:
		return nil
	case IsRefusal(err):
		return ChildProblem(etcdv1.ReasonObjectRefused, "the API server refused %s %s: %v", kind, name, err)
	case apierrors.IsInternalError(err):
		return ChildProblem(etcdv1.ReasonObjectRefused, "the API server could not store %s %s: %v", kind, name, err)
	}
	return err
}

// IsRefusal is true for the API server refusing an object itself (invalid, forbidden, bad
// request), not for a failure to reach it.
func IsRefusal(err error) bool {
	return apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err)
}

func labelScoped(obj client.Object) bool {
	for _, kind := range LabelScoped() {
		if reflect.TypeOf(kind) == reflect.TypeOf(obj) {
			return true
		}
	}
	return false
}

// GetChild reads a child object by name from the cache and, when the cache has none of a
// label-scoped kind, from the API server: an object of that name without the operator's label
// must be seen (and refused as a NameConflict), not taken for absent and "created" over. The
// operator's own objects are in the cache, so a cluster at rest costs no read.
func GetChild(ctx context.Context, cached, live client.Reader, key types.NamespacedName, obj client.Object) error {
	err := cached.Get(ctx, key, obj)
	if apierrors.IsNotFound(err) && live != nil && labelScoped(obj) {
		return live.Get(ctx, key, obj)
	}
	return err
}

// Facts are what the cluster reconciler observed that a child object's wanted form depends
// on; the packages under internal/controller/children read them and nothing else of the view.
type Facts struct {
	// Voters is how many members etcd lists as voters (learners not counted).
	Voters int
	// Members are the cluster's EtcdMembers and PVCs its members' PersistentVolumeClaims by
	// name, as the reconcile observed them. The PVC components need them: retention sets the
	// PVCs' owners, volumes compares their sizes with the members' and moves the members' to
	// the cluster's; a list of their own would cost reads and could see another moment than
	// the steps did. Members are the view's own: what a component writes to one, the rest of
	// the reconcile sees.
	Members []*etcdv1.EtcdMember
	PVCs    map[string]*corev1.PersistentVolumeClaim
	// LegacyRoleLabels is true while a Pod of the cluster still carries a role label value
	// of before Cozystack's (specs.HasLegacyRoleLabel): the PodDisruptionBudget then selects
	// both voter values (specs.PDBSelector).
	LegacyRoleLabels bool
}

// Objects reads and writes a cluster's child objects: through the cache-backed Client and,
// for what the label-scoped cache cannot see, Live (nil when there is none, in tests on a
// plain client).
type Objects struct {
	Client client.Client
	Live   client.Reader
}

// Get reads a child object by name, as GetChild does.
func (o Objects) Get(ctx context.Context, key types.NamespacedName, obj client.Object) error {
	return GetChild(ctx, o.Client, o.Live, key, obj)
}

// GetOwned reads the cluster's child object of that name into obj: false when there is none,
// a NameConflict problem when one exists that the cluster does not control.
func (o Objects) GetOwned(ctx context.Context, c *etcdv1.EtcdCluster, name string, obj client.Object, kind string) (bool, error) {
	err := o.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: name}, obj)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, NotOurs(obj, c, kind, "EtcdCluster")
}

// CreateOwned creates want controlled by c; one that appeared meanwhile is left for the next
// reconcile to compare, and a refusal is an ObjectRefused problem naming it.
func (o Objects) CreateOwned(ctx context.Context, c *etcdv1.EtcdCluster, want client.Object, kind string) error {
	if err := controllerutil.SetControllerReference(c, want, o.Client.Scheme()); err != nil {
		return err
	}
	return RefusedByAPI(client.IgnoreAlreadyExists(o.Client.Create(ctx, want)), kind, want.GetName())
}
