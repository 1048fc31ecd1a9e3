package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/plugin/convert"
)

// Every manifest in the shapes Cozystack's v1alpha2 API documents (testdata/cozystack) is
// accepted unchanged by the apiserver: a server-side dry-run create with strict field
// validation, as `kubectl apply --dry-run=server` does it.
func TestCozystackManifestsApply(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "cozystack", "*.yaml"))
	if err != nil || len(files) < 10 {
		t.Fatalf("want the Cozystack fixtures in testdata/cozystack, found %d (%v)", len(files), err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			dryRunCreate(t, data, strings.Count("\n"+string(data), "\napiVersion:"))
		})
	}
}

// dryRunCreate creates every object of a YAML stream in the test namespace with a
// server-side dry run and strict field validation (an unknown field is an error, not a
// warning), and fails unless all want objects are accepted.
func dryRunCreate(t *testing.T, data []byte, want int) {
	t.Helper()
	strict, err := client.New(restConfig, client.Options{Scheme: k8s.Scheme(), FieldValidation: "Strict"})
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	created := 0
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatal(err)
		}
		if len(obj.Object) == 0 {
			continue
		}
		obj.SetNamespace(ns)
		if err := strict.Create(t.Context(), obj, client.DryRunAll); err != nil {
			t.Fatalf("dry-run create of %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
		created++
	}
	if created != want {
		t.Fatalf("dry-ran %d of %d objects", created, want)
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
	dryRunCreate(t, manifest, 1)
	if !strings.Contains(string(manifest), "# NOTE: spec.storageSpec.volumeSizeLimit 20Gi") {
		t.Errorf("the converted manifest lacks its notes:\n%s", manifest)
	}
}
