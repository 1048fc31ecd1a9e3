package pdb

import (
	"context"
	"errors"
	"testing"

	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller/children/childtest"
	"github.com/quorumkeeper/etcd-operator/internal/controller/kit"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// The budget follows the voters: none before there are any, one once there are, gone when
// the cluster is paused.
func TestSyncFollowsVotersAndPause(t *testing.T) {
	t.Parallel()
	ctx, c := context.Background(), childtest.Cluster()
	cl := childtest.Client(interceptor.Funcs{})
	p := New(childtest.Objects(cl))
	if err := p.Sync(ctx, c, kit.Facts{}); err != nil {
		t.Fatal(err)
	}
	if err := childtest.Get(cl, specs.PDBName("db"), &policyv1.PodDisruptionBudget{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a PodDisruptionBudget without voters: %v", err)
	}
	if err := p.Sync(ctx, c, kit.Facts{Voters: 3}); err != nil {
		t.Fatal(err)
	}
	have := &policyv1.PodDisruptionBudget{}
	err := childtest.Get(cl, specs.PDBName("db"), have)
	if err != nil || !metav1.IsControlledBy(have, c) || have.Spec.MinAvailable.String() != specs.PDB(c, 3, false).Spec.MinAvailable.String() {
		t.Fatalf("PodDisruptionBudget %+v, %v", have, err)
	}
	zero := int32(0)
	c.Spec.Replicas = &zero
	if err := p.Sync(ctx, c, kit.Facts{Voters: 3}); err != nil {
		t.Fatal(err)
	}
	if err := childtest.Get(cl, specs.PDBName("db"), &policyv1.PodDisruptionBudget{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a paused cluster's PodDisruptionBudget: %v", err)
	}
}

func TestSyncReportsConflictAndRefusal(t *testing.T) {
	t.Parallel()
	c := childtest.Cluster()
	cl := childtest.Client(interceptor.Funcs{}, specs.PDB(c, 3, false))
	childtest.ExpectProblem(t, New(childtest.Objects(cl)).Sync(context.Background(), c, kit.Facts{Voters: 3}), etcdv1.ReasonNameConflict)
	refusing := childtest.Client(interceptor.Funcs{Create: func(context.Context, client.WithWatch, client.Object, ...client.CreateOption) error {
		return apierrors.NewForbidden(schema.GroupResource{Group: "policy", Resource: "poddisruptionbudgets"}, "db", errQuota)
	}})
	childtest.ExpectProblem(t, New(childtest.Objects(refusing)).Sync(context.Background(), c, kit.Facts{Voters: 3}), etcdv1.ReasonObjectRefused)
}

var errQuota = errors.New("exceeded quota: objects, requested: count/poddisruptionbudgets.policy=1")

// The budget of a cluster whose Pods still carry old role values selects both voter values,
// and Cozystack's selector once none is left; the budget is patched in place (the selector of
// a policy/v1 PodDisruptionBudget is mutable), never deleted and created again.
func TestSyncMovesTheSelectorOverFromOldRoleValues(t *testing.T) {
	t.Parallel()
	ctx, c := context.Background(), childtest.Cluster()
	old := specs.PDB(c, 3, false)
	old.Spec.Selector.MatchLabels[etcdv1.LabelRole] = etcdv1.LegacyRoleLabelVoter
	old.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(c, etcdv1.GroupVersion.WithKind("EtcdCluster"))}
	deleted := false
	cl := childtest.Client(interceptor.Funcs{Delete: func(context.Context, client.WithWatch, client.Object, ...client.DeleteOption) error {
		deleted = true
		return nil
	}}, old)
	p := New(childtest.Objects(cl))
	for _, step := range []struct {
		legacy bool
		want   *metav1.LabelSelector
	}{
		{true, specs.PDBSelector("db", true)},
		{false, specs.PDBSelector("db", false)},
	} {
		if err := p.Sync(ctx, c, kit.Facts{Voters: 3, LegacyRoleLabels: step.legacy}); err != nil {
			t.Fatal(err)
		}
		have := &policyv1.PodDisruptionBudget{}
		if err := childtest.Get(cl, specs.PDBName("db"), have); err != nil {
			t.Fatal(err)
		}
		if !equality.Semantic.DeepEqual(have.Spec.Selector, step.want) {
			t.Errorf("old values left %v: selector %+v, want %+v", step.legacy, have.Spec.Selector, step.want)
		}
	}
	if deleted {
		t.Error("the budget was deleted to move its selector")
	}
}
