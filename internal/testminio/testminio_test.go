package testminio

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestStartWaitsForIAM: Start returns only once MinIO's IAM subsystem is up, which loads after
// S3 already answers; here it waits on an OpenID provider that fails its first second.
func TestStartWaitsForIAM(t *testing.T) {
	var up atomic.Bool
	time.AfterFunc(time.Second, func() { up.Store(true) })
	var provider *httptest.Server
	provider = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !up.Load() {
			http.Error(w, "not yet", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if strings.HasSuffix(r.URL.Path, "/jwks") {
			_, _ = w.Write([]byte(`{"keys":[]}`))
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"issuer": provider.URL, "jwks_uri": provider.URL + "/jwks",
			"authorization_endpoint": provider.URL + "/auth", "token_endpoint": provider.URL + "/token"})
	}))
	t.Cleanup(provider.Close)
	s := Start(t, Options{Env: []string{
		"MINIO_IDENTITY_OPENID_CONFIG_URL=" + provider.URL + "/.well-known/openid-configuration",
		"MINIO_IDENTITY_OPENID_CLIENT_ID=test", "MINIO_IDENTITY_OPENID_CLAIM_NAME=policy",
	}})
	cli := &http.Client{Transport: s.transport(t), Timeout: 5 * time.Second}
	if answer := stsAnswer(cli, s.Endpoint, stsProbe); answer == "" || strings.Contains(answer, iamNotInitialized) {
		t.Fatalf("STS right after Start answered %q", answer)
	}
}
