package snapshotstore

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/agent/request"
	"github.com/quorumkeeper/etcd-operator/internal/testetcd"
	"github.com/quorumkeeper/etcd-operator/internal/testminio"
)

// TestChooseCredentials: the environment of a Pod selects the source the AWS SDKs would, in
// their order; given keys win over everything.
func TestChooseCredentials(t *testing.T) {
	keys := map[string]string{request.EnvAWSAccessKeyID: "AKID", request.EnvAWSSecretAccessKey: "secret", EnvSessionToken: "tok"}
	irsa := map[string]string{EnvWebIdentityTokenFile: "/var/run/secrets/eks.amazonaws.com/serviceaccount/token", EnvRoleARN: "arn:aws:iam::1:role/r"}
	ecs := map[string]string{EnvContainerRelativeURI: "/v2/credentials/x"}
	podIdentity := map[string]string{EnvContainerFullURI: "http://169.254.170.23/v1/credentials"}
	merge := func(ms ...map[string]string) map[string]string {
		out := map[string]string{}
		for _, m := range ms {
			for k, v := range m {
				out[k] = v
			}
		}
		return out
	}
	for _, tc := range []struct {
		name string
		cfg  S3Config
		env  map[string]string
		want CredentialSource
	}{
		{"keys given", S3Config{AccessKeyID: "a", SecretKey: "b"}, merge(irsa, ecs), CredentialsStatic},
		{"one given key is none", S3Config{AccessKeyID: "a"}, irsa, CredentialsWebIdentity},
		{"keys in the environment (the credentials Secret)", S3Config{}, merge(keys, irsa), CredentialsStatic},
		{"only an access key id in the environment", S3Config{}, map[string]string{request.EnvAWSAccessKeyID: "AKID"}, CredentialsInstance},
		{"web identity before the container endpoint", S3Config{}, merge(irsa, ecs), CredentialsWebIdentity},
		{"ECS task role", S3Config{}, ecs, CredentialsContainer},
		{"EKS Pod Identity", S3Config{}, podIdentity, CredentialsContainer},
		{"nothing: the instance role", S3Config{}, nil, CredentialsInstance},
	} {
		got := ChooseCredentials(tc.cfg, func(k string) string { return tc.env[k] })
		if got.Source != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got.Source, tc.want)
		}
	}
	got := ChooseCredentials(S3Config{}, func(k string) string { return merge(keys, map[string]string{EnvSTSEndpoint: "x"})[k] })
	if got.AccessKeyID != "AKID" || got.SecretKey != "secret" || got.SessionToken != "tok" || strings.Contains(got.Detail, "secret") {
		t.Errorf("keys from the environment: %+v", got)
	}
	sts := ChooseCredentials(S3Config{}, func(k string) string { return merge(irsa, map[string]string{EnvSTSEndpoint: "https://sts.example"})[k] })
	if sts.STSEndpoint != "https://sts.example" || !strings.Contains(sts.Detail, "arn:aws:iam::1:role/r") {
		t.Errorf("web identity: %+v", sts)
	}
}

// oidcClientID is the audience MinIO's OpenID provider accepts.
const oidcClientID = "etcd-operator-test"

// oidcIssuer is a minimal OpenID provider: its discovery document and one RSA key, which
// signs the tokens it mints (as a cluster's ServiceAccount issuer signs projected tokens).
type oidcIssuer struct {
	srv *httptest.Server
	key *rsa.PrivateKey
}

func newOIDCIssuer(t *testing.T) *oidcIssuer {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	iss := &oidcIssuer{key: key}
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		base := iss.srv.URL
		_ = json.NewEncoder(w).Encode(map[string]any{
			"issuer": base, "jwks_uri": base + "/keys", "authorization_endpoint": base + "/auth", "token_endpoint": base + "/token",
			"response_types_supported": []string{"id_token"}, "subject_types_supported": []string{"public"},
			"id_token_signing_alg_values_supported": []string{"RS256"},
		})
	})
	mux.HandleFunc("/keys", func(w http.ResponseWriter, _ *http.Request) {
		b64 := base64.RawURLEncoding.EncodeToString
		_ = json.NewEncoder(w).Encode(map[string]any{"keys": []map[string]string{{
			"kty": "RSA", "kid": "k1", "use": "sig", "alg": "RS256",
			"n": b64(key.N.Bytes()), "e": b64(big.NewInt(int64(key.E)).Bytes()),
		}}})
	})
	iss.srv = httptest.NewServer(mux)
	t.Cleanup(iss.srv.Close)
	return iss
}

// token is a signed JWT for the audience with MinIO's policy claim, written to a file as the
// kubelet writes a projected ServiceAccount token.
func (iss *oidcIssuer) token(t *testing.T, audience string) string {
	t.Helper()
	enc := func(v any) string {
		data, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return base64.RawURLEncoding.EncodeToString(data)
	}
	now := time.Now()
	unsigned := enc(map[string]string{"alg": "RS256", "typ": "JWT", "kid": "k1"}) + "." + enc(map[string]any{
		"iss": iss.srv.URL, "sub": "system:serviceaccount:ns:etcd-backup", "aud": audience,
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix(), "policy": "readwrite",
	})
	digest := sha256.Sum256([]byte(unsigned))
	sig, err := rsa.SignPKCS1v15(rand.Reader, iss.key, crypto.SHA256, digest[:])
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte(unsigned+"."+base64.RawURLEncoding.EncodeToString(sig)), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// chainEnv clears the default chain's environment, then sets env: each case sees only its own.
func chainEnv(t *testing.T, env map[string]string) {
	t.Helper()
	for _, k := range []string{request.EnvAWSAccessKeyID, request.EnvAWSSecretAccessKey, EnvSessionToken, EnvWebIdentityTokenFile,
		EnvRoleARN, EnvSTSEndpoint, EnvContainerRelativeURI, EnvContainerFullURI, "AWS_REGION", "AWS_ROLE_SESSION_NAME"} {
		t.Setenv(k, env[k])
	}
}

// TestDefaultChainAgainstMinIO: without keys in the config, a real MinIO accepts the keys
// the environment holds and the keys MinIO's STS trades for a web identity token
// (AssumeRoleWithWebIdentity against a local OpenID provider, as IRSA does against AWS's
// STS); a token STS refuses, and a container endpoint that does not answer, fail with
// CredentialsUnavailable naming the source, not as a refused or unreachable store.
func TestDefaultChainAgainstMinIO(t *testing.T) {
	iss := newOIDCIssuer(t)
	srv := testminio.Start(t, testminio.Options{Env: []string{
		"MINIO_IDENTITY_OPENID_CONFIG_URL=" + iss.srv.URL + "/.well-known/openid-configuration",
		"MINIO_IDENTITY_OPENID_CLIENT_ID=" + oidcClientID, "MINIO_IDENTITY_OPENID_CLAIM_NAME=policy",
	}})
	bucket := srv.Bucket(t, "snapshots")
	noKeys := S3Config{Endpoint: srv.Endpoint, Bucket: bucket, Region: "us-east-1", ForcePathStyle: true}
	check := func(t *testing.T) error {
		t.Helper()
		return newS3Store(t, noKeys).CheckBucket(context.Background())
	}
	role := "arn:aws:iam::123456789012:role/etcd-backup" // MinIO's claim-based provider ignores it, as IRSA needs it
	t.Run("keys in the environment", func(t *testing.T) {
		chainEnv(t, map[string]string{request.EnvAWSAccessKeyID: testminio.AccessKey, request.EnvAWSSecretAccessKey: testminio.SecretKey})
		if err := check(t); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("web identity", func(t *testing.T) {
		chainEnv(t, map[string]string{EnvWebIdentityTokenFile: iss.token(t, oidcClientID), EnvRoleARN: role, EnvSTSEndpoint: srv.Endpoint})
		testWrite(t, newS3Store(t, noKeys))
	})
	t.Run("a token STS refuses", func(t *testing.T) {
		chainEnv(t, map[string]string{EnvWebIdentityTokenFile: iss.token(t, "another-audience"), EnvRoleARN: role, EnvSTSEndpoint: srv.Endpoint})
		err := check(t)
		if Reason(err) != etcdv1.ReasonCredentialsUnavailable || !strings.Contains(fmt.Sprint(err), string(CredentialsWebIdentity)) {
			t.Fatalf("%v: reason %s, want %s naming %s", err, Reason(err), etcdv1.ReasonCredentialsUnavailable, CredentialsWebIdentity)
		}
	})
	t.Run("a container endpoint that does not answer", func(t *testing.T) {
		chainEnv(t, map[string]string{EnvContainerFullURI: fmt.Sprintf("http://127.0.0.1:%d/creds", testetcd.FreePort(t))})
		err := check(t)
		if Reason(err) != etcdv1.ReasonCredentialsUnavailable || !strings.Contains(fmt.Sprint(err), string(CredentialsContainer)) {
			t.Fatalf("%v: reason %s, want %s naming %s", err, Reason(err), etcdv1.ReasonCredentialsUnavailable, CredentialsContainer)
		}
	})
}

// testWrite stores and reads back a small snapshot: the credentials may write, not only list.
func testWrite(t *testing.T, st *S3Store) {
	t.Helper()
	ctx := context.Background()
	if err := st.CheckBucket(ctx); err != nil {
		t.Fatal(err)
	}
	sum, err := writeAndCommit(t, st, "chain/one.db", fakeSnapshot(4096), "ns/one/uid")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := VerifyStored(ctx, st, "chain/one.db", sum); err != nil {
		t.Fatal(err)
	}
}
