package etcd

// The HTTP health endpoints the operator's probes use, against a real etcd of every release.

import (
	"fmt"
	"net/http"
	"testing"
)

// Every release serves /health on its metrics URL; /livez and /readyz exist exactly where
// etcdversion's HasLivezReadyz says (3.5.11 and newer), and older ones answer 404: the probes
// the operator writes for a release must use what that release serves.
func TestHealthEndpointsAsTheFactsSay(t *testing.T) {
	t.Parallel()
	forEachRelease(t, testHealthEndpointsAsTheFactsSay)
}

func testHealthEndpointsAsTheFactsSay(t *testing.T, r release) {
	metrics := fmt.Sprintf("http://127.0.0.1:%d", freePort(t))
	m := newMemberSpecOn(t, r, "probe", "http", "--listen-metrics-urls", metrics)
	m.start(t, initialCluster([]*etcdMember{m}), "new", "token-"+t.Name())
	waitForLeader(t, newTestClient(t, Config{Endpoints: []string{m.clientURL}}), m.clientURL)

	want := map[string]int{"/health": http.StatusOK, "/livez": http.StatusNotFound, "/readyz": http.StatusNotFound}
	if r.version.HasLivezReadyz() {
		want["/livez"], want["/readyz"] = http.StatusOK, http.StatusOK
	}
	for path, code := range want {
		req, err := http.NewRequestWithContext(shortContext(t), http.MethodGet, metrics+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("GET %s of etcd %s: %v", path, r.version, err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != code {
			t.Errorf("GET %s of etcd %s: %d; want %d", path, r.version, resp.StatusCode, code)
		}
	}
}
