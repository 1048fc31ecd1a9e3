package metrics

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

var (
	conditionDesc = prometheus.NewDesc(ClusterConditionName,
		"1 while the EtcdCluster's condition is True, else 0.", []string{"namespace", "cluster", "condition"}, nil)
	infoDesc = prometheus.NewDesc(ClusterInfoName,
		"1 per EtcdCluster, with the etcd version its members run (status.version, the lowest any member reports; empty until one answers).",
		[]string{"namespace", "cluster", "version"}, nil)
	phaseDesc = prometheus.NewDesc(ClusterPhaseName,
		"1 for the EtcdCluster's phase (Bootstrapping, Available, Degraded, Unavailable, Paused), 0 for the others: sum by (phase) counts clusters by phase.",
		[]string{"namespace", "cluster", "phase"}, nil)
	membersDesc = prometheus.NewDesc(MembersName,
		"Members of an EtcdCluster as its status shows them, by role (Voter, Learner) and ready (true, false).",
		[]string{"namespace", "cluster", "role", "ready"}, nil)
	desiredDesc = prometheus.NewDesc(MembersDesiredName,
		"spec.replicas of an EtcdCluster.", []string{"namespace", "cluster"}, nil)
	certificateDesc = prometheus.NewDesc(CertificateExpiryName,
		"When a certificate in a TLS Secret of an EtcdCluster expires (status.certificates), by Secret and key (tls.crt, ca.crt), in seconds since the epoch.",
		[]string{"namespace", "cluster", "secret", "key"}, nil)
	lastSuccessDesc = prometheus.NewDesc(SnapshotLastSuccessName,
		"Completion time of the newest Complete EtcdSnapshot of an EtcdCluster, in seconds since the epoch; absent while it has none.",
		[]string{"namespace", "cluster"}, nil)
	scheduleDesc = prometheus.NewDesc(ScheduleCreatedName,
		"Creation time of an EtcdSnapshotSchedule of an existing EtcdCluster (suspended or not), in seconds since the epoch.",
		[]string{"namespace", "cluster", "schedule"}, nil)
)

// Phases are the values of the phase label, in the order Phase decides them.
var Phases = []string{"Bootstrapping", "Paused", "Unavailable", "Degraded", "Available"}

// ClusterCollector reports every EtcdCluster's state at scrape time, read from the manager's
// cache: no API request, and no series left behind by a deleted cluster. Everything it reports
// is derived from objects (statuses, EtcdSnapshots, schedules), not from the process's memory,
// so a restarted or newly elected operator reports the same.
type ClusterCollector struct {
	Reader client.Reader
	Log    logr.Logger
	// Elected is closed once this replica leads (the manager's Elected()); nil means it
	// always does. Until then it reports nothing: a standby's cache holds the same clusters,
	// and two replicas serving them would double every sum an alert or a dashboard takes.
	Elected <-chan struct{}
	// Selector is the operator's --cluster-selector, nil for every cluster: one it does not
	// match is another shard's, whose operator reports it; reporting it here too would count
	// it twice and page for a cluster this operator does not manage.
	Selector labels.Selector
}

// Describe sends the descriptors of the cluster gauges.
func (c *ClusterCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{conditionDesc, infoDesc, phaseDesc, membersDesc, desiredDesc, certificateDesc, lastSuccessDesc, scheduleDesc} {
		ch <- d
	}
}

// leads is true once this replica was elected. A leader that loses its Lease exits (the
// manager stops), so there is no way back to false.
func (c *ClusterCollector) leads() bool {
	if c.Elected == nil {
		return true
	}
	select {
	case <-c.Elected:
		return true
	default:
		return false
	}
}

// Collect lists the EtcdClusters, their snapshots and schedules, and sends their gauges.
func (c *ClusterCollector) Collect(ch chan<- prometheus.Metric) {
	if !c.leads() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// Read only, so the cache's objects are not copied.
	var clusters etcdv1.EtcdClusterList
	if err := c.Reader.List(ctx, &clusters, client.UnsafeDisableDeepCopy); err != nil {
		c.Log.Error(err, "listing EtcdClusters for metrics")
		return
	}
	exists := map[clusterKey]bool{}
	for i := range clusters.Items {
		ec := &clusters.Items[i]
		if c.Selector != nil && !c.Selector.Matches(labels.Set(ec.Labels)) {
			continue
		}
		exists[clusterKey{ec.Namespace, ec.Name}] = true
		collectCluster(ch, ec)
	}
	c.collectSnapshots(ctx, ch, exists)
	c.collectSchedules(ctx, ch, exists)
}

// collectSnapshots sends each existing cluster's last success: the snapshots of a cluster
// that is gone (kept by their deletion policy) would otherwise age into an alert for ever.
func (c *ClusterCollector) collectSnapshots(ctx context.Context, ch chan<- prometheus.Metric, exists map[clusterKey]bool) {
	var snapshots etcdv1.EtcdSnapshotList
	if err := c.Reader.List(ctx, &snapshots, client.UnsafeDisableDeepCopy); err != nil {
		c.Log.Error(err, "listing EtcdSnapshots for metrics")
		return
	}
	for key, at := range lastSuccess(snapshots.Items) {
		if exists[key] {
			ch <- prometheus.MustNewConstMetric(lastSuccessDesc, prometheus.GaugeValue, seconds(at), key.Namespace, key.Name)
		}
	}
}

// collectSchedules sends the schedules of existing clusters.
func (c *ClusterCollector) collectSchedules(ctx context.Context, ch chan<- prometheus.Metric, exists map[clusterKey]bool) {
	var schedules etcdv1.EtcdSnapshotScheduleList
	if err := c.Reader.List(ctx, &schedules, client.UnsafeDisableDeepCopy); err != nil {
		c.Log.Error(err, "listing EtcdSnapshotSchedules for metrics")
		return
	}
	for i := range schedules.Items {
		s := &schedules.Items[i]
		if exists[clusterKey{s.Namespace, s.Spec.ClusterRef.Name}] {
			ch <- prometheus.MustNewConstMetric(scheduleDesc, prometheus.GaugeValue, seconds(s.CreationTimestamp.Time), s.Namespace, s.Spec.ClusterRef.Name, s.Name)
		}
	}
}

// clusterKey is a cluster's namespace and name.
type clusterKey struct{ Namespace, Name string }

// lastSuccess is, per cluster, the completion time of its newest Complete snapshot. Only
// existing snapshots count: one that retention or a person deleted takes its time with it,
// and what is left is the newest kept.
func lastSuccess(snapshots []etcdv1.EtcdSnapshot) map[clusterKey]time.Time {
	out := map[clusterKey]time.Time{}
	for i := range snapshots {
		s := &snapshots[i]
		if s.Status.Phase != etcdv1.SnapshotComplete || s.Status.CompletionTime == nil {
			continue
		}
		key := clusterKey{s.Namespace, s.Spec.ClusterRef.Name}
		if at := s.Status.CompletionTime.Time; at.After(out[key]) {
			out[key] = at
		}
	}
	return out
}

// seconds is t as Prometheus writes times; the API stores them to the second.
func seconds(t time.Time) float64 { return float64(t.Unix()) }

func collectCluster(ch chan<- prometheus.Metric, ec *etcdv1.EtcdCluster) {
	ns, name := ec.Namespace, ec.Name
	for _, cond := range ec.Status.Conditions {
		ch <- prometheus.MustNewConstMetric(conditionDesc, prometheus.GaugeValue, boolValue(cond.Status == metav1.ConditionTrue), ns, name, cond.Type)
	}
	ch <- prometheus.MustNewConstMetric(infoDesc, prometheus.GaugeValue, 1, ns, name, ec.Status.Version)
	phase := Phase(ec)
	for _, p := range Phases {
		ch <- prometheus.MustNewConstMetric(phaseDesc, prometheus.GaugeValue, boolValue(p == phase), ns, name, p)
	}
	for key, n := range memberCounts(ec) {
		ch <- prometheus.MustNewConstMetric(membersDesc, prometheus.GaugeValue, float64(n), ns, name, key[0], key[1])
	}
	desired := int32(3)
	if ec.Spec.Replicas != nil {
		desired = *ec.Spec.Replicas
	}
	ch <- prometheus.MustNewConstMetric(desiredDesc, prometheus.GaugeValue, float64(desired), ns, name)
	for _, e := range ec.Status.Certificates {
		ch <- prometheus.MustNewConstMetric(certificateDesc, prometheus.GaugeValue, seconds(e.NotAfter.Time), ns, name, e.Secret, e.Key)
	}
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// memberCounts counts the status's members by role and readiness; every combination is
// present (zero included) so that a query sees 0 rather than no series.
func memberCounts(ec *etcdv1.EtcdCluster) map[[2]string]int {
	counts := map[[2]string]int{}
	for _, role := range []etcdv1.MemberRole{etcdv1.RoleVoter, etcdv1.RoleLearner} {
		counts[[2]string{string(role), "true"}] = 0
		counts[[2]string{string(role), "false"}] = 0
	}
	for _, m := range ec.Status.Members {
		ready := "false"
		if m.Ready {
			ready = "true"
		}
		role := m.Role
		if role == "" {
			role = etcdv1.RoleVoter // not yet observed: counted where it will most likely land
		}
		counts[[2]string{string(role), ready}]++
	}
	return counts
}

// Phase sums the conditions up in one word, for dashboards: Paused and Bootstrapping come
// from Available's reason; Degraded is Available with an unhealthy member.
func Phase(ec *etcdv1.EtcdCluster) string {
	available := meta.FindStatusCondition(ec.Status.Conditions, etcdv1.ConditionAvailable)
	switch {
	case available == nil || available.Reason == etcdv1.ReasonBootstrapping:
		return "Bootstrapping"
	case available.Reason == etcdv1.ReasonPaused:
		return "Paused"
	case available.Status != metav1.ConditionTrue:
		return "Unavailable"
	case meta.IsStatusConditionTrue(ec.Status.Conditions, etcdv1.ConditionDegraded):
		return "Degraded"
	default:
		return "Available"
	}
}
