package chart

import (
	"bytes"
	"encoding/json"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The prometheus-operator objects the chart renders are read into that project's own API
// types, refusing any field the types do not have: a misspelt or misplaced field would
// otherwise be pruned by the CRD's schema at install and the setting silently lost. (The
// local cluster has no prometheus-operator CRDs; cert-manager's Certificate is checked by a
// real apiserver in the e2e helm install.)
func TestMonitoringObjectsMatchPrometheusOperatorTypes(t *testing.T) {
	objects := render(t, "metrics.serviceMonitor.enabled=true", "metrics.certificate.certManager.enabled=true",
		"metrics.podMonitor.enabled=true", "monitoring.prometheusRule.enabled=true")
	for key, into := range map[string]any{
		"ServiceMonitor/operators/" + fullname:          &monitoringv1.ServiceMonitor{},
		"PodMonitor/operators/" + fullname + "-members": &monitoringv1.PodMonitor{},
		"PrometheusRule/operators/" + fullname:          &monitoringv1.PrometheusRule{},
	} {
		if err := decodeStrict(mustGet(t, objects, key), into); err != nil {
			t.Errorf("%s does not match prometheus-operator's API: %v", key, err)
		}
	}
}

func decodeStrict(obj *unstructured.Unstructured, into any) error {
	data, err := json.Marshal(obj.Object)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	return dec.Decode(into)
}
