package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

// secondOperatorID is the leader election Lease of the second operator TestSecondOperatorIsRefused
// runs beside the main one.
const secondOperatorID = "etcd-operator-e2e-second"

// A second operator watching a namespace the main operator also watches is refused the
// cluster there: the cluster keeps working under the main operator (a scale-out), and the
// second one's refusal shows as the OperatorConflict condition and a Warning event, which
// the main operator keeps through its own status writes. Once the second operator is gone,
// the main one removes the condition. The second operator is a copy of the main Deployment
// (same image, ServiceAccount and RBAC) under another name and Lease; the main operator is
// not restarted, so the test runs beside the others.
func TestSecondOperatorIsRefused(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	createCluster(t, ns, "shared", 1)
	waitSettled(t, ns, "shared", 1, 4*time.Minute)
	owner := getCluster(t, ns, "shared").Annotations[etcdv1.AnnotationOperator]
	if owner != operatorNamespace+"/etcd-operator.cozystack.io" {
		t.Fatalf("claim %q, want the main operator's Lease", owner)
	}
	second := operatorNamespace + "/" + secondOperatorID
	deploySecondOperator(t, ns)
	conflict := func() error {
		c := getCluster(t, ns, "shared")
		cond := meta.FindStatusCondition(c.Status.Conditions, etcdv1.ConditionOperatorConflict)
		switch {
		case cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != etcdv1.ReasonClaimedByAnotherOperator:
			return fmt.Errorf("OperatorConflict %+v", cond)
		case !strings.Contains(cond.Message, second) || !strings.Contains(cond.Message, owner):
			return fmt.Errorf("message %q names not both operators", cond.Message)
		case c.Annotations[etcdv1.AnnotationOperator] != owner:
			return fmt.Errorf("claim %q, want %q kept", c.Annotations[etcdv1.AnnotationOperator], owner)
		}
		return nil
	}
	eventually(t, 3*time.Minute, "the second operator's refusal", conflict)
	if !eventAbout(t, ns, etcdv1.ReasonClaimedByAnotherOperator, second) {
		t.Errorf("no %s event naming %s: %v", etcdv1.ReasonClaimedByAnotherOperator, second, eventReasons(t, ns))
	}
	setReplicas(t, ns, "shared", 3)
	waitSettled(t, ns, "shared", 3, 6*time.Minute)
	if err := conflict(); err != nil {
		t.Fatalf("after the main operator's scale-out: %v", err)
	}
	if slices.Contains(eventReasons(t, ns), etcdv1.ReasonClaimTakenOver) {
		t.Fatalf("a claim changed hands: %v", eventReasons(t, ns))
	}
	removeSecondOperator(t)
	// Its Lease, released as it stopped, counts as ended 2 minutes later (kit.ClaimMargin);
	// the main operator looks at the cluster at least once a minute.
	eventually(t, 5*time.Minute, "the OperatorConflict condition removed", func() error {
		if cond := meta.FindStatusCondition(getCluster(t, ns, "shared").Status.Conditions, etcdv1.ConditionOperatorConflict); cond != nil {
			return fmt.Errorf("still %+v", cond)
		}
		return nil
	})
	if !eventAbout(t, ns, etcdv1.ReasonOperatorConflictResolved, second) {
		t.Errorf("no %s event: %v", etcdv1.ReasonOperatorConflictResolved, eventReasons(t, ns))
	}
}

// deploySecondOperator runs a copy of the main operator's Deployment that watches only ns,
// under its own Lease and labels (the main operator's Service and the tests that look for
// its Pods by label do not see it); it is removed, with its Lease, when the test ends.
func deploySecondOperator(t *testing.T, ns string) {
	t.Helper()
	main := &appsv1.Deployment{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: operatorNamespace, Name: "etcd-operator"}, main); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"app.kubernetes.io/name": secondOperatorID}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: secondOperatorID, Labels: labels}, Spec: *main.Spec.DeepCopy()}
	one := int32(1)
	d.Spec.Replicas = &one
	d.Spec.Selector = &metav1.LabelSelector{MatchLabels: labels}
	d.Spec.Template.Labels = labels
	c := &d.Spec.Template.Spec.Containers[0]
	c.Args = slices.DeleteFunc(c.Args, func(arg string) bool {
		return strings.HasPrefix(arg, "--leader-election-id") || strings.HasPrefix(arg, "--watch-namespaces")
	})
	c.Args = append(c.Args, "--leader-election-id="+secondOperatorID, "--watch-namespaces="+ns)
	t.Cleanup(func() {
		removeSecondOperator(t)
		lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: secondOperatorID}}
		_ = k8s.Delete(context.Background(), lease)
	})
	if err := k8s.Create(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Minute, "the second operator ready", func() error {
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(d), d); err != nil {
			return err
		}
		if d.Status.ReadyReplicas != 1 {
			return fmt.Errorf("status %+v", d.Status)
		}
		return nil
	})
}

// removeSecondOperator deletes the second operator's Deployment and waits for it and its
// Pods to go. Its Lease, released as the operator stopped, stays until the test's end: the
// main operator reads it to see the second one stopped.
func removeSecondOperator(t *testing.T) {
	t.Helper()
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: secondOperatorID}}
	if err := k8s.Delete(context.Background(), d, client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "the second operator gone", func() error {
		err := k8s.Get(context.Background(), client.ObjectKeyFromObject(d), d)
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (%w)", err)
	})
}
