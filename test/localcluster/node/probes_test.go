package node

import "testing"

// A probe path with a query keeps it as a query, as the kubelet's does.
func TestProbeURLKeepsTheQuery(t *testing.T) {
	for path, want := range map[string]string{
		"/readyz?serializable=false": "http://10.0.0.1:2381/readyz?serializable=false",
		"/health":                    "http://10.0.0.1:2381/health",
		"":                           "http://10.0.0.1:2381",
	} {
		if got := probeURL("http", "10.0.0.1:2381", path).String(); got != want {
			t.Errorf("path %q: %s, want %s", path, got, want)
		}
	}
}
