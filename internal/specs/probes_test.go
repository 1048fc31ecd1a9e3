package specs

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

// probeTarget says what a probe asks: "GET /path" or "TCP".
func probeTarget(p *corev1.Probe) string {
	switch {
	case p == nil:
		return "none"
	case p.HTTPGet != nil:
		if p.HTTPGet.Port.IntValue() != MetricsPort {
			return "GET on another port"
		}
		return "GET " + p.HTTPGet.Path
	case p.TCPSocket != nil:
		if p.TCPSocket.Port.IntValue() != MetricsPort {
			return "TCP on another port"
		}
		return "TCP"
	}
	return "other"
}

// etcd serves /livez and /readyz from 3.5.11 on; older patches get /health for readiness and
// a connection to the metrics port for startup and liveness.
func TestProbesFollowWhatTheVersionServes(t *testing.T) {
	tests := []struct {
		version                      string
		startup, liveness, readiness string
	}{
		{"3.5.0", "TCP", "TCP", "GET /health"},
		{"v3.5.10", "TCP", "TCP", "GET /health"},
		{"3.5.11", "GET /livez", "GET /livez", "GET /readyz"},
		{"3.5.35", "GET /livez", "GET /livez", "GET /readyz"},
		{"3.6.16", "GET /livez", "GET /livez", "GET /readyz"},
		{"3.7.3", "GET /livez", "GET /livez", "GET /readyz"},
	}
	for _, tt := range tests {
		t.Run(tt.version, func(t *testing.T) {
			c := cluster(func(c *etcdv1.EtcdCluster) { c.Spec.Version = tt.version })
			pod := Pod(c, member(c, "db-1"), PodOptions{})
			e := pod.Spec.Containers[0]
			if got := probeTarget(e.StartupProbe); got != tt.startup {
				t.Errorf("startup probe %s, want %s", got, tt.startup)
			}
			if got := probeTarget(e.LivenessProbe); got != tt.liveness {
				t.Errorf("liveness probe %s, want %s", got, tt.liveness)
			}
			if got := probeTarget(e.ReadinessProbe); got != tt.readiness {
				t.Errorf("readiness probe %s, want %s", got, tt.readiness)
			}
			if e.StartupProbe.FailureThreshold*e.StartupProbe.PeriodSeconds < 300 {
				t.Errorf("startup allows %d s, want 300", e.StartupProbe.FailureThreshold*e.StartupProbe.PeriodSeconds)
			}
		})
	}
}

// A version written with its leading v names the same image as without.
func TestImageOfAVersionWithLeadingV(t *testing.T) {
	for _, v := range []string{"3.5.21", "v3.5.21"} {
		if got := Image(DefaultImageRepository, v); got != "quay.io/coreos/etcd:v3.5.21" {
			t.Errorf("Image(%q) = %q", v, got)
		}
	}
}
