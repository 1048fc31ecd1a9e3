package metrics

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

var (
	conditionDesc = prometheus.NewDesc(ClusterConditionName,
		"1 while the EtcdCluster's condition is True, else 0.", []string{"namespace", "cluster", "condition"}, nil)
	infoDesc = prometheus.NewDesc(ClusterInfoName,
		"1 per EtcdCluster, with its etcd version and phase (Bootstrapping, Available, Degraded, Unavailable, Paused): sum by (phase) counts clusters by phase.",
		[]string{"namespace", "cluster", "version", "phase"}, nil)
	membersDesc = prometheus.NewDesc(MembersName,
		"Members of an EtcdCluster as its status shows them, by role (Voter, Learner) and ready (true, false).",
		[]string{"namespace", "cluster", "role", "ready"}, nil)
	desiredDesc = prometheus.NewDesc(MembersDesiredName,
		"spec.replicas of an EtcdCluster.", []string{"namespace", "cluster"}, nil)
)

// ClusterCollector reports every EtcdCluster's state at scrape time, read from the manager's
// cache: no API request, and no series left behind by a deleted cluster.
type ClusterCollector struct {
	Reader client.Reader
	Log    logr.Logger
}

// Describe sends the descriptors of the cluster gauges.
func (c *ClusterCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{conditionDesc, infoDesc, membersDesc, desiredDesc} {
		ch <- d
	}
}

// Collect lists the EtcdClusters and sends their gauges.
func (c *ClusterCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var list etcdv1.EtcdClusterList
	if err := c.Reader.List(ctx, &list); err != nil {
		c.Log.Error(err, "listing EtcdClusters for metrics")
		return
	}
	for i := range list.Items {
		collectCluster(ch, &list.Items[i])
	}
}

func collectCluster(ch chan<- prometheus.Metric, ec *etcdv1.EtcdCluster) {
	ns, name := ec.Namespace, ec.Name
	for _, cond := range ec.Status.Conditions {
		value := 0.0
		if cond.Status == metav1.ConditionTrue {
			value = 1
		}
		ch <- prometheus.MustNewConstMetric(conditionDesc, prometheus.GaugeValue, value, ns, name, cond.Type)
	}
	ch <- prometheus.MustNewConstMetric(infoDesc, prometheus.GaugeValue, 1, ns, name, ec.Spec.Version, Phase(ec))
	for key, n := range memberCounts(ec) {
		ch <- prometheus.MustNewConstMetric(membersDesc, prometheus.GaugeValue, float64(n), ns, name, key[0], key[1])
	}
	desired := int32(3)
	if ec.Spec.Replicas != nil {
		desired = *ec.Spec.Replicas
	}
	ch <- prometheus.MustNewConstMetric(desiredDesc, prometheus.GaugeValue, float64(desired), ns, name)
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
