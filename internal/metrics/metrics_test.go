package metrics

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

func cond(typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason}
}

func withConditions(conds ...metav1.Condition) *etcdv1.EtcdCluster {
	return &etcdv1.EtcdCluster{Status: etcdv1.EtcdClusterStatus{Conditions: conds}}
}

func TestPhase(t *testing.T) {
	tests := []struct {
		conds []metav1.Condition
		want  string
	}{
		{nil, "Bootstrapping"},
		{[]metav1.Condition{cond("Available", "False", "Bootstrapping")}, "Bootstrapping"},
		{[]metav1.Condition{cond("Available", "False", "Paused")}, "Paused"},
		{[]metav1.Condition{cond("Available", "False", "QuorumLost")}, "Unavailable"},
		{[]metav1.Condition{cond("Available", "True", "QuorumHealthy"), cond("Degraded", "True", "MembersUnhealthy")}, "Degraded"},
		{[]metav1.Condition{cond("Available", "True", "QuorumHealthy"), cond("Degraded", "False", "AllMembersHealthy")}, "Available"},
	}
	for _, tt := range tests {
		if got := Phase(withConditions(tt.conds...)); got != tt.want {
			t.Errorf("Phase(%v) = %s, want %s", tt.conds, got, tt.want)
		}
	}
}

func TestFirstAvailable(t *testing.T) {
	up := withConditions(cond("Available", "True", "QuorumHealthy"))
	tests := []struct {
		name          string
		before, after *etcdv1.EtcdCluster
		want          bool
	}{
		{"new cluster, first status", withConditions(), up, true},
		{"bootstrapped", withConditions(cond("Available", "False", "Bootstrapping")), up, true},
		{"quorum back", withConditions(cond("Available", "False", "QuorumLost")), up, false},
		{"still available", up, up, false},
		{"still bootstrapping", withConditions(), withConditions(cond("Available", "False", "Bootstrapping")), false},
	}
	for _, tt := range tests {
		if got := FirstAvailable(tt.before, tt.after); got != tt.want {
			t.Errorf("%s: FirstAvailable = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestErrorReason(t *testing.T) {
	gr := schema.GroupResource{Resource: "pods"}
	tests := map[string]error{
		"Timeout":   fmt.Errorf("step: %w", context.DeadlineExceeded),
		"Conflict":  apierrors.NewConflict(gr, "p", errors.New("x")),
		"NotFound":  apierrors.NewNotFound(gr, "p"),
		"Forbidden": apierrors.NewForbidden(gr, "p", errors.New("x")),
		"APIError":  apierrors.NewInternalError(errors.New("x")),
		"Other":     errors.New("etcd said no"),
	}
	for want, err := range tests {
		if got := ErrorReason(err); got != want {
			t.Errorf("ErrorReason(%v) = %s, want %s", err, got, want)
		}
	}
}

func TestEventCountsMembershipChanges(t *testing.T) {
	before := testutil.ToFloat64(membershipChanges.WithLabelValues("add", ResultSuccess))
	removeFailed := testutil.ToFloat64(membershipChanges.WithLabelValues("remove", ResultFailure))
	replaced := testutil.ToFloat64(membershipChanges.WithLabelValues("replace", ResultSuccess))
	Event("Warning", etcdv1.ReasonMemberReplacing) // the reason the replacement paths emit
	if got := testutil.ToFloat64(membershipChanges.WithLabelValues("replace", ResultSuccess)) - replaced; got != 1 {
		t.Errorf("replace/success grew by %v, want 1", got)
	}
	Event("Normal", "MemberAdded")
	Event("Normal", "MemberAdded")
	Event("Warning", "RemoveFailed")
	Event("Normal", "PodCreated") // not a membership change
	if got := testutil.ToFloat64(membershipChanges.WithLabelValues("add", ResultSuccess)) - before; got != 2 {
		t.Errorf("add/success grew by %v, want 2", got)
	}
	if got := testutil.ToFloat64(membershipChanges.WithLabelValues("remove", ResultFailure)) - removeFailed; got != 1 {
		t.Errorf("remove/failure grew by %v, want 1", got)
	}
	if got := testutil.ToFloat64(events.WithLabelValues("Normal", "PodCreated")); got < 1 {
		t.Errorf("events{PodCreated} = %v", got)
	}
}

func TestObserveStatusCountsFailedStepsOnly(t *testing.T) {
	before := testutil.ToFloat64(reconcileErrors.WithLabelValues("Timeout"))
	failed := withConditions(cond("Progressing", "True", "StepFailed"))
	waiting := withConditions(cond("Progressing", "True", "WaitingForLearner"))
	ObserveStatus(failed, failed, context.DeadlineExceeded, time.Now())
	ObserveStatus(waiting, waiting, context.DeadlineExceeded, time.Now())
	if got := testutil.ToFloat64(reconcileErrors.WithLabelValues("Timeout")) - before; got != 1 {
		t.Errorf("reconcile errors{Timeout} grew by %v, want 1 (a wait is no error)", got)
	}
	created := time.Unix(1000, 0)
	up := withConditions(cond("Available", "True", "QuorumHealthy"))
	up.CreationTimestamp = metav1.NewTime(created)
	count, sum := histogram(t)
	ObserveStatus(withConditions(), up, nil, created.Add(7*time.Second))
	ObserveStatus(up, up, nil, created.Add(9*time.Second)) // already available: not again
	count2, sum2 := histogram(t)
	if count2-count != 1 || sum2-sum != 7 {
		t.Errorf("time to available got %d samples summing %vs, want one of 7s", count2-count, sum2-sum)
	}
}

func TestSnapshotsAndDefragsAreCountedOnceStored(t *testing.T) {
	for name, tt := range map[string]struct {
		counter  *prometheus.CounterVec
		finished func(bool, error) error
	}{"snapshots": {snapshots, SnapshotFinished}, "defrags": {defrags, DefragFinished}} {
		ok := testutil.ToFloat64(tt.counter.WithLabelValues(ResultSuccess))
		failed := testutil.ToFloat64(tt.counter.WithLabelValues(ResultFailure))
		conflict := apierrors.NewConflict(schema.GroupResource{Resource: name}, "x", errors.New("stale"))
		if err := tt.finished(true, conflict); !errors.Is(err, conflict) {
			t.Errorf("%s: the update's error came back as %v", name, err)
		}
		if err := tt.finished(true, nil); err != nil {
			t.Errorf("%s: stored, yet %v", name, err)
		}
		if err := tt.finished(false, nil); err != nil {
			t.Errorf("%s: stored, yet %v", name, err)
		}
		if got := testutil.ToFloat64(tt.counter.WithLabelValues(ResultFailure)) - failed; got != 1 {
			t.Errorf("%s{failure} grew by %v, want 1 (the update that failed is not counted)", name, got)
		}
		if got := testutil.ToFloat64(tt.counter.WithLabelValues(ResultSuccess)) - ok; got != 1 {
			t.Errorf("%s{success} grew by %v, want 1", name, got)
		}
	}
}

func histogram(t *testing.T) (uint64, float64) {
	t.Helper()
	var m dto.Metric
	if err := timeToAvailable.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
}

func TestClusterCollector(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := etcdv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	three := int32(3)
	ec := &etcdv1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "prod"},
		Spec:       etcdv1.EtcdClusterSpec{Version: "3.6.16", Replicas: &three},
		Status: etcdv1.EtcdClusterStatus{
			Conditions: []metav1.Condition{cond("Available", "True", "QuorumHealthy"), cond("Degraded", "True", "MembersUnhealthy")},
			Members: []etcdv1.MemberSummary{
				{Name: "db-1", Role: etcdv1.RoleVoter, Ready: true},
				{Name: "db-2", Role: etcdv1.RoleVoter, Ready: true},
				{Name: "db-3", Role: etcdv1.RoleLearner},
			},
		},
	}
	c := &ClusterCollector{Reader: fake.NewClientBuilder().WithScheme(scheme).WithObjects(ec).Build()}
	want := `
# HELP etcd_operator_members Members of an EtcdCluster as its status shows them, by role (Voter, Learner) and ready (true, false).
# TYPE etcd_operator_members gauge
etcd_operator_members{cluster="db",namespace="prod",ready="false",role="Learner"} 1
etcd_operator_members{cluster="db",namespace="prod",ready="false",role="Voter"} 0
etcd_operator_members{cluster="db",namespace="prod",ready="true",role="Learner"} 0
etcd_operator_members{cluster="db",namespace="prod",ready="true",role="Voter"} 2
# HELP etcd_operator_cluster_info 1 per EtcdCluster, with its etcd version and phase (Bootstrapping, Available, Degraded, Unavailable, Paused): sum by (phase) counts clusters by phase.
# TYPE etcd_operator_cluster_info gauge
etcd_operator_cluster_info{cluster="db",namespace="prod",phase="Degraded",version="3.6.16"} 1
# HELP etcd_operator_cluster_condition 1 while the EtcdCluster's condition is True, else 0.
# TYPE etcd_operator_cluster_condition gauge
etcd_operator_cluster_condition{cluster="db",condition="Available",namespace="prod"} 1
etcd_operator_cluster_condition{cluster="db",condition="Degraded",namespace="prod"} 1
# HELP etcd_operator_cluster_members_desired spec.replicas of an EtcdCluster.
# TYPE etcd_operator_cluster_members_desired gauge
etcd_operator_cluster_members_desired{cluster="db",namespace="prod"} 3
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatalf("the collector does not register: %v", err)
	}
}
