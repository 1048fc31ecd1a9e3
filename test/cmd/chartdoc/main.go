// Command chartdoc writes the Helm chart's values.schema.json and README.md from its
// values.yaml, so that neither goes stale (make chart-sync runs it; make verify-generated
// fails when its output differs from what is committed):
//
//	go -C test run ./cmd/chartdoc -chart "$PWD/charts/etcd-operator"
//
// The schema is derived from the Go types in values.go, the values' comments in values.yaml
// describe them; the README is README.md.gotmpl (next to this file, so that the chart holds
// only what it ships) with the table of values filled in.
package main

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"text/template"

	"go.yaml.in/yaml/v3"
	sigsyaml "sigs.k8s.io/yaml"
)

//go:embed README.md.gotmpl
var readmeTemplateText string

func main() {
	chart := flag.String("chart", "", "the chart's directory")
	flag.Parse()
	if *chart == "" {
		fmt.Fprintln(os.Stderr, "usage: chartdoc -chart <dir>")
		os.Exit(2)
	}
	if err := run(*chart); err != nil {
		fmt.Fprintln(os.Stderr, "chartdoc:", err)
		os.Exit(1)
	}
}

func run(chart string) error {
	valuesYAML, err := os.ReadFile(filepath.Join(chart, "values.yaml"))
	if err != nil {
		return err
	}
	schema, doc, err := generate(valuesYAML, readmeTemplateText)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(chart, "values.schema.json"), schema, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(chart, "README.md"), doc, 0o644)
}

// generate returns the schema and the README for values.yaml.
func generate(valuesYAML []byte, readmeTemplate string) (schema, readme []byte, err error) {
	// values.yaml holds only the chart's values, of their types.
	if err := sigsyaml.UnmarshalStrict(valuesYAML, &Values{}); err != nil {
		return nil, nil, fmt.Errorf("values.yaml does not fit values.go: %w", err)
	}
	b := newSchemaBuilder(constraints)
	doc, err := b.document(reflect.TypeFor[Values]())
	if err != nil {
		return nil, nil, err
	}
	var root yaml.Node
	if err := yaml.Unmarshal(valuesYAML, &root); err != nil {
		return nil, nil, err
	}
	if len(root.Content) != 1 {
		return nil, nil, errors.New("values.yaml: want one YAML document")
	}
	d := &describer{definitions: b.definitions}
	if err := d.describe(root.Content[0], doc, "", false); err != nil {
		return nil, nil, err
	}
	if schema, err = indentJSON(doc); err != nil {
		return nil, nil, err
	}
	tmpl, err := template.New("README.md.gotmpl").Option("missingkey=error").Parse(readmeTemplate)
	if err != nil {
		return nil, nil, err
	}
	var out bytes.Buffer
	if err := tmpl.Execute(&out, map[string]string{"Values": table(d.rows)}); err != nil {
		return nil, nil, err
	}
	return schema, out.Bytes(), nil
}

func indentJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
