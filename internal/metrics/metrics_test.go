package metrics

import (
	"context"
	"errors"
	"fmt"
	"maps"
	goruntime "runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/version"
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

// Snapshots are counted per cluster (so that an alert names the cluster whose backups fail),
// defragmentation passes without one.
func TestSnapshotsAndDefragsAreCountedOnceStored(t *testing.T) {
	snapshotOf := func(failed bool, stored error) error { return SnapshotFinished("prod", "db", failed, stored) }
	for name, tt := range map[string]struct {
		counter  *prometheus.CounterVec
		labels   []string
		finished func(bool, error) error
	}{"snapshots": {snapshots, []string{"prod", "db"}, snapshotOf}, "defrags": {defrags, nil, DefragFinished}} {
		value := func(result string) float64 {
			return testutil.ToFloat64(tt.counter.WithLabelValues(append(slices.Clone(tt.labels), result)...))
		}
		ok, failed := value(ResultSuccess), value(ResultFailure)
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
		if got := value(ResultFailure) - failed; got != 1 {
			t.Errorf("%s{failure} grew by %v, want 1 (the update that failed is not counted)", name, got)
		}
		if got := value(ResultSuccess) - ok; got != 1 {
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

func testScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := etcdv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	return scheme
}

func TestClusterCollector(t *testing.T) {
	three := int32(3)
	expires := metav1.NewTime(time.Unix(1893456000, 0))
	ec := &etcdv1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "prod"},
		Spec:       etcdv1.EtcdClusterSpec{Version: "3.6.16", Replicas: &three},
		Status: etcdv1.EtcdClusterStatus{
			// The version that runs, not spec.version: an upgrade to 3.6.16 is under way.
			Version:    "3.5.21",
			Conditions: []metav1.Condition{cond("Available", "True", "QuorumHealthy"), cond("Degraded", "True", "MembersUnhealthy")},
			Members: []etcdv1.MemberSummary{
				{Name: "db-1", Role: etcdv1.RoleVoter, Ready: true, Version: "3.6.16"},
				{Name: "db-2", Role: etcdv1.RoleVoter, Ready: true, Version: "3.5.21"},
				{Name: "db-3", Role: etcdv1.RoleLearner},
			},
			Certificates: []etcdv1.CertificateExpiry{{Secret: "db-server-tls", Key: "ca.crt", NotAfter: expires}},
		},
	}
	c := &ClusterCollector{Reader: fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(ec).Build()}
	want := `
# HELP etcd_operator_members Members of an EtcdCluster as its status shows them, by role (Voter, Learner) and ready (true, false).
# TYPE etcd_operator_members gauge
etcd_operator_members{cluster="db",namespace="prod",ready="false",role="Learner"} 1
etcd_operator_members{cluster="db",namespace="prod",ready="false",role="Voter"} 0
etcd_operator_members{cluster="db",namespace="prod",ready="true",role="Learner"} 0
etcd_operator_members{cluster="db",namespace="prod",ready="true",role="Voter"} 2
# HELP etcd_operator_cluster_info 1 per EtcdCluster, with the etcd version its members run (status.version, the lowest any member reports; empty until one answers).
# TYPE etcd_operator_cluster_info gauge
etcd_operator_cluster_info{cluster="db",namespace="prod",version="3.5.21"} 1
# HELP etcd_operator_cluster_phase 1 for the EtcdCluster's phase (Bootstrapping, Available, Degraded, Unavailable, Paused), 0 for the others: sum by (phase) counts clusters by phase.
# TYPE etcd_operator_cluster_phase gauge
etcd_operator_cluster_phase{cluster="db",namespace="prod",phase="Available"} 0
etcd_operator_cluster_phase{cluster="db",namespace="prod",phase="Bootstrapping"} 0
etcd_operator_cluster_phase{cluster="db",namespace="prod",phase="Degraded"} 1
etcd_operator_cluster_phase{cluster="db",namespace="prod",phase="Paused"} 0
etcd_operator_cluster_phase{cluster="db",namespace="prod",phase="Unavailable"} 0
# HELP etcd_operator_cluster_condition 1 while the EtcdCluster's condition is True, else 0.
# TYPE etcd_operator_cluster_condition gauge
etcd_operator_cluster_condition{cluster="db",condition="Available",namespace="prod"} 1
etcd_operator_cluster_condition{cluster="db",condition="Degraded",namespace="prod"} 1
# HELP etcd_operator_cluster_members_desired spec.replicas of an EtcdCluster.
# TYPE etcd_operator_cluster_members_desired gauge
etcd_operator_cluster_members_desired{cluster="db",namespace="prod"} 3
# HELP etcd_operator_certificate_expiry_timestamp_seconds When a certificate in a TLS Secret of an EtcdCluster expires (status.certificates), by Secret and key (tls.crt, ca.crt), in seconds since the epoch.
# TYPE etcd_operator_certificate_expiry_timestamp_seconds gauge
etcd_operator_certificate_expiry_timestamp_seconds{cluster="db",key="ca.crt",namespace="prod",secret="db-server-tls"} 1.893456e+09
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatalf("the collector does not register: %v", err)
	}
}

// A standby replica reports no cluster series, whatever its cache holds; once elected it
// reports them all.
func TestClusterCollectorReportsOnlyWhileLeading(t *testing.T) {
	ec := &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "prod"}}
	snap := snapshot("prod", "s1", "db", etcdv1.SnapshotComplete, 100)
	elected := make(chan struct{})
	c := &ClusterCollector{Reader: fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(ec, snap).Build(), Elected: elected}
	if n := testutil.CollectAndCount(c); n != 0 {
		t.Fatalf("a standby reported %d series, want none", n)
	}
	close(elected)
	if n := testutil.CollectAndCount(c, ClusterInfoName, SnapshotLastSuccessName); n != 2 {
		t.Fatalf("the leader reported %d cluster_info and last-success series, want 2", n)
	}
}

// An operator with --cluster-selector reports only the clusters it selects, and their
// snapshots: the others are another shard's, whose operator reports them.
func TestClusterCollectorReportsOnlyTheClustersItSelects(t *testing.T) {
	mine := &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "prod", Labels: map[string]string{"shard": "a"}}}
	theirs := &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "prod", Labels: map[string]string{"shard": "b"}}}
	objs := []client.Object{mine, theirs, snapshot("prod", "sa", "a", etcdv1.SnapshotComplete, 100), snapshot("prod", "sb", "b", etcdv1.SnapshotComplete, 200)}
	reader := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(objs...).Build()
	for _, tc := range []struct {
		name     string
		selector labels.Selector
		want     int
	}{
		{"every cluster", nil, 2},
		{"shard a", labels.SelectorFromSet(labels.Set{"shard": "a"}), 1},
	} {
		c := &ClusterCollector{Reader: reader, Selector: tc.selector}
		if n := testutil.CollectAndCount(c, ClusterInfoName); n != tc.want {
			t.Errorf("%s: %d cluster_info series, want %d", tc.name, n, tc.want)
		}
		if n := testutil.CollectAndCount(c, SnapshotLastSuccessName); n != tc.want {
			t.Errorf("%s: %d last-success series, want %d", tc.name, n, tc.want)
		}
	}
}

func snapshot(ns, name, cluster string, phase etcdv1.SnapshotPhase, completed int64) *etcdv1.EtcdSnapshot {
	s := &etcdv1.EtcdSnapshot{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       etcdv1.EtcdSnapshotSpec{ClusterRef: corev1.LocalObjectReference{Name: cluster}},
		Status:     etcdv1.EtcdSnapshotStatus{Phase: phase},
	}
	if completed != 0 {
		at := metav1.NewTime(time.Unix(completed, 0))
		s.Status.CompletionTime = &at
	}
	return s
}

// The last success is the newest Complete snapshot's completion, per cluster, read from the
// objects (what an operator restarted or newly elected finds): a newer failure or one still
// running does not move it, and snapshots of a cluster that is gone report nothing. Schedules
// are reported with their creation time, for their cluster, for the alert on a schedule that
// never succeeded.
func TestClusterCollectorSnapshotsAndSchedules(t *testing.T) {
	objs := []client.Object{
		&etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "prod"}},
		&etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "dev"}},
		&etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "new", Namespace: "prod"}},
		snapshot("prod", "old", "db", etcdv1.SnapshotComplete, 1000),
		snapshot("prod", "newest", "db", etcdv1.SnapshotComplete, 3000),
		snapshot("prod", "between", "db", etcdv1.SnapshotComplete, 2000),
		snapshot("prod", "failed-later", "db", etcdv1.SnapshotFailed, 4000),
		snapshot("prod", "running", "db", etcdv1.SnapshotStarted, 0),
		snapshot("dev", "only", "db", etcdv1.SnapshotComplete, 500),
		snapshot("prod", "of-a-deleted-cluster", "gone", etcdv1.SnapshotComplete, 5000),
		&etcdv1.EtcdSnapshotSchedule{
			ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "prod", CreationTimestamp: metav1.NewTime(time.Unix(700, 0))},
			Spec:       etcdv1.EtcdSnapshotScheduleSpec{ClusterRef: corev1.LocalObjectReference{Name: "new"}, Suspend: true},
		},
		&etcdv1.EtcdSnapshotSchedule{
			ObjectMeta: metav1.ObjectMeta{Name: "orphan", Namespace: "prod", CreationTimestamp: metav1.NewTime(time.Unix(800, 0))},
			Spec:       etcdv1.EtcdSnapshotScheduleSpec{ClusterRef: corev1.LocalObjectReference{Name: "gone"}},
		},
	}
	c := &ClusterCollector{Reader: fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(objs...).Build()}
	want := `
# HELP etcd_operator_snapshot_last_success_timestamp_seconds Completion time of the newest Complete EtcdSnapshot of an EtcdCluster, in seconds since the epoch; absent while it has none.
# TYPE etcd_operator_snapshot_last_success_timestamp_seconds gauge
etcd_operator_snapshot_last_success_timestamp_seconds{cluster="db",namespace="dev"} 500
etcd_operator_snapshot_last_success_timestamp_seconds{cluster="db",namespace="prod"} 3000
# HELP etcd_operator_snapshot_schedule_created_timestamp_seconds Creation time of an EtcdSnapshotSchedule of an existing EtcdCluster (suspended or not), in seconds since the epoch.
# TYPE etcd_operator_snapshot_schedule_created_timestamp_seconds gauge
etcd_operator_snapshot_schedule_created_timestamp_seconds{cluster="new",namespace="prod",schedule="nightly"} 700
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), SnapshotLastSuccessName, ScheduleCreatedName); err != nil {
		t.Error(err)
	}
}

// Every replica says what it runs, leader or not.
func TestBuildInfo(t *testing.T) {
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != BuildInfoName {
			continue
		}
		labels := map[string]string{}
		for _, l := range f.GetMetric()[0].GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		want := map[string]string{"version": version.Version, "revision": version.Revision(), "goversion": goruntime.Version()}
		if !maps.Equal(labels, want) || f.GetMetric()[0].GetGauge().GetValue() != 1 {
			t.Fatalf("%s %v = %v, want %v = 1", BuildInfoName, labels, f.GetMetric()[0].GetGauge().GetValue(), want)
		}
		return
	}
	t.Fatalf("%s is not registered", BuildInfoName)
}
