package api

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/plugin/convert"
)

// Every manifest in the shapes Cozystack's v1alpha2 API documents (testdata/cozystack) is
// accepted unchanged by the apiserver, as `kubectl apply --dry-run=server` sees it.
func TestCozystackManifestsApply(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "cozystack", "*.yaml"))
	if err != nil || len(files) < 10 {
		t.Fatalf("want the Cozystack fixtures in testdata/cozystack, found %d (%v)", len(files), err)
	}
	kubectl := filepath.Join(assetsDir, "kubectl")
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			objects := strings.Count("\n"+string(data), "\napiVersion:")
			out, err := exec.CommandContext(t.Context(), kubectl, "--kubeconfig", kubeconfig, "apply",
				"--dry-run=server", "--validate=strict", "-n", ns, "-f", file).CombinedOutput()
			if err != nil {
				t.Fatalf("kubectl apply --dry-run=server -f %s: %v\n%s", file, err, out)
			}
			if got := strings.Count(string(out), "(server dry run)"); got != objects {
				t.Fatalf("kubectl dry-ran %d of %d objects:\n%s", got, objects, out)
			}
		})
	}
}

// The status fields Cozystack's operator and tooling write (observed, progressDeadline,
// brokenMembers) are kept by the apiserver, not pruned, so a status patch written for that
// operator means what it says when read back.
func TestCozystackStatusFieldsAreKept(t *testing.T) {
	c := newCluster("cozy-status")
	requireCreate(t, c)
	patch := []byte(`{"status":{"brokenMembers":1,"progressDeadline":"2026-06-02T10:00:00Z",` +
		`"observed":{"replicas":3,"version":"3.6.11","storage":{"size":"1Gi","medium":""}}}}`)
	if err := k8s.Status().Patch(t.Context(), c, client.RawPatch("application/merge-patch+json", patch)); err != nil {
		t.Fatal(err)
	}
	got := &etcdv1.EtcdCluster{}
	if err := k8s.Get(t.Context(), client.ObjectKeyFromObject(c), got); err != nil {
		t.Fatal(err)
	}
	s := got.Status
	if s.BrokenMembers != 1 || s.ProgressDeadline == nil || s.ProgressDeadline.UTC().Format("2006-01-02T15:04:05Z") != "2026-06-02T10:00:00Z" {
		t.Fatalf("brokenMembers %d, progressDeadline %v; want 1 and 2026-06-02T10:00:00Z", s.BrokenMembers, s.ProgressDeadline)
	}
	var observed map[string]any
	if s.Observed == nil {
		t.Fatal("status.observed was pruned")
	}
	if err := json.Unmarshal(s.Observed.Raw, &observed); err != nil || observed["version"] != "3.6.11" || observed["replicas"] != float64(3) {
		t.Fatalf("status.observed = %s (%v); want replicas 3, version 3.6.11", s.Observed.Raw, err)
	}
}

// The official etcd operator's guide cluster (operator.etcd.io/v1alpha1), converted by
// `kubectl etcd convert`, is accepted by the apiserver as it is printed.
func TestConvertedGuideClusterApplies(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "operator-etcd-io", "guide-cluster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	results, err := convert.Manifests(f)
	if err != nil {
		t.Fatal(err)
	}
	manifest, err := convert.YAML(results)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), filepath.Join(assetsDir, "kubectl"), "--kubeconfig", kubeconfig, "apply",
		"--dry-run=server", "--validate=strict", "-n", ns, "-f", "-")
	cmd.Stdin = strings.NewReader(strings.ReplaceAll(string(manifest), "namespace: cpaas-system", "namespace: "+ns))
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "etcdcluster.etcd-operator.cozystack.io/etcd-main created (server dry run)") {
		t.Fatalf("kubectl apply --dry-run=server of the converted manifest: %v\n%s\n%s", err, out, manifest)
	}
}
