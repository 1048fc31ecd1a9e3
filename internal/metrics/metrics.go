// Package metrics holds the operator's own Prometheus metrics, served with controller-runtime's
// on the secure metrics endpoint. Gauges of the clusters' state are computed at scrape time from
// the manager's cache (ClusterCollector), so a deleted cluster leaves no stale series; counters
// and the time to Available are recorded by one-line calls from the controllers.
//
// Every metric name is listed in Names: the dashboard and alert tests check against it.
package metrics

import (
	"context"
	"errors"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/version"
)

// RBAC of the secure metrics endpoint: it authenticates a scraper's token and authorizes it
// with the API server (controller-runtime's filters.WithAuthenticationAndAuthorization).
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

const namespace = "etcd_operator"

// Names of the operator's own metrics, as Prometheus sees them.
const (
	ClusterConditionName    = namespace + "_cluster_condition"
	ClusterInfoName         = namespace + "_cluster_info"
	MembersName             = namespace + "_members"
	MembersDesiredName      = namespace + "_cluster_members_desired"
	MembershipChangesName   = namespace + "_membership_changes_total"
	ReconcileErrorsName     = namespace + "_reconcile_errors_total"
	EventsName              = namespace + "_events_total"
	TimeToAvailableName     = namespace + "_cluster_time_to_available_seconds"
	SnapshotsName           = namespace + "_snapshots_total"
	DefragsName             = namespace + "_defrags_total"
	BuildInfoName           = namespace + "_build_info"
	ClusterPhaseName        = namespace + "_cluster_phase"
	SnapshotLastSuccessName = namespace + "_snapshot_last_success_timestamp_seconds"
	ScheduleCreatedName     = namespace + "_snapshot_schedule_created_timestamp_seconds"
	CertificateExpiryName   = namespace + "_certificate_expiry_timestamp_seconds"
)

// Names lists every metric the operator defines (histograms by their base name).
var Names = []string{
	ClusterConditionName, ClusterInfoName, MembersName, MembersDesiredName, MembershipChangesName, ReconcileErrorsName,
	EventsName, TimeToAvailableName, SnapshotsName, DefragsName, BuildInfoName, ClusterPhaseName,
	SnapshotLastSuccessName, ScheduleCreatedName, CertificateExpiryName,
}

// Results of an operation, the "result" label's values.
const (
	ResultSuccess = "success"
	ResultFailure = "failure"
)

func counter(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}

var (
	membershipChanges = counter(MembershipChangesName,
		"Membership changes made in etcd by the operator, by kind (add, promote, remove, remove_orphan, replace, recreate) and result.",
		"kind", "result")
	reconcileErrors = counter(ReconcileErrorsName,
		"EtcdCluster reconcile steps that failed, by reason (Timeout, Conflict, NotFound, Forbidden, APIError, Other).", "reason")
	events = counter(EventsName,
		"Kubernetes events the operator recorded, by type and reason (docs/reasons.md says what each means).", "type", "reason")
	timeToAvailable = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    TimeToAvailableName,
		Help:    "Seconds from an EtcdCluster's creation to its first Available=True.",
		Buckets: []float64{2, 5, 10, 20, 30, 60, 120, 300, 600},
	})
	snapshots = counter(SnapshotsName, "EtcdSnapshots that reached Complete (success) or Failed (failure), by the cluster they are of.",
		"namespace", "cluster", "result")
	defrags = counter(DefragsName, "EtcdDefrag passes that reached Complete (success) or Failed (failure: a member failed, or the cluster is gone).", "result")
)

func init() {
	metrics.Registry.MustRegister(membershipChanges, reconcileErrors, events, timeToAvailable, snapshots, defrags, buildInfo())
}

// buildInfo is 1, labelled with what runs: every replica serves it, the leader or not, so
// that a query can tell which build each one is (and absent() that none is scraped).
func buildInfo() prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        BuildInfoName,
		Help:        "1, labelled with the operator's version, the commit it was built from and the Go release that built it.",
		ConstLabels: prometheus.Labels{"version": version.Version, "revision": version.Revision(), "goversion": runtime.Version()},
	})
	g.Set(1)
	return g
}

// SnapshotFinished counts an EtcdSnapshot of the cluster namespace/cluster whose final phase
// (failed or not) the snapshot controller has just stored; stored is that status update's
// error, returned as is. Nothing is counted when the update failed: the retry that stores it
// counts it, once.
func SnapshotFinished(namespace, cluster string, failed bool, stored error) error {
	return finished(snapshots.MustCurryWith(prometheus.Labels{"namespace": namespace, "cluster": cluster}), failed, stored)
}

// DefragFinished is SnapshotFinished for an EtcdDefrag pass, counted without its cluster.
func DefragFinished(failed bool, stored error) error {
	return finished(defrags, failed, stored)
}

func finished(c *prometheus.CounterVec, failed bool, stored error) error {
	if stored != nil {
		return stored
	}
	result := ResultSuccess
	if failed {
		result = ResultFailure
	}
	c.WithLabelValues(result).Inc()
	return nil
}

// membershipKinds maps the event reasons that report a membership change in etcd to its kind
// and result: the events are recorded exactly once per change, right after it. A replacement
// counts when the member is marked to go (MemberReplacing); its removal and the new member's
// add count as remove and add besides. (It named a reason nothing emits, MemberReplaced, so
// that replace stayed 0.)
var membershipKinds = map[string][2]string{
	etcdv1.ReasonMemberAdded:          {"add", ResultSuccess},
	etcdv1.ReasonMemberPromoted:       {"promote", ResultSuccess},
	etcdv1.ReasonMemberRemoved:        {"remove", ResultSuccess},
	etcdv1.ReasonRemoveFailed:         {"remove", ResultFailure},
	etcdv1.ReasonOrphanLearnerRemoved: {"remove_orphan", ResultSuccess},
	etcdv1.ReasonMemberReplacing:      {"replace", ResultSuccess},
	etcdv1.ReasonMemberRecreated:      {"recreate", ResultSuccess},
}

// Event counts an event the operator recorded, and the membership change it reports if any.
func Event(eventType, reason string) {
	events.WithLabelValues(eventType, reason).Inc()
	if kind, ok := membershipKinds[reason]; ok {
		membershipChanges.WithLabelValues(kind[0], kind[1]).Inc()
	}
}

// ErrorReason sorts an error into a few reasons an alert or a dashboard can group by.
func ErrorReason(err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "Timeout"
	case apierrors.IsConflict(err):
		return "Conflict"
	case apierrors.IsNotFound(err):
		return "NotFound"
	case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err):
		return "Forbidden"
	case apierrors.ReasonForError(err) != "":
		return "APIError"
	default:
		return "Other"
	}
}

// ObserveStatus records what a status update says: a failed step (by the reason ErrorReason
// gives), and the time to Available when the cluster is Available for the first time.
func ObserveStatus(before, after *etcdv1.EtcdCluster, stepErr error, now time.Time) {
	if p := meta.FindStatusCondition(after.Status.Conditions, etcdv1.ConditionProgressing); stepErr != nil && p != nil && p.Reason == etcdv1.ReasonStepFailed {
		reconcileErrors.WithLabelValues(ErrorReason(stepErr)).Inc()
	}
	if FirstAvailable(before, after) {
		timeToAvailable.Observe(now.Sub(after.CreationTimestamp.Time).Seconds())
	}
}

// FirstAvailable is true when after is Available and before had never been: no Available
// condition yet, or still bootstrapping. A cluster that lost quorum and got it back is not new.
func FirstAvailable(before, after *etcdv1.EtcdCluster) bool {
	if !meta.IsStatusConditionTrue(after.Status.Conditions, etcdv1.ConditionAvailable) {
		return false
	}
	prev := meta.FindStatusCondition(before.Status.Conditions, etcdv1.ConditionAvailable)
	return prev == nil || (prev.Status != metav1.ConditionTrue && prev.Reason == etcdv1.ReasonBootstrapping)
}
