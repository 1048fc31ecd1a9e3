package docs

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

type schema = apiextensionsv1.JSONSchemaProps

// crds are the generated CRDs of config/crd/bases, by kind: their one version's schema.
func crds(t *testing.T) map[string]*schema {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(Root(), "config", "crd", "bases", "*.yaml"))
	if err != nil || len(files) < 5 {
		t.Fatalf("want the five CRDs in config/crd/bases, found %d (%v)", len(files), err)
	}
	out := map[string]*schema{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(data, crd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if len(crd.Spec.Versions) != 1 {
			t.Fatalf("%s: want one version, found %d", f, len(crd.Spec.Versions))
		}
		out[crd.Spec.Names.Kind] = crd.Spec.Versions[0].Schema.OpenAPIV3Schema
	}
	return out
}

// field is one field of a CRD's schema: its path from the object's root, its schema, and
// the schemas from the root down to its parent (rules on them may speak of it).
type field struct {
	path      string // spec.storage.size; a list's items add nothing: spec.tolerations.key
	schema    *schema
	ancestors []*schema // root first
	required  bool      // its parent lists it as required
}

// lookup finds the field at path (dotted, from the object's root) in root.
func lookup(root *schema, path string) (field, error) {
	f := field{path: path, schema: root}
	for _, seg := range strings.Split(path, ".") {
		parent := elem(f.schema)
		next, ok := parent.Properties[seg]
		if !ok {
			return f, fmt.Errorf("no field %q in %s", seg, strings.TrimSuffix(strings.TrimSuffix(path, seg), "."))
		}
		f.ancestors = append(f.ancestors, f.schema)
		f.schema = &next
		f.required = contains(parent.Required, seg)
	}
	return f, nil
}

// elem is a list's item schema, or s itself.
func elem(s *schema) *schema {
	if s.Type == "array" && s.Items != nil && s.Items.Schema != nil {
		return s.Items.Schema
	}
	return s
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// fieldPaths lists every field under prefix (spec) of root, depth first, without descending
// into stop (the subtrees a row covers whole).
func fieldPaths(root *schema, prefix string, stop func(path string, s *schema) bool) []string {
	f, err := lookup(root, prefix)
	if err != nil {
		return nil
	}
	var out []string
	var walk func(path string, s *schema)
	walk = func(path string, s *schema) {
		for name, child := range elem(s).Properties {
			p := path + "." + name
			out = append(out, p)
			if !stop(p, &child) {
				walk(p, &child)
			}
		}
	}
	walk(prefix, f.schema)
	sort.Strings(out)
	return out
}

// messages are the CEL rule messages of a schema and everything under it, each as a
// template: a messageExpression's string literals with a wildcard for each other term.
func messages(s *schema) []string {
	out := ruleMessages(s.XValidations)
	if s.Items != nil && s.Items.Schema != nil {
		out = append(out, messages(s.Items.Schema)...)
	}
	for _, child := range s.Properties {
		out = append(out, messages(&child)...)
	}
	return dedupe(out)
}

// ruleMessages are the messages of rules: a message, or a messageExpression's template.
func ruleMessages(rules apiextensionsv1.ValidationRules) []string {
	var out []string
	for _, v := range rules {
		if v.MessageExpression != "" {
			out = append(out, template(v.MessageExpression))
		} else if v.Message != "" {
			out = append(out, v.Message)
		}
	}
	return out
}

func dedupe(list []string) []string {
	sort.Strings(list)
	var out []string
	for i, s := range list {
		if i == 0 || s != list[i-1] {
			out = append(out, s)
		}
	}
	return out
}

// wildcard stands in a message template for what a messageExpression computes, and in a
// quote for the placeholders a doc writes there (OLD, NEW).
const wildcard = "\x00"

var celStringRE = regexp.MustCompile(`'((?:[^'\\]|\\.)*)'`)

// template renders a messageExpression ('a ' + x + ' b') as "a \x00 b".
func template(expr string) string {
	var b strings.Builder
	for _, term := range strings.Split(expr, "+") {
		if m := celStringRE.FindStringSubmatch(strings.TrimSpace(term)); m != nil && m[0] == strings.TrimSpace(term) {
			b.WriteString(strings.ReplaceAll(m[1], `\'`, `'`))
		} else {
			b.WriteString(wildcard)
		}
	}
	return b.String()
}

// placeholderRE are the words a doc writes for a value a message computes.
var placeholderRE = regexp.MustCompile(`\b(OLD|NEW)\b`)

// quoteMatches says whether a doc's quote of a message matches the message: its pieces
// between "..." appear in order, the first at the start when prefix is set and the quote
// does not start with "...".
func quoteMatches(quote, message string, prefix bool) bool {
	quote = placeholderRE.ReplaceAllString(strings.ReplaceAll(quote, "…", "..."), wildcard)
	pieces := strings.Split(quote, "...")
	rest := message
	for i, p := range pieces {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		at := strings.Index(rest, p)
		if at < 0 || (i == 0 && prefix && at != 0) {
			return false
		}
		rest = rest[at+len(p):]
	}
	return true
}

// anyMatches says whether the quote matches one of messages.
func anyMatches(quote string, msgs []string, prefix bool) bool {
	for _, m := range msgs {
		if quoteMatches(quote, m, prefix) {
			return true
		}
	}
	return false
}

// scalarDefault is a field's CRD default as a doc writes it ("3", "Retain", `""`), or false
// when it has none or it is an object.
func scalarDefault(s *schema) (string, bool, error) {
	if s.Default == nil {
		return "", false, nil
	}
	var v any
	if err := json.Unmarshal(s.Default.Raw, &v); err != nil {
		return "", false, err
	}
	switch v := v.(type) {
	case map[string]any, []any:
		return "", false, nil
	case string:
		if v == "" {
			return `""`, true, nil
		}
		return v, true, nil
	default:
		return fmt.Sprint(v), true, nil
	}
}
