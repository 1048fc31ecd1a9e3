package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
	corev1 "k8s.io/api/core/v1"
)

type testValues struct {
	Name     string            `json:"name"`
	Group    testGroup         `json:"group"`
	Env      []corev1.EnvVar   `json:"env"`
	Selector map[string]string `json:"selector"`
}

type testGroup struct {
	Port int `json:"port"`
}

func testSchema(t *testing.T, constraints map[string]map[string]any) map[string]any {
	t.Helper()
	doc, err := newSchemaBuilder(constraints).document(reflect.TypeFor[testValues]())
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// Every object of the schema, the chart's own and the Kubernetes types' at every depth,
// refuses keys it does not know: a typo is an error.
func TestSchemaRefusesUnknownKeysAtEveryLevel(t *testing.T) {
	doc := testSchema(t, nil)
	var objects int
	var walk func(path string, s any)
	walk = func(path string, s any) {
		m, ok := s.(map[string]any)
		if !ok {
			return
		}
		if m["type"] == "object" {
			objects++
			if _, ok := m["additionalProperties"]; !ok {
				t.Errorf("%s: an object without additionalProperties accepts any key", path)
			}
		}
		for k, v := range m {
			walk(path+"/"+k, v)
		}
	}
	walk("", doc)
	defs := doc["definitions"].(map[string]any)
	for _, name := range []string{"core.v1.EnvVar", "core.v1.EnvVarSource", "core.v1.SecretKeySelector"} {
		if defs[name] == nil {
			t.Errorf("no definition %s (nested in EnvVar): %v", name, keysOf(defs))
		}
	}
	if objects < 5 {
		t.Errorf("%d objects in the schema: the walk did not reach the Kubernetes types", objects)
	}
	props := doc["properties"].(map[string]any)
	if got := props["selector"].(map[string]any)["additionalProperties"]; !reflect.DeepEqual(got, map[string]any{"type": "string"}) {
		t.Errorf("a map of strings: additionalProperties = %v", got)
	}
	if got := props["group"].(map[string]any)["additionalProperties"]; got != false {
		t.Errorf("the chart's own group: additionalProperties = %v, want false", got)
	}
}

func keysOf(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestConstraints(t *testing.T) {
	doc := testSchema(t, map[string]map[string]any{
		"group.port":           {"minimum": 1},
		"core.v1.EnvVar.value": {"type": nil, "enum": []any{"a"}},
	})
	port := doc["properties"].(map[string]any)["group"].(map[string]any)["properties"].(map[string]any)["port"]
	if !reflect.DeepEqual(port, map[string]any{"type": "integer", "minimum": 1}) {
		t.Errorf("group.port = %v", port)
	}
	value := doc["definitions"].(map[string]any)["core.v1.EnvVar"].(map[string]any)["properties"].(map[string]any)["value"]
	if !reflect.DeepEqual(value, map[string]any{"enum": []any{"a"}}) {
		t.Errorf("a Kubernetes field's constraint, its type removed: %v", value)
	}
	if _, err := newSchemaBuilder(map[string]map[string]any{"group.prot": {}}).document(reflect.TypeFor[testValues]()); err == nil {
		t.Error("a constraint that names no value is accepted")
	}
}

func TestDescribe(t *testing.T) {
	cases := []struct {
		name, yaml, err string
		rows            []row
	}{
		{
			name: "every key commented, in values.yaml's order",
			yaml: "# Who.\nname: x\n# A group.\ngroup:\n  port: 1\n# Variables.\nenv: [{name: A, value: b}]\n# Labels.\nselector: {}\n",
			rows: []row{
				{Key: "name", Type: "string", Default: `"x"`, Description: "Who."},
				{Key: "group", Description: "A group."},
				{Key: "group.port", Type: "integer", Default: "1"},
				{Key: "env", Type: "list of EnvVar", Default: `[{"name":"A","value":"b"}]`, Description: "Variables."},
				{Key: "selector", Type: "map of string", Default: "{}", Description: "Labels."},
			},
		},
		{name: "a key without a comment", yaml: "name: x\n# A group.\ngroup: {port: 1}\n# V.\nenv: []\n# L.\nselector: {}\n", err: "name has no comment"},
		{name: "a key the chart does not have", yaml: "# N.\nname: x\n# T.\nnames: y\n", err: "names is no value"},
		{name: "a value values.yaml leaves out", yaml: "# N.\nname: x\n# A group.\ngroup: {port: 1}\n# V.\nenv: []\n", err: "lacks selector"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var root yaml.Node
			if err := yaml.Unmarshal([]byte(c.yaml), &root); err != nil {
				t.Fatal(err)
			}
			doc := testSchema(t, nil)
			d := &describer{}
			err := d.describe(root.Content[0], doc, "", false)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want one saying %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(d.rows, c.rows) {
				t.Errorf("rows =\n%v\nwant\n%v", d.rows, c.rows)
			}
			if desc := doc["properties"].(map[string]any)["name"].(map[string]any)["description"]; desc != "Who." {
				t.Errorf("the schema's description of name = %v", desc)
			}
		})
	}
}

func TestTableEscapesMarkup(t *testing.T) {
	got := table([]row{{Key: "a", Type: "string", Default: `"x|y"`, Description: "named <fullname>-metrics | or not"}})
	want := "| `a` | string | `\"x\\|y\"` | named &lt;fullname&gt;-metrics \\| or not |\n"
	if !strings.HasSuffix(got, want) {
		t.Errorf("table =\n%s\nwant its row\n%s", got, want)
	}
}

// The chart's own values.yaml passes: it fits values.go, every value has a comment.
func TestTheChartsValues(t *testing.T) {
	if err := run(t.TempDir()); err == nil {
		t.Fatal("run without a chart succeeded")
	}
	values, err := readChartFile("values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	schema, readme, err := generate(values, "{{ .Values }}")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(schema), `"additionalProperties": false`) || !strings.Contains(string(readme), "| `fullnameOverride` |") {
		t.Errorf("the chart's schema or README lacks what values.yaml says")
	}
	if _, _, err := generate(append(values, []byte("# A typo.\nreplica: 2\n")...), "{{ .Values }}"); err == nil {
		t.Error("a key values.go does not have is accepted")
	}
}

func readChartFile(name string) ([]byte, error) {
	return os.ReadFile(filepath.Join("..", "..", "..", "charts", "etcd-operator", name))
}
