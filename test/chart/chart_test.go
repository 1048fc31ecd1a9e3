// Package chart checks the Helm chart charts/etcd-operator with the helm binary that make
// test-chart builds from the module proxy (HELM): helm lint, and what helm template renders
// for the values people set.
package chart

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

const chartDir = "../../charts/etcd-operator"

// fullname is what the chart names the objects of the release "eo": <release>-etcd-operator.
const fullname = "eo-etcd-operator"

func helm(t *testing.T, args ...string) string {
	t.Helper()
	stdout, stderr, err := tryHelm(t, args...)
	if err != nil {
		t.Fatalf("helm %s: %v\n%s%s", strings.Join(args, " "), err, stdout, stderr)
	}
	return stdout
}

// tryHelm runs helm and returns what it wrote and how it ended.
func tryHelm(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	bin := os.Getenv("HELM")
	if bin == "" {
		t.Fatal("HELM is not set: run through 'make test-chart', which builds helm")
	}
	var out, errOut bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}

// templateArgs are helm template's arguments for the release "eo" in "operators" with --set values.
func templateArgs(chart string, sets ...string) []string {
	args := []string{"template", "eo", chart, "--namespace", "operators"}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	return args
}

// render runs helm template with --set values and returns the objects by "Kind/namespace/name".
func render(t *testing.T, sets ...string) map[string]*unstructured.Unstructured {
	t.Helper()
	return decode(helm(t, templateArgs(chartDir, sets...)...))
}

// decode reads helm template's output into objects by "Kind/namespace/name".
func decode(out string) map[string]*unstructured.Unstructured {
	objects := map[string]*unstructured.Unstructured{}
	decoder := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(out), 4096)
	for {
		obj := &unstructured.Unstructured{}
		if err := decoder.Decode(&obj.Object); err != nil {
			break
		}
		if len(obj.Object) == 0 {
			continue
		}
		objects[obj.GetKind()+"/"+obj.GetNamespace()+"/"+obj.GetName()] = obj
	}
	return objects
}

func keys(m map[string]*unstructured.Unstructured) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func mustGet(t *testing.T, objects map[string]*unstructured.Unstructured, key string) *unstructured.Unstructured {
	t.Helper()
	obj, ok := objects[key]
	if !ok {
		t.Fatalf("%s not rendered; rendered: %v", key, keys(objects))
	}
	return obj
}

func container(t *testing.T, objects map[string]*unstructured.Unstructured) map[string]any {
	t.Helper()
	ctrs, _, _ := unstructured.NestedSlice(mustGet(t, objects, "Deployment/operators/"+fullname).Object, "spec", "template", "spec", "containers")
	if len(ctrs) != 1 {
		t.Fatalf("containers = %v", ctrs)
	}
	return ctrs[0].(map[string]any)
}

func args(t *testing.T, objects map[string]*unstructured.Unstructured) []string {
	t.Helper()
	var out []string
	for _, a := range container(t, objects)["args"].([]any) {
		out = append(out, a.(string))
	}
	return out
}

// generatedRules reads the rules of a file controller-gen (or the repository) keeps in config/rbac.
func generatedRules(t *testing.T, file string) []any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("../../config/rbac", file))
	if err != nil {
		t.Fatal(err)
	}
	var role map[string]any
	if err := yaml.Unmarshal(data, &role); err != nil {
		t.Fatal(err)
	}
	return role["rules"].([]any)
}

func TestChartLints(t *testing.T) {
	helm(t, "lint", "--strict", chartDir)
	helm(t, "lint", "--strict", chartDir, "--set", "watchNamespaces={a,b}", "--set", "metrics.serviceMonitor.enabled=true",
		"--set", "metrics.certificate.certManager.enabled=true", "--set", "replicas=2", "--set", "fullnameOverride=eo",
		"--set", "serviceAccount.annotations.a=b", "--set", "podSecurityContext.runAsUser=null", "--set", "extraArgs={--zap-encoder=console}")
}

func TestDefaultsInstallClusterWideWithSecureMetrics(t *testing.T) {
	objects := render(t)
	for _, key := range []string{
		"ServiceAccount/operators/" + fullname, "ClusterRole//" + fullname + "-manager", "ClusterRoleBinding//" + fullname + "-manager",
		"Role/operators/" + fullname + "-leader-election", "RoleBinding/operators/" + fullname + "-leader-election",
		"ClusterRole//" + fullname + "-metrics-reader", "Service/operators/" + fullname + "-metrics",
	} {
		mustGet(t, objects, key)
	}
	for _, kind := range []string{"ServiceMonitor", "PodMonitor"} {
		for key := range objects {
			if strings.HasPrefix(key, kind+"/") {
				t.Errorf("%s rendered though not enabled", key)
			}
		}
	}
	got := args(t, objects)
	for _, want := range []string{"--leader-elect=true", "--leader-election-id=etcd-operator.cozystack.io", "--metrics-secure=true", "--metrics-bind-address=:8443", "--zap-log-level=info"} {
		if !slices.Contains(got, want) {
			t.Errorf("args %v lack %s", got, want)
		}
	}
	for _, a := range got {
		if strings.HasPrefix(a, "--cluster-selector") || strings.HasPrefix(a, "--watch-namespaces") {
			t.Errorf("args %v: %s by default, want every cluster of every namespace", got, a)
		}
	}
	if image := container(t, objects)["image"]; image != "ghcr.io/quorumkeeper/etcd-operator:v0.3.0" {
		t.Errorf("image = %v, want the repository at the chart's appVersion", image)
	}
	rules, _, _ := unstructured.NestedSlice(mustGet(t, objects, "ClusterRole//"+fullname+"-manager").Object, "rules")
	if !reflect.DeepEqual(rules, generatedRules(t, "role.yaml")) {
		t.Errorf("the chart's manager rules differ from config/rbac/role.yaml: run make chart-sync")
	}
	rules, _, _ = unstructured.NestedSlice(mustGet(t, objects, "ClusterRole//"+fullname+"-metrics-reader").Object, "rules")
	if !reflect.DeepEqual(rules, generatedRules(t, "metrics_reader_role.yaml")) {
		t.Errorf("the chart's metrics-reader rules differ from config/rbac")
	}
}

func TestWatchNamespacesUseRoles(t *testing.T) {
	objects := render(t, "watchNamespaces={team-a,team-b}")
	if _, ok := objects["ClusterRole//"+fullname+"-manager"]; ok {
		t.Error("a cluster-wide manager ClusterRole is rendered with watchNamespaces set")
	}
	for _, ns := range []string{"team-a", "team-b"} {
		mustGet(t, objects, "Role/"+ns+"/"+fullname+"-manager")
		mustGet(t, objects, "RoleBinding/"+ns+"/"+fullname+"-manager")
	}
	rules, _, _ := unstructured.NestedSlice(mustGet(t, objects, "ClusterRole//"+fullname+"-manager-cluster-scoped").Object, "rules")
	var resources []string
	for _, r := range rules {
		for _, res := range r.(map[string]any)["resources"].([]any) {
			resources = append(resources, res.(string))
		}
	}
	for _, namespaced := range []string{"pods", "secrets", "etcdclusters"} {
		if slices.Contains(resources, namespaced) {
			t.Errorf("the cluster-scoped ClusterRole grants %s cluster-wide: %v", namespaced, resources)
		}
	}
	for _, res := range resources {
		if !slices.Contains([]string{"storageclasses", "clusterissuers", "tokenreviews", "subjectaccessreviews", "nodes", "persistentvolumes", "leases"}, res) {
			t.Errorf("the cluster-scoped ClusterRole grants the namespaced %s cluster-wide: %v", res, resources)
		}
	}
	checkLeasesReadOnly(t, rules)
	for _, want := range []string{"storageclasses", "tokenreviews", "nodes", "persistentvolumes", "leases"} {
		if !slices.Contains(resources, want) {
			t.Errorf("the cluster-scoped ClusterRole lacks %s: %v", want, resources)
		}
	}
	if !slices.Contains(args(t, objects), "--watch-namespaces=team-a,team-b") {
		t.Errorf("args %v lack --watch-namespaces", args(t, objects))
	}
}

// checkLeasesReadOnly: the one namespaced kind a shard gets cluster-wide is Leases, to read
// the leader election Lease of the operator claiming a cluster (docs/scaling.md), and only get.
func checkLeasesReadOnly(t *testing.T, rules []any) {
	t.Helper()
	for _, r := range rules {
		rule := r.(map[string]any)
		if slices.Contains(rule["resources"].([]any), any("leases")) && !reflect.DeepEqual(rule["verbs"], []any{"get"}) {
			t.Errorf("the cluster-scoped ClusterRole grants %v on leases cluster-wide, want get only", rule["verbs"])
		}
	}
}

func TestValuesReachTheObjects(t *testing.T) {
	objects := render(t,
		"image.tag=v9.9.9", "replicas=2", "leaderElection.enabled=false", "logLevel=debug",
		"extraLabels.team=storage", "etcdImageRepository=mirror.example/etcd",
		"metrics.serviceMonitor.enabled=true", "metrics.certificate.certManager.enabled=true", "metrics.podMonitor.enabled=true",
		"resources.limits.memory=512Mi", "leaderElection.id=shard-b", "clusterSelector=shard=b",
	)
	deploy := mustGet(t, objects, "Deployment/operators/"+fullname)
	// The decoder reads numbers as JSON does (float64): compare their text.
	if replicas, _, _ := unstructured.NestedFieldNoCopy(deploy.Object, "spec", "replicas"); fmt.Sprint(replicas) != "2" {
		t.Errorf("replicas = %v", replicas)
	}
	got := args(t, objects)
	// The agents run from the operator's own image: without the flag the operator would look
	// for POD_NAME and POD_NAMESPACE, which the chart does not set, and stop.
	for _, want := range []string{"--leader-elect=false", "--leader-election-id=shard-b", "--zap-log-level=debug", "--etcd-image-repository=mirror.example/etcd",
		"--cluster-selector=shard=b",
		"--agent-image=ghcr.io/quorumkeeper/etcd-operator:v9.9.9"} {
		if !slices.Contains(got, want) {
			t.Errorf("args %v lack %s", got, want)
		}
	}
	if image := container(t, objects)["image"]; image != "ghcr.io/quorumkeeper/etcd-operator:v9.9.9" {
		t.Errorf("image = %v", image)
	}
	if mem, _, _ := unstructured.NestedString(container(t, objects), "resources", "limits", "memory"); mem != "512Mi" {
		t.Errorf("memory limit = %q", mem)
	}
	for _, key := range []string{"Deployment/operators/" + fullname, "ServiceMonitor/operators/" + fullname, "PodMonitor/operators/" + fullname + "-members", "ClusterRole//" + fullname + "-manager"} {
		if mustGet(t, objects, key).GetLabels()["team"] != "storage" {
			t.Errorf("%s lacks the extra label", key)
		}
	}
	podLabels, _, _ := unstructured.NestedStringMap(deploy.Object, "spec", "template", "metadata", "labels")
	if podLabels["team"] != "storage" {
		t.Errorf("the operator's Pods lack the extra label: %v", podLabels)
	}
	// The operator's series label each EtcdCluster's namespace "namespace"; without
	// honorLabels Prometheus renames it exported_namespace and puts the operator's own there,
	// and the alerts and the dashboard, which group by namespace, mix clusters up.
	endpoints, _, _ := unstructured.NestedSlice(mustGet(t, objects, "ServiceMonitor/operators/"+fullname).Object, "spec", "endpoints")
	if len(endpoints) != 1 || endpoints[0].(map[string]any)["honorLabels"] != true {
		t.Errorf("ServiceMonitor endpoints = %v, want one with honorLabels: true", endpoints)
	}
	port, _, _ := unstructured.NestedSlice(mustGet(t, objects, "PodMonitor/operators/"+fullname+"-members").Object, "spec", "podMetricsEndpoints")
	if len(port) != 1 || port[0].(map[string]any)["port"] != "metrics" {
		t.Errorf("PodMonitor endpoints = %v, want the members' metrics port", port)
	}
}

// The chart's CRDs are the generated ones, byte for byte (make chart-sync copies them).
func TestCRDsAreTheGeneratedOnes(t *testing.T) {
	generated, err := filepath.Glob("../../config/crd/bases/*.yaml")
	if err != nil || len(generated) == 0 {
		t.Fatalf("no generated CRDs: %v", err)
	}
	inChart, _ := filepath.Glob(chartDir + "/crds/*.yaml")
	if len(inChart) != len(generated) {
		t.Errorf("the chart has %d CRDs, config/crd/bases %d: run make chart-sync", len(inChart), len(generated))
	}
	for _, g := range generated {
		want, _ := os.ReadFile(g)
		got, err := os.ReadFile(filepath.Join(chartDir, "crds", filepath.Base(g)))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s differs from the chart's copy: run make chart-sync", g)
		}
	}
	out := helm(t, "template", "eo", chartDir, "--include-crds")
	if n := strings.Count(out, "kind: CustomResourceDefinition"); n != len(generated) {
		t.Errorf("helm template --include-crds renders %d CRDs, want %d", n, len(generated))
	}
}

// The dashboard and alert rules of deploy/monitoring ship in the chart when asked for.
func TestMonitoringObjects(t *testing.T) {
	if objects := render(t); objects["PrometheusRule/operators/"+fullname] != nil || objects["ConfigMap/operators/"+fullname+"-dashboard"] != nil {
		t.Error("monitoring objects rendered though not enabled")
	}
	objects := render(t, "monitoring.grafanaDashboard.enabled=true", "monitoring.prometheusRule.enabled=true")
	dashboard, _, _ := unstructured.NestedString(mustGet(t, objects, "ConfigMap/operators/"+fullname+"-dashboard").Object, "data", "etcd-operator.json")
	want, err := os.ReadFile("../../deploy/monitoring/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(dashboard) != strings.TrimSpace(string(want)) {
		t.Error("the dashboard ConfigMap differs from deploy/monitoring/grafana-dashboard.json: run make chart-sync")
	}
	groups, _, _ := unstructured.NestedSlice(mustGet(t, objects, "PrometheusRule/operators/"+fullname).Object, "spec", "groups")
	data, err := os.ReadFile("../../deploy/monitoring/prometheus-rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var rules map[string]any
	if err := yaml.Unmarshal(data, &rules); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(groups) != fmt.Sprint(rules["groups"]) {
		t.Error("the PrometheusRule's groups differ from deploy/monitoring/prometheus-rules.yaml: run make chart-sync")
	}
}

// docs/install.md states the operator's RBAC: every resource the generated role names has a
// row there, so a permission added in the code is not installed unannounced.
func TestInstallDocNamesEveryGrantedResource(t *testing.T) {
	doc, err := os.ReadFile("../../docs/install.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(doc), "## What the operator may do (RBAC)")
	section, _, _ = strings.Cut(section, "\n## ")
	for _, rule := range generatedRules(t, "role.yaml") {
		for _, res := range rule.(map[string]any)["resources"].([]any) {
			name, _, _ := strings.Cut(res.(string), "/") // status and finalizers: "their status and finalizers"
			if !strings.Contains(section, name) {
				t.Errorf("config/rbac/role.yaml grants %s, which the RBAC section of docs/install.md does not name", res)
			}
		}
	}
}
