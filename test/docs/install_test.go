package docs

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// docs/install.md's namespaced install grants, cluster-wide, exactly the rules of
// config/rbac/role.yaml on the resources the chart keeps in its ClusterRole when
// watchNamespaces is set, to the ServiceAccount config/ binds the operator's rules to.
func TestNamespacedInstallGrantsTheClusterScopedRules(t *testing.T) {
	t.Parallel()
	objects := installManifests(t)
	role := readYAML[rbacv1.ClusterRole](t, "config/rbac/role.yaml")
	binding := readYAML[rbacv1.ClusterRoleBinding](t, "config/rbac/role_binding.yaml")

	want := ruleSet(role.Rules, chartClusterScoped(t))
	cr, ok := objects["ClusterRole/"+role.Name+"-cluster-scoped"]
	if !ok {
		t.Fatalf("install.md shows no ClusterRole %s-cluster-scoped; it has %v", role.Name, slices.Sorted(maps.Keys(objects)))
	}
	got := ruleSet(readObject[rbacv1.ClusterRole](t, cr).Rules, nil)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("install.md's ClusterRole grants %v; the chart's cluster-scoped rules from config/rbac/role.yaml are %v", got, want)
	}
	crb := readObject[rbacv1.ClusterRoleBinding](t, objects["ClusterRoleBinding/"+role.Name+"-cluster-scoped"])
	if crb.RoleRef.Kind != "ClusterRole" || crb.RoleRef.Name != role.Name+"-cluster-scoped" || !reflect.DeepEqual(crb.Subjects, binding.Subjects) {
		t.Errorf("install.md's ClusterRoleBinding binds %v to %v; want that ClusterRole to %v", crb.RoleRef, crb.Subjects, binding.Subjects)
	}
	rb := readObject[rbacv1.RoleBinding](t, objects["RoleBinding/"+binding.Name])
	if rb.RoleRef.Kind != "ClusterRole" || rb.RoleRef.Name != role.Name || !reflect.DeepEqual(rb.Subjects, binding.Subjects) {
		t.Errorf("install.md's RoleBinding binds %v to %v; want ClusterRole %s to %v", rb.RoleRef, rb.Subjects, role.Name, binding.Subjects)
	}
}

// installManifests are the objects of install.md's YAML blocks, as YAML, by Kind/name.
func installManifests(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, b := range Blocks(readDoc(t, "docs/install.md")) {
		if b.Lang != "yaml" {
			continue
		}
		for _, doc := range regexp.MustCompile(`(?m)^---$`).Split(dedent(b.Text), -1) {
			var head struct {
				Kind     string
				Metadata struct{ Name string }
			}
			if yaml.Unmarshal([]byte(doc), &head) == nil && head.Kind != "" {
				out[head.Kind+"/"+head.Metadata.Name] = doc
			}
		}
	}
	return out
}

// dedent takes off the indentation every line of a block has (a block in a list item).
func dedent(text string) string {
	lines := strings.Split(text, "\n")
	indent := -1
	for _, l := range lines {
		if strings.TrimSpace(l) != "" {
			n := len(l) - len(strings.TrimLeft(l, " "))
			if indent < 0 || n < indent {
				indent = n
			}
		}
	}
	for i, l := range lines {
		if len(l) >= indent && indent > 0 {
			lines[i] = l[indent:]
		}
	}
	return strings.Join(lines, "\n")
}

// chartClusterScoped is the chart's list of the resources it grants cluster-wide when
// watchNamespaces is set ($clusterScoped in templates/rbac.yaml).
func chartClusterScoped(t *testing.T) []string {
	t.Helper()
	tpl, err := Read("charts/etcd-operator/templates/rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`\$clusterScoped := list ((?:"[^"]+" ?)+)`).FindStringSubmatch(tpl)
	if m == nil {
		t.Fatal("charts/etcd-operator/templates/rbac.yaml has no $clusterScoped list")
	}
	var out []string
	for _, q := range strings.Fields(m[1]) {
		s, err := strconv.Unquote(q)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

// ruleSet is "group/resource" -> its verbs, sorted, of the rules' resources in only (all
// when only is nil).
func ruleSet(rules []rbacv1.PolicyRule, only []string) map[string]string {
	out := map[string]string{}
	for _, r := range rules {
		for _, res := range r.Resources {
			if only != nil && !slices.Contains(only, res) {
				continue
			}
			for _, g := range r.APIGroups {
				verbs := slices.Clone(r.Verbs)
				slices.Sort(verbs)
				out[g+"/"+res] = strings.Join(verbs, ",")
			}
		}
	}
	return out
}

func readYAML[T any](t *testing.T, path string) T {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(Root(), path))
	if err != nil {
		t.Fatal(err)
	}
	return readObject[T](t, string(data))
}

func readObject[T any](t *testing.T, doc string) T {
	t.Helper()
	var obj T
	if err := yaml.UnmarshalStrict([]byte(doc), &obj); err != nil || doc == "" {
		t.Fatalf("%v in %q", err, doc)
	}
	return obj
}

// versionFloorRE is the oldest etcd the CRD's message names.
var versionFloorRE = regexp.MustCompile(`spec\.version must be etcd (\d+)\.(\d+)\.(\d+) or newer`)

// The oldest etcd release the docs name is the one spec.version's rule accepts: the docs
// say "X or newer", "X and newer" or "below X" of it, and "Y and older" of the patch before.
func TestDocsNameTheVersionFloorOfTheCRD(t *testing.T) {
	t.Parallel()
	major, minor, patch := versionFloor(t)
	floor := fmt.Sprintf("%d.%d.%d", major, minor, patch)
	below := fmt.Sprintf("%d.%d.%d", major, minor, patch-1)
	line := fmt.Sprintf(`%d\.%d\.\d+`, major, minor)
	phrases := map[*regexp.Regexp]string{
		regexp.MustCompile(`(` + line + `) (?:or|and) newer`): floor,
		regexp.MustCompile(`below (` + line + `)`):            floor,
		regexp.MustCompile(`(` + line + `) and older`):        below,
	}
	for _, doc := range []string{"docs/api.md", compatibilityMD, "docs/install.md", "docs/tls-journey.md"} {
		text := readDoc(t, doc)
		found := 0
		for re, want := range phrases {
			for _, m := range re.FindAllStringSubmatch(text, -1) {
				found++
				if m[1] != want {
					t.Errorf("%s: %q: the CRD's oldest etcd is %s", doc, m[0], floor)
				}
			}
		}
		if found == 0 && doc != "docs/tls-journey.md" {
			t.Errorf("%s names no oldest etcd (%s or newer)", doc, floor)
		}
	}
}

// versionFloor reads the oldest etcd from the CRD's message and checks that the rule beside
// it compares with the same numbers.
func versionFloor(t *testing.T) (major, minor, patch int) {
	t.Helper()
	f, err := lookup(crds(t)["EtcdCluster"], "spec.version")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range f.schema.XValidations {
		m := versionFloorRE.FindStringSubmatch(v.Message)
		if m == nil {
			continue
		}
		major, _ = strconv.Atoi(m[1])
		minor, _ = strconv.Atoi(m[2])
		patch, _ = strconv.Atoi(m[3])
		// The version as the rule reads it: without the leading v it may have.
		const parts = "self.replace('v', '').split('.')"
		cmps := []string{fmt.Sprintf("int(%s[0]) == %d", parts, major)}
		if patch == 0 {
			cmps = append(cmps, fmt.Sprintf("int(%s[1]) >= %d", parts, minor))
		} else {
			cmps = append(cmps, fmt.Sprintf("int(%s[1]) == %d && int(%s[2]) >= %d", parts, minor, parts, patch))
		}
		for _, cmp := range cmps {
			if !strings.Contains(v.Rule, cmp) {
				t.Fatalf("the rule of %q does not compare %s: %s", v.Message, cmp, v.Rule)
			}
		}
		return major, minor, patch
	}
	t.Fatal("no rule of spec.version names the oldest etcd it accepts")
	return 0, 0, 0
}
