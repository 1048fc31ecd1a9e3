package children

import (
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/quorumkeeper/etcd-operator/internal/controller/children/childtest"
	"github.com/quorumkeeper/etcd-operator/internal/controller/children/networkpolicy"
	"github.com/quorumkeeper/etcd-operator/internal/controller/children/pdb"
	"github.com/quorumkeeper/etcd-operator/internal/controller/children/services"
)

// The reconciler relies on the order: the budget before the policy, as they always ran, and
// the policy the authentication gate runs is the one among the policies.
func TestNewOrdersThePolicies(t *testing.T) {
	t.Parallel()
	set := New(Options{Objects: childtest.Objects(childtest.Client(interceptor.Funcs{})), OperatorNamespace: "ops"})
	if _, ok := set.Services.(*services.Component); !ok {
		t.Fatalf("Services is %T", set.Services)
	}
	if len(set.Policies) != 2 {
		t.Fatalf("%d policies, want the PodDisruptionBudget and the NetworkPolicy", len(set.Policies))
	}
	if _, ok := set.Policies[0].(*pdb.Component); !ok {
		t.Fatalf("first policy is %T, want the PodDisruptionBudget", set.Policies[0])
	}
	if np, ok := set.Policies[1].(*networkpolicy.Component); !ok || set.NetworkPolicy != set.Policies[1] {
		t.Fatalf("second policy is %T (%v), want the NetworkPolicy the gate runs", set.Policies[1], np)
	}
	// Their types the compiler checks.
	if set.Retention == nil || set.Volumes == nil || set.Certificates == nil || set.Auth == nil {
		t.Fatalf("Retention %v, Volumes %v, Certificates %v, Auth %v: one not built", set.Retention, set.Volumes, set.Certificates, set.Auth)
	}
}
