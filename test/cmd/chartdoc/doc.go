package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// row is one value in the chart README's table.
type row struct {
	Key, Type, Default, Description string
}

// describer walks values.yaml beside the schema: each key's comment becomes its schema
// description and its README row, in values.yaml's order.
type describer struct {
	definitions map[string]any
	rows        []row
}

// describe reads a mapping of values.yaml at prefix against its object schema. Every key
// needs a comment, its own or a commented parent's, and every value of the schema a key.
func (d *describer) describe(mapping *yaml.Node, object map[string]any, prefix string, parentDescribed bool) error {
	if mapping.Kind != yaml.MappingNode {
		return fmt.Errorf("values.yaml: %s is no mapping", strings.TrimSuffix(prefix, "."))
	}
	props, _ := object["properties"].(map[string]any)
	seen := map[string]bool{}
	for i := 0; i+1 < len(mapping.Content); i += 2 {
		key, value := mapping.Content[i], mapping.Content[i+1]
		path := prefix + key.Value
		prop, ok := props[key.Value].(map[string]any)
		if !ok {
			return fmt.Errorf("values.yaml: %s is no value of the chart (test/cmd/chartdoc/values.go)", path)
		}
		seen[key.Value] = true
		comment := commentText(key.HeadComment)
		if comment == "" && !parentDescribed {
			return fmt.Errorf("values.yaml: %s has no comment to say what it is", path)
		}
		if comment != "" {
			prop["description"] = comment
		}
		if err := d.value(path, value, prop, comment, parentDescribed || comment != ""); err != nil {
			return err
		}
	}
	for name := range props {
		if !seen[name] {
			return fmt.Errorf("values.yaml lacks %s%s: give every value its default and a comment", prefix, name)
		}
	}
	return nil
}

// value adds the rows of one key: a group of the chart's own values is a row of its comment
// and its values' rows; anything else (a Kubernetes object included) is one row.
func (d *describer) value(path string, value *yaml.Node, prop map[string]any, comment string, described bool) error {
	if _, own := prop["properties"]; own {
		if comment != "" {
			d.rows = append(d.rows, row{Key: path, Description: comment})
		}
		return d.describe(value, prop, path+".", described)
	}
	var v any
	if err := value.Decode(&v); err != nil {
		return fmt.Errorf("values.yaml: %s: %w", path, err)
	}
	def, err := compactJSON(v)
	if err != nil {
		return fmt.Errorf("values.yaml: %s: %w", path, err)
	}
	d.rows = append(d.rows, row{Key: path, Type: d.typeLabel(prop), Default: def, Description: comment})
	return nil
}

// commentText is a head comment without its markers, one line.
func commentText(c string) string {
	var words []string
	for line := range strings.Lines(c) {
		line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "#"))
		if line != "" {
			words = append(words, line)
		}
	}
	return strings.Join(words, " ")
}

func compactJSON(v any) (string, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return strings.TrimSpace(buf.String()), nil
}

// typeLabel names a schema's type for people: "string", "list of string", "Affinity", ...
func (d *describer) typeLabel(s map[string]any) string {
	if ref, ok := s["$ref"].(string); ok {
		return ref[strings.LastIndex(ref, ".")+1:]
	}
	if values, ok := s["enum"].([]any); ok {
		var out []string
		for _, v := range values {
			j, _ := compactJSON(v)
			out = append(out, j)
		}
		return "one of " + strings.Join(out, ", ")
	}
	if alternatives, ok := s["anyOf"].([]any); ok {
		var out []string
		for _, a := range alternatives {
			out = append(out, d.typeLabel(a.(map[string]any)))
		}
		return strings.Join(out, " or ")
	}
	switch t := s["type"].(type) {
	case string:
		return d.compositeLabel(t, s)
	case []any:
		var out []string
		for _, one := range t {
			out = append(out, fmt.Sprint(one))
		}
		slices.Sort(out)
		return strings.Join(out, " or ")
	}
	return "any"
}

func (d *describer) compositeLabel(t string, s map[string]any) string {
	switch t {
	case "array":
		if items, ok := s["items"].(map[string]any); ok {
			return "list of " + d.typeLabel(items)
		}
	case "object":
		if values, ok := s["additionalProperties"].(map[string]any); ok {
			return "map of " + d.typeLabel(values)
		}
	}
	return t
}

// table is the README's values table.
func table(rows []row) string {
	var b strings.Builder
	b.WriteString("| value | type | default | what |\n| --- | --- | --- | --- |\n")
	for _, r := range rows {
		def := ""
		if r.Default != "" {
			def = "`" + r.Default + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", r.Key, markdown(r.Type), strings.ReplaceAll(def, "|", `\|`), markdown(r.Description))
	}
	return b.String()
}

// markdown escapes what a table cell would otherwise take as markup: the cell separator, and
// the angle brackets of <fullname>, which would be read as an HTML tag and vanish.
func markdown(s string) string {
	return strings.NewReplacer("|", `\|`, "<", "&lt;", ">", "&gt;").Replace(s)
}
