package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumkeeper/etcd-operator/internal/metrics"
	"github.com/quorumkeeper/etcd-operator/test/operatormetrics"
)

// The operator's metrics are served over HTTPS to a metrics reader's token only, and its own
// series follow a scale from 1 to 3 members.
func TestMetricsAreSecureAndFollowAScale(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ip := operatorPodIP(t)
	// Without a token: 401. A token the API server does not know: controller-runtime's filter
	// answers 500 "Authentication failed" (the TokenReview reports an error, not a plain no).
	// Either way no metric is served.
	refusals := []struct {
		name, token string
		want        int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"a made-up token", "not-a-token", http.StatusInternalServerError},
	}
	for _, r := range refusals {
		status, body, err := operatormetrics.Get(ctx, ip, r.token)
		if err != nil {
			t.Fatalf("scrape with %s: %v", r.name, err)
		}
		if status != r.want || bytes.Contains(body, []byte(metrics.MembersName)) {
			t.Errorf("scrape with %s: HTTP %d, want %d and no metrics; body starts %.80q", r.name, status, r.want, body)
		}
	}
	token, err := operatormetrics.Token(ctx, kubeClientset(t))
	if err != nil {
		t.Fatal(err)
	}
	ns := namespace(t)
	createCluster(t, ns, "metrics", 1)
	waitSettled(t, ns, "metrics", 1, 3*time.Minute)
	before := scrapeOperator(t, ip, token)
	setReplicas(t, ns, "metrics", 3)
	waitSettled(t, ns, "metrics", 3, 5*time.Minute)
	var after map[string]*dto.MetricFamily
	// The scrape reads the operator's cache, which may lag the status just read by a moment.
	eventually(t, 30*time.Second, "metrics show 3 ready voters", func() error {
		after = scrapeOperator(t, ip, token)
		if got := sample(after, metrics.MembersName, map[string]string{"namespace": ns, "cluster": "metrics", "role": "Voter", "ready": "true"}); got != 3 {
			return fmt.Errorf("ready voters = %v", got)
		}
		return nil
	})
	cluster := map[string]string{"namespace": ns, "cluster": "metrics"}
	// The membership counters have no cluster label (one series per kind and result): tests
	// running alongside this one add members too, so the scale's two are a floor.
	atLeast := func(what string, got, want float64) {
		if got < want {
			t.Errorf("%s: %v, want at least %v", what, got, want)
		}
	}
	atLeast("members added by the scale", delta(before, after, metrics.MembershipChangesName, map[string]string{"kind": "add", "result": "success"}), 2)
	atLeast("members promoted by the scale", delta(before, after, metrics.MembershipChangesName, map[string]string{"kind": "promote", "result": "success"}), 2)
	checks := []struct {
		what string
		got  float64
		want float64
	}{
		{"learners", sample(after, metrics.MembersName, map[string]string{"namespace": ns, "cluster": "metrics", "role": "Learner"}), 0},
		{"desired members", sample(after, metrics.MembersDesiredName, cluster), 3},
		{"Available phase", sample(after, metrics.ClusterInfoName, map[string]string{"namespace": ns, "cluster": "metrics", "phase": "Available"}), 1},
		{"Available condition", sample(after, metrics.ClusterConditionName, map[string]string{"namespace": ns, "cluster": "metrics", "condition": "Available"}), 1},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", c.what, c.got, c.want)
		}
	}
	if n := after[metrics.TimeToAvailableName].GetMetric(); len(n) == 0 || n[0].GetHistogram().GetSampleCount() == 0 {
		t.Errorf("%s has no sample after a cluster became Available", metrics.TimeToAvailableName)
	}
}

func kubeClientset(t *testing.T) kubernetes.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	if err != nil {
		t.Fatal(err)
	}
	return kubernetes.NewForConfigOrDie(cfg)
}

func operatorPodIP(t *testing.T) string {
	t.Helper()
	return operatorPodIPIn(t, operatormetrics.Namespace)
}

// operatorPodIPIn is the address of a running operator Pod in namespace.
func operatorPodIPIn(t *testing.T, namespace string) string {
	t.Helper()
	pods := &corev1.PodList{}
	if err := k8s.List(context.Background(), pods, client.InNamespace(namespace),
		client.MatchingLabels{"app.kubernetes.io/name": "etcd-operator"}); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp.IsZero() && p.Status.PodIP != "" && p.Status.Phase == corev1.PodRunning {
			return p.Status.PodIP
		}
	}
	t.Fatalf("no running operator Pod in %s", namespace)
	return ""
}

func scrapeOperator(t *testing.T, ip, token string) map[string]*dto.MetricFamily {
	t.Helper()
	status, body, err := operatormetrics.Get(context.Background(), ip, token)
	if err != nil || status != http.StatusOK {
		t.Fatalf("scrape with a metrics reader's token: HTTP %d, %v: %.200s", status, err, body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return families
}

// sample sums the family's samples whose labels include want.
func sample(families map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	var sum float64
	for _, m := range families[name].GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		match := true
		for k, v := range want {
			match = match && labels[k] == v
		}
		if match {
			sum += m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	return sum
}

func delta(before, after map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	return sample(after, name, want) - sample(before, name, want)
}
