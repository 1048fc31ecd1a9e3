package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

func TestCacheOptions(t *testing.T) {
	all := cacheOptions(options{})
	if all.DefaultNamespaces != nil {
		t.Errorf("no --watch-namespaces: DefaultNamespaces = %v, want all namespaces", all.DefaultNamespaces)
	}
	some := cacheOptions(options{watchNamespaces: "team-a, team-b,"})
	if len(some.DefaultNamespaces) != 2 {
		t.Errorf("--watch-namespaces=team-a,team-b: DefaultNamespaces = %v", some.DefaultNamespaces)
	}
	for _, ns := range []string{"team-a", "team-b"} {
		if _, ok := some.DefaultNamespaces[ns]; !ok {
			t.Errorf("%s not watched", ns)
		}
	}
	var pods labels.Selector
	for obj, by := range all.ByObject {
		if _, ok := obj.(*corev1.Pod); ok {
			pods = by.Label
		}
	}
	if pods == nil {
		t.Fatal("Pods are cached without a label selector")
	}
	if !pods.Matches(labels.Set{"app.kubernetes.io/managed-by": "etcd-operator"}) || pods.Matches(labels.Set{"app": "unrelated"}) {
		t.Errorf("the Pod cache selects %s: want the operator's managed-by label", pods)
	}
	if len(all.ByObject) != 5 {
		t.Errorf("ByObject scopes %d kinds, want Pods, PVCs, Services, PDBs and Deployments", len(all.ByObject))
	}
}

// Secrets are never served from the cache: it would hold every Secret of the watched
// namespaces, data included.
func TestSecretsAreReadLive(t *testing.T) {
	opts := clientOptions()
	if opts.Cache == nil {
		t.Fatal("no client cache options: Secrets would be cached")
	}
	for _, obj := range opts.Cache.DisableFor {
		if _, ok := obj.(*corev1.Secret); ok {
			return
		}
	}
	t.Errorf("Secrets are not in the client's DisableFor (%v): the cache would hold them all", opts.Cache.DisableFor)
}

// A Secret made with kubectl's client-side apply carries its whole self, data included, in
// the last-applied-configuration annotation: the metadata the cluster controller's Secret
// watch caches must not keep it. Full objects keep their annotations (the operator updates
// some of them), and nothing keeps managedFields.
func TestTheCacheKeepsNoSecretInAnnotations(t *testing.T) {
	const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"
	managed := []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
	secret := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "root", ResourceVersion: "7",
		Annotations: map[string]string{lastApplied: `{"data":{"password":"c2VjcmV0"}}`}, ManagedFields: managed}}
	secret.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	if _, err := stripForCache(secret); err != nil {
		t.Fatal(err)
	}
	if len(secret.Annotations) != 0 || secret.ManagedFields != nil || secret.Name != "root" || secret.ResourceVersion != "7" {
		t.Errorf("cached Secret metadata %+v: want its name and resourceVersion only", secret.ObjectMeta)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "db-1", Annotations: map[string]string{"a": "b"}, ManagedFields: managed}}
	if _, err := stripForCache(pod); err != nil {
		t.Fatal(err)
	}
	if pod.Annotations["a"] != "b" || pod.ManagedFields != nil {
		t.Errorf("cached Pod %+v: want its annotations without managedFields", pod.ObjectMeta)
	}
	if cacheOptions(options{}).DefaultTransform == nil {
		t.Error("the cache has no transform")
	}
}

// Lease timings client-go would refuse, or that let a standby take over before the leader
// stepped down, are refused at start with the flag to change.
func TestLeaseTimes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		times leaseTimes
		flag  string // "" when valid
	}{
		{"the defaults", leaseTimes{15 * time.Second, 10 * time.Second, 2 * time.Second}, ""},
		{"short, for tests", leaseTimes{5 * time.Second, 4 * time.Second, time.Second}, ""},
		{"no retry period", leaseTimes{15 * time.Second, 10 * time.Second, 0}, "--leader-elect-retry-period"},
		{"no retry fits the deadline", leaseTimes{15 * time.Second, 2 * time.Second, 2 * time.Second}, "--leader-elect-renew-deadline"},
		{"jitter leaves no retry", leaseTimes{15 * time.Second, 2300 * time.Millisecond, 2 * time.Second}, "--leader-elect-renew-deadline"},
		{"a standby could take over a leader still renewing", leaseTimes{10 * time.Second, 10 * time.Second, 2 * time.Second}, "--leader-elect-lease-duration"},
	} {
		err := tc.times.validate()
		switch {
		case tc.flag == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.flag != "" && (err == nil || !strings.Contains(err.Error(), tc.flag)):
			t.Errorf("%s: %v, want an error naming %s", tc.name, err, tc.flag)
		}
	}
}

// The operator's name in claims is its Lease: --leader-election-namespace (else its own
// namespace) and --leader-election-id; the namespaces it publishes are --watch-namespaces'.
func TestClaimIdentityAndWatchedNamespaces(t *testing.T) {
	o := options{leaderElectNS: "shard-b", leaderElectID: "etcd-operator-b", watchNamespaces: " team-a,team-b ,"}
	if got := o.leaseNamespace() + "/" + o.leaderElectID; got != "shard-b/etcd-operator-b" {
		t.Errorf("identity %q", got)
	}
	if got := strings.Join(o.watched(), ","); got != "team-a,team-b" {
		t.Errorf("watched %q", got)
	}
	if got := (options{}).watched(); got != nil {
		t.Errorf("no --watch-namespaces: watched %v, want none (all)", got)
	}
}

// --cluster-selector: empty selects every cluster (nil); a selector that does not parse is
// refused at start with the flag's name and the parse error.
func TestClusterSelector(t *testing.T) {
	for _, tc := range []struct {
		flag    string
		matches labels.Set // nil when invalid
		not     labels.Set
	}{
		{"", labels.Set{}, nil},
		{"  ", labels.Set{}, nil},
		{"shard=a", labels.Set{"shard": "a"}, labels.Set{"shard": "b"}},
		{"tier in (gold,silver),!legacy", labels.Set{"tier": "gold"}, labels.Set{"tier": "gold", "legacy": "y"}},
		{"tier in (gold", nil, nil},
		{"shard==a=b", nil, nil},
		{"-shard=a", nil, nil},
	} {
		sel, err := options{clusterSelector: tc.flag}.selector()
		switch {
		case tc.matches == nil:
			if err == nil || !strings.Contains(err.Error(), "--cluster-selector") || !strings.Contains(err.Error(), tc.flag) {
				t.Errorf("%q: %v, want an error naming --cluster-selector and the value", tc.flag, err)
			}
		case err != nil:
			t.Errorf("%q: %v", tc.flag, err)
		case strings.TrimSpace(tc.flag) == "" && sel != nil:
			t.Errorf("%q: selector %v, want none (all clusters)", tc.flag, sel)
		case sel != nil && (!sel.Matches(tc.matches) || sel.Matches(tc.not)):
			t.Errorf("%q: selector %s matches %v and not %v wrongly", tc.flag, sel, tc.matches, tc.not)
		}
	}
}

// Every controller's queue is first in, first out (controllerOptions says why).
func TestControllersUseAFairQueue(t *testing.T) {
	if o := controllerOptions(); o.UsePriorityQueue == nil || *o.UsePriorityQueue {
		t.Fatalf("UsePriorityQueue %v: controller-runtime's priority queue starves the objects listed at start under a stream of events", o.UsePriorityQueue)
	}
}

// --metrics-cert-path reaches the metrics server, and a directory without the certificate or
// its key stops the operator at start instead of serving a self-signed one no scraper trusts.
func TestMetricsCertPath(t *testing.T) {
	if dir := metricsOptions(options{metricsCertPath: "/certs"}).CertDir; dir != "/certs" {
		t.Errorf("CertDir = %q, want --metrics-cert-path", dir)
	}
	full, keyless := t.TempDir(), t.TempDir()
	for dir, files := range map[string][]string{full: {"tls.crt", "tls.key"}, keyless: {"tls.crt"}} {
		for _, f := range files {
			if err := os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, c := range []struct {
		dir     string
		refused bool
	}{{"", false}, {full, false}, {keyless, true}, {filepath.Join(full, "missing"), true}} {
		if err := checkMetricsCert(c.dir); (err != nil) != c.refused {
			t.Errorf("checkMetricsCert(%q) = %v, want refused %v", c.dir, err, c.refused)
		}
	}
}
