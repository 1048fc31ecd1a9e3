package chart

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The values schema refuses a typo'd key, at the top and deep inside a Kubernetes object, and a
// value of the wrong type, with helm's own error: helm install stops before anything is made.
func TestSchemaRefusesTyposAndWrongTypes(t *testing.T) {
	cases := []struct{ set, want string }{
		{"image.tga=v1", "at '/image': additional properties 'tga' not allowed"},
		{"fullnameOverrid=x", "additional properties 'fullnameOverrid' not allowed"},
		{"serviceAccount.annotation.a=b", "at '/serviceAccount': additional properties 'annotation' not allowed"},
		{"affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].keyy=a",
			"matchExpressions/0': additional properties 'keyy' not allowed"},
		{"extraEnv[0].name=A", ""},
		{"extraEnv[0].valu=b", "at '/extraEnv/0': additional properties 'valu' not allowed"},
		{"podSecurityContext.runAsUsr=1000", "at '/podSecurityContext': additional properties 'runAsUsr' not allowed"},
		{"replicas=two", "at '/replicas': got string, want integer"},
		{"maxConcurrentRolls=ten", "at '/maxConcurrentRolls': got string, want integer"},
		{"metrics.serviceMonitor.tls.insecureSkipVerify=maybe", "at '/metrics/serviceMonitor/tls/insecureSkipVerify': got string, want boolean"},
		{"leaderElection.leaseDuration=15", "at '/leaderElection/leaseDuration': got number, want string"},
		{"podDisruptionBudget.enabled=sometimes", "at '/podDisruptionBudget/enabled': value must be one of 'auto', true, false"},
		{"podSecurityContext.runAsUser=root", "at '/podSecurityContext/runAsUser'"},
		{"logLevel=verbose", "at '/logLevel'"},
	}
	for _, c := range cases {
		_, stderr, err := tryHelm(t, templateArgs(chartDir, c.set)...)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("--set %s refused: %s", c.set, stderr)
		case c.want != "" && (err == nil || !strings.Contains(stderr, "values don't meet the specifications of the schema") || !strings.Contains(stderr, c.want)):
			t.Errorf("--set %s: err %v, stderr %q; want helm's schema error %q", c.set, err, stderr, c.want)
		}
	}
}

// Names as Helm charts make them: nameOverride the name part, fullnameOverride the whole.
// app.kubernetes.io/name stays etcd-operator: the clusters' NetworkPolicies admit the
// operator's Pods by it, and the Deployment's selector cannot change.
func TestNames(t *testing.T) {
	cases := []struct {
		release, set, want string
	}{
		{"eo", "", "eo-etcd-operator"},
		{"etcd-operator", "", "etcd-operator"},
		{"etcd-operator-a", "", "etcd-operator-a"},
		{"eo", "nameOverride=ops", "eo-ops"},
		{"eo", "fullnameOverride=custom", "custom"},
		{"eo", "fullnameOverride=" + strings.Repeat("x", 60), strings.Repeat("x", 50)},
	}
	for _, c := range cases {
		args := []string{"template", c.release, chartDir, "--namespace", "operators"}
		if c.set != "" {
			args = append(args, "--set", c.set)
		}
		objects := decode(helm(t, args...))
		deploy := mustGet(t, objects, "Deployment/operators/"+c.want)
		mustGet(t, objects, "ServiceAccount/operators/"+c.want)
		mustGet(t, objects, "Service/operators/"+c.want+"-metrics")
		if sa, _, _ := unstructured.NestedString(deploy.Object, "spec", "template", "spec", "serviceAccountName"); sa != c.want {
			t.Errorf("%s %s: serviceAccountName %q, want %q", c.release, c.set, sa, c.want)
		}
		checkSubjects(t, mustGet(t, objects, "ClusterRoleBinding//"+c.want+"-manager"), c.want)
		labels, _, _ := unstructured.NestedStringMap(deploy.Object, "spec", "template", "metadata", "labels")
		if labels["app.kubernetes.io/name"] != "etcd-operator" || labels["app.kubernetes.io/instance"] != c.release {
			t.Errorf("%s %s: Pod labels %v", c.release, c.set, labels)
		}
	}
}

func checkSubjects(t *testing.T, binding *unstructured.Unstructured, serviceAccount string) {
	t.Helper()
	subjects, _, _ := unstructured.NestedSlice(binding.Object, "subjects")
	if len(subjects) != 1 || subjects[0].(map[string]any)["name"] != serviceAccount {
		t.Errorf("%s binds %v, want the ServiceAccount %s", binding.GetName(), subjects, serviceAccount)
	}
}

func TestServiceAccount(t *testing.T) {
	objects := render(t, "serviceAccount.annotations.eks\\.amazonaws\\.com/role-arn=arn:aws:iam::1:role/etcd")
	sa := mustGet(t, objects, "ServiceAccount/operators/"+fullname)
	if got := sa.GetAnnotations()["eks.amazonaws.com/role-arn"]; got != "arn:aws:iam::1:role/etcd" {
		t.Errorf("ServiceAccount annotations %v", sa.GetAnnotations())
	}
	objects = render(t, "serviceAccount.create=false", "serviceAccount.name=platform-sa", "watchNamespaces={a}")
	for key := range objects {
		if strings.HasPrefix(key, "ServiceAccount/") {
			t.Errorf("%s made though serviceAccount.create=false", key)
		}
	}
	if sa, _, _ := unstructured.NestedString(mustGet(t, objects, "Deployment/operators/"+fullname).Object, "spec", "template", "spec", "serviceAccountName"); sa != "platform-sa" {
		t.Errorf("serviceAccountName %q, want platform-sa", sa)
	}
	for _, key := range []string{"RoleBinding/a/" + fullname + "-manager", "ClusterRoleBinding//" + fullname + "-manager-cluster-scoped", "RoleBinding/operators/" + fullname + "-leader-election"} {
		checkSubjects(t, mustGet(t, objects, key), "platform-sa")
	}
	objects = render(t, "serviceAccount.create=false")
	if sa, _, _ := unstructured.NestedString(mustGet(t, objects, "Deployment/operators/"+fullname).Object, "spec", "template", "spec", "serviceAccountName"); sa != "default" {
		t.Errorf("serviceAccountName %q without create or name, want default", sa)
	}
}

// podLabels reach the Pods only, under the chart's own labels; extraEnv the container.
func TestPodLabelsAndExtraEnv(t *testing.T) {
	objects := render(t, "podLabels.team=storage", "podLabels.app\\.kubernetes\\.io/name=mine", "extraEnv[0].name=HTTPS_PROXY", "extraEnv[0].value=http://proxy:3128")
	deploy := mustGet(t, objects, "Deployment/operators/"+fullname)
	labels, _, _ := unstructured.NestedStringMap(deploy.Object, "spec", "template", "metadata", "labels")
	if labels["team"] != "storage" || labels["app.kubernetes.io/name"] != "etcd-operator" {
		t.Errorf("Pod labels %v: want team=storage, and app.kubernetes.io/name kept", labels)
	}
	if _, ok := deploy.GetLabels()["team"]; ok {
		t.Errorf("the Deployment carries a Pod label: %v", deploy.GetLabels())
	}
	env, _, _ := unstructured.NestedSlice(container(t, objects), "env")
	if len(env) != 1 || env[0].(map[string]any)["name"] != "HTTPS_PROXY" || env[0].(map[string]any)["value"] != "http://proxy:3128" {
		t.Errorf("env %v", env)
	}
	if _, ok := container(t, render(t))["env"]; ok {
		t.Error("env rendered without extraEnv")
	}
}

// Each typed value reaches its flag; flags whose value is empty are left out (the operator's
// default holds); extraArgs come after the chart's, so that one of them wins.
func TestValuesReachTheirFlags(t *testing.T) {
	cases := []struct{ set, want string }{
		{"clusterDomain=corp.internal", "--cluster-domain=corp.internal"},
		{"maxConcurrentReconciles=8", "--max-concurrent-reconciles=8"},
		{"maxConcurrentRolls=0", "--max-concurrent-rolls=0"},
		{"leaderElection.namespace=leases", "--leader-election-namespace=leases"},
		{"leaderElection.leaseDuration=30s", "--leader-elect-lease-duration=30s"},
		{"leaderElection.renewDeadline=20s", "--leader-elect-renew-deadline=20s"},
		{"leaderElection.retryPeriod=4s", "--leader-elect-retry-period=4s"},
		{"logLevel=3", "--zap-log-level=3"},
		{"logDevelopment=true", "--zap-devel=true"},
		{"logTimeEncoding=rfc3339nano", "--zap-time-encoding=rfc3339nano"},
		{"etcdImageRepository=mirror.example/etcd", "--etcd-image-repository=mirror.example/etcd"},
		{"metrics.secure=false", "--metrics-secure=false"},
		{"metrics.port=9443", "--metrics-bind-address=:9443"},
	}
	for _, c := range cases {
		if got := args(t, render(t, c.set)); !slices.Contains(got, c.want) {
			t.Errorf("--set %s: args %v lack %s", c.set, got, c.want)
		}
	}
	for _, a := range args(t, render(t)) {
		for _, empty := range []string{"--leader-election-namespace", "--zap-time-encoding", "--etcd-image-repository", "--metrics-cert-path", "--watch-namespaces", "--cluster-selector"} {
			if strings.HasPrefix(a, empty+"=") {
				t.Errorf("%s rendered by default: its empty value would override the operator's default", a)
			}
		}
	}
	got := args(t, render(t, "extraArgs={--zap-stacktrace-level=panic,--max-concurrent-rolls=3}"))
	if tail := got[len(got)-2:]; !slices.Equal(tail, []string{"--zap-stacktrace-level=panic", "--max-concurrent-rolls=3"}) {
		t.Errorf("args end %v, want extraArgs last", tail)
	}
}

// leaderElection.namespace moves the Lease, and with it the Role that lets the operator take it.
func TestLeaderElectionNamespace(t *testing.T) {
	objects := render(t, "leaderElection.namespace=leases")
	mustGet(t, objects, "Role/leases/"+fullname+"-leader-election")
	checkSubjects(t, mustGet(t, objects, "RoleBinding/leases/"+fullname+"-leader-election"), fullname)
	if _, ok := objects["Role/operators/"+fullname+"-leader-election"]; ok {
		t.Error("the leader election Role stays in the release's namespace, away from the Lease")
	}
}

func TestSecurityContexts(t *testing.T) {
	objects := render(t)
	pod, _, _ := unstructured.NestedMap(mustGet(t, objects, "Deployment/operators/"+fullname).Object, "spec", "template", "spec", "securityContext")
	if fmt.Sprint(pod) != "map[runAsGroup:65532 runAsNonRoot:true runAsUser:65532 seccompProfile:map[type:RuntimeDefault]]" {
		t.Errorf("Pod securityContext %v", pod)
	}
	ctr, _, _ := unstructured.NestedMap(container(t, objects), "securityContext")
	if fmt.Sprint(ctr) != "map[allowPrivilegeEscalation:false capabilities:map[drop:[ALL]] readOnlyRootFilesystem:true]" {
		t.Errorf("container securityContext %v", ctr)
	}
	// OpenShift's restricted SCC assigns the user: null (as Helm removes it) or "" leaves it out.
	for _, sets := range [][]string{
		{"podSecurityContext.runAsUser=null", "podSecurityContext.runAsGroup=null"},
		{"podSecurityContext.runAsUser=", "podSecurityContext.runAsGroup="},
	} {
		pod, _, _ := unstructured.NestedMap(mustGet(t, render(t, sets...), "Deployment/operators/"+fullname).Object, "spec", "template", "spec", "securityContext")
		if _, ok := pod["runAsUser"]; ok {
			t.Errorf("%v: runAsUser kept: %v", sets, pod)
		}
		if _, ok := pod["runAsGroup"]; ok {
			t.Errorf("%v: runAsGroup kept: %v", sets, pod)
		}
		if pod["runAsNonRoot"] != true {
			t.Errorf("%v: runAsNonRoot lost: %v", sets, pod)
		}
	}
}

func TestPodDisruptionBudget(t *testing.T) {
	cases := []struct {
		sets []string
		made bool
	}{
		{nil, false},
		{[]string{"replicas=2"}, true},
		{[]string{"replicas=2", "podDisruptionBudget.enabled=false"}, false},
		{[]string{"podDisruptionBudget.enabled=true"}, true},
	}
	for _, c := range cases {
		pdb, made := render(t, c.sets...)["PodDisruptionBudget/operators/"+fullname]
		if made != c.made {
			t.Errorf("%v: PodDisruptionBudget made %v, want %v", c.sets, made, c.made)
			continue
		}
		if !made {
			continue
		}
		if maxUnavailable, _, _ := unstructured.NestedFieldNoCopy(pdb.Object, "spec", "maxUnavailable"); fmt.Sprint(maxUnavailable) != "1" {
			t.Errorf("%v: maxUnavailable %v, want 1: a drain must not block on the operator", c.sets, maxUnavailable)
		}
		selector, _, _ := unstructured.NestedStringMap(pdb.Object, "spec", "selector", "matchLabels")
		if selector["app.kubernetes.io/name"] != "etcd-operator" || selector["app.kubernetes.io/instance"] != "eo" {
			t.Errorf("%v: selector %v misses the operator's Pods", c.sets, selector)
		}
	}
}

// NOTES.txt renders (an error there would only show at install) and names what was made.
// helm template leaves NOTES.txt out, so a copy of the chart renders it as a ConfigMap.
func TestNotes(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(chartDir)); err != nil {
		t.Fatal(err)
	}
	notes, err := os.ReadFile(filepath.Join(dir, "templates", "NOTES.txt"))
	if err != nil {
		t.Fatal(err)
	}
	wrapped := `{{- define "notes" -}}` + string(notes) + `{{- end -}}`
	for name, text := range map[string]string{
		"_notes.tpl": wrapped,
		"notes.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: notes}\ndata:\n  notes: |\n    {{- include \"notes\" . | nindent 4 }}\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, "templates", name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		sets []string
		want []string
	}{
		{nil, []string{"deployment/" + fullname, "of every namespace", "self-signed certificate"}},
		{[]string{"watchNamespaces={a,b}", "clusterSelector=shard=a", "metrics.certificate.certManager.enabled=true"},
			[]string{"of the namespaces a, b whose labels match \"shard=a\""}},
		{[]string{"metrics.secure=false"}, []string{"WARNING: metrics.secure=false"}},
		{[]string{"metrics.serviceMonitor.enabled=true", "metrics.serviceMonitor.tls.insecureSkipVerify=true"}, []string{"WARNING: the ServiceMonitor scrapes without verifying"}},
	}
	for _, c := range cases {
		cm := mustGet(t, decode(helm(t, templateArgs(dir, c.sets...)...)), "ConfigMap//notes")
		text, _, _ := unstructured.NestedString(cm.Object, "data", "notes")
		for _, w := range c.want {
			if !strings.Contains(text, w) {
				t.Errorf("%v: NOTES lack %q:\n%s", c.sets, w, text)
			}
		}
		if strings.Contains(text, "self-signed") && slices.Contains(c.sets, "metrics.certificate.certManager.enabled=true") {
			t.Errorf("%v: NOTES warn of a self-signed certificate cert-manager replaces", c.sets)
		}
	}
}

// The chart's defaults are the operator's: a flag the chart always passes has the binary's
// default as its default value, and every flag of the binary has a value of the chart, or is
// left to extraArgs on purpose.
func TestChartDefaultsAreTheOperators(t *testing.T) {
	defaults := operatorFlags(t)
	// Flags with no value of their own, and why.
	leftToExtraArgs := map[string]string{
		"kubeconfig":           "the operator runs in its Pod, with its ServiceAccount",
		"version":              "prints the version and exits",
		"zap-encoder":          "logDevelopment picks the console encoder",
		"zap-stacktrace-level": "rarely changed; extraArgs",
	}
	// Flags the chart sets to something else than the binary's default, and why.
	chosen := map[string]string{
		"agent-image": "the operator's own image, so that its agents are of its release",
		// zap's production default, which the binary's usage does not print.
		"zap-log-level": "info",
	}
	given := map[string]string{}
	for _, a := range args(t, render(t)) {
		name, value, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		given[name] = value
		def, known := defaults[name]
		switch {
		case !known:
			t.Errorf("the chart passes %s, which the operator does not have", a)
		case name == "zap-log-level" && value != chosen[name]:
			t.Errorf("--zap-log-level=%s by default, want the operator's %s", value, chosen[name])
		case chosen[name] == "" && value != def:
			t.Errorf("the chart passes %s by default, the operator's default is %q", a, def)
		}
	}
	// Everything set: every flag of the binary is then passed, but those left to extraArgs.
	all := args(t, render(t, "leaderElection.namespace=l", "logTimeEncoding=rfc3339", "etcdImageRepository=r",
		"watchNamespaces={a}", "clusterSelector=s=a", "metrics.certificate.secretName=c"))
	for name := range defaults {
		if _, ok := leftToExtraArgs[name]; ok {
			continue
		}
		if !slices.ContainsFunc(all, func(a string) bool { return strings.HasPrefix(a, "--"+name+"=") }) {
			t.Errorf("the operator's --%s has no value in the chart (or add it to leftToExtraArgs, saying why)", name)
		}
	}
}

// operatorFlags runs the operator's -h and reads its flags' defaults from its -h: "" for a flag
// that prints none (false for a boolean).
func operatorFlags(t *testing.T) map[string]string {
	t.Helper()
	// go run keeps the linked binary in the build cache: only the first run links it.
	run := exec.Command("go", "run", "./cmd/etcd-operator", "-h")
	run.Dir = "../.." // the product's module
	out, err := run.CombinedOutput()
	if err != nil {
		t.Fatalf("go run ./cmd/etcd-operator -h: %v\n%s", err, out)
	}
	flags := map[string]string{}
	header := regexp.MustCompile(`^  -([a-z0-9-]+)( \w+)?$`)
	var name string
	var boolean bool
	for _, line := range strings.Split(string(out), "\n") {
		if m := header.FindStringSubmatch(line); m != nil {
			name, boolean = m[1], m[2] == ""
			flags[name] = ""
			if boolean {
				flags[name] = "false"
			}
			continue
		}
		if name == "" {
			continue
		}
		if _, def, ok := strings.Cut(line, "(default "); ok {
			def = strings.TrimSuffix(strings.TrimSpace(def), ")")
			if unquoted, err := strconv.Unquote(def); err == nil {
				def = unquoted
			}
			flags[name] = def
		}
	}
	if len(flags) < 10 {
		t.Fatalf("read %d flags from the operator's -h:\n%s", len(flags), out)
	}
	return flags
}
