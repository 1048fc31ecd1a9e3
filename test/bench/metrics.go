package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumkeeper/etcd-operator/test/operatormetrics"
	"github.com/quorumkeeper/etcd-operator/test/robustness"
)

const (
	operatorNamespace = operatormetrics.Namespace
	// The operator's metrics the bench reads.
	processStarted = "process_start_time_seconds"
	residentMemory = "process_resident_memory_bytes"
	heapInUse      = "go_memstats_heap_inuse_bytes"
	requestsTotal  = "rest_client_requests_total"
	reconcileTime  = "controller_runtime_reconcile_time_seconds"
	workqueueDepth = "workqueue_depth"
)

type families map[string]*dto.MetricFamily

func parseMetrics(r io.Reader) (families, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(r)
}

// sumBy adds up a metric's samples under the key their labels give; key "" leaves one out.
func (f families) sumBy(name string, key func(labels map[string]string) string) map[string]float64 {
	out := map[string]float64{}
	for _, m := range f[name].GetMetric() {
		if k := key(labels(m)); k != "" {
			out[k] += m.GetCounter().GetValue() + m.GetGauge().GetValue() + m.GetUntyped().GetValue()
		}
	}
	return out
}

func labels(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// value is a metric without labels, such as a process's memory.
func (f families) value(name string) float64 {
	return f.sumBy(name, func(map[string]string) string { return name })[name]
}

// grown is what the counters added between two scrapes, the unchanged ones left out.
func grown(before, after map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// operatorMetrics scrapes the operator's Pod directly (Pod IPs are reachable from the host)
// with a metrics reader's token. Each scrape may make the operator check the token with the
// API server (TokenReview, SubjectAccessReview: POSTs that store nothing); countWrites takes
// them out.
func (b *bench) operatorMetrics(ctx context.Context) (families, error) {
	pods := &corev1.PodList{}
	if err := b.k8s.List(ctx, pods, client.InNamespace(operatorNamespace),
		client.MatchingLabels{"app.kubernetes.io/name": "etcd-operator"}); err != nil {
		return nil, err
	}
	var ip string
	for i := range pods.Items {
		if p := &pods.Items[i]; robustness.PodReady(p) && p.DeletionTimestamp.IsZero() {
			if ip != "" {
				return nil, fmt.Errorf("more than one operator Pod in %s: its writes would be split", operatorNamespace)
			}
			ip = p.Status.PodIP
		}
	}
	if ip == "" {
		return nil, fmt.Errorf("no ready operator Pod in %s", operatorNamespace)
	}
	if b.metricsToken == "" {
		token, err := operatormetrics.Token(ctx, b.kube)
		if err != nil {
			return nil, err
		}
		b.metricsToken = token
	}
	status, body, err := operatormetrics.Get(ctx, ip, b.metricsToken)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("operator metrics: HTTP %d: %s", status, body)
	}
	return parseMetrics(bytes.NewReader(body))
}

// apiserverMetrics are the apiserver's own counters: they see every client's requests.
func (b *bench) apiserverMetrics(ctx context.Context) (families, error) {
	raw, err := b.kube.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("apiserver metrics: %w", err)
	}
	return parseMetrics(bytes.NewReader(raw))
}

// operatorRequests are all the operator's API requests by HTTP method, reads included, from
// client-go's counter.
func operatorRequests(f families) map[string]float64 {
	return f.sumBy(requestsTotal, func(l map[string]string) string { return l["method"] })
}

// operatorWrites are the operator's write requests by HTTP method, from client-go's counter.
func operatorWrites(f families) map[string]float64 {
	return f.sumBy(requestsTotal, func(l map[string]string) string {
		switch l["method"] {
		case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
			return l["method"]
		}
		return ""
	})
}

// apiserverWrites are every client's write requests by verb and resource, except Leases and
// Nodes: every component's heartbeats, which say nothing about the operator.
func apiserverWrites(f families) map[string]float64 {
	return f.sumBy("apiserver_request_total", func(l map[string]string) string {
		switch l["verb"] {
		case "POST", "PUT", "PATCH", "APPLY", "DELETE", "DELETECOLLECTION":
		default:
			return ""
		}
		switch l["resource"] {
		case "leases", "nodes", "tokenreviews", "subjectaccessreviews":
			return "" // heartbeats, and the metrics endpoint's reviews of the bench's scrapes
		}
		resource := l["resource"]
		if l["group"] != "" {
			resource = l["group"] + "/" + resource
		}
		if l["subresource"] != "" {
			resource += "/" + l["subresource"]
		}
		return l["verb"] + " " + resource
	})
}

// reviews counts the TokenReviews and SubjectAccessReviews the API server answered: only the
// operator's metrics endpoint makes them here, checking the bench's own scrapes.
func reviews(f families) float64 {
	return f.sumBy("apiserver_request_total", func(l map[string]string) string {
		if l["verb"] == "POST" && (l["resource"] == "tokenreviews" || l["resource"] == "subjectaccessreviews") {
			return "reviews"
		}
		return ""
	})["reviews"]
}
