package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// schemaBuilder derives a JSON schema (draft-07, which every Helm 3 reads) from Go types: every
// object refuses keys it does not know (additionalProperties: false), so that a typo in a
// value is an error, not a value silently ignored. Kubernetes types become definitions,
// referenced where used.
type schemaBuilder struct {
	own         string // the package path of the chart's own types, which are inlined
	definitions map[string]any
	constraints map[string]map[string]any
	used        map[string]bool
}

// special are the types that marshal themselves, as their JSON looks.
var special = map[reflect.Type]map[string]any{
	reflect.TypeFor[resource.Quantity]():  {"type": []any{"string", "number"}},
	reflect.TypeFor[intstr.IntOrString](): {"type": []any{"string", "integer"}},
}

func newSchemaBuilder(constraints map[string]map[string]any) *schemaBuilder {
	return &schemaBuilder{
		own:         reflect.TypeFor[Values]().PkgPath(),
		definitions: map[string]any{},
		constraints: constraints,
		used:        map[string]bool{},
	}
}

// document is the whole schema of values of type t.
func (b *schemaBuilder) document(t reflect.Type) (map[string]any, error) {
	root, err := b.of(t, "")
	if err != nil {
		return nil, err
	}
	for path := range b.constraints {
		if !b.used[path] {
			return nil, fmt.Errorf("constraint %s names no value", path)
		}
	}
	doc := map[string]any{"$schema": "http://json-schema.org/draft-07/schema#"}
	maps.Copy(doc, root)
	if len(b.definitions) > 0 {
		doc["definitions"] = b.definitions
	}
	return doc, nil
}

// of is the schema of t at path (dotted, as values are named; "<definition>.<field>" inside a
// Kubernetes type), with the path's constraints.
func (b *schemaBuilder) of(t reflect.Type, path string) (map[string]any, error) {
	s, err := b.derive(t, path)
	if err != nil {
		return nil, err
	}
	if c, ok := b.constraints[path]; ok {
		b.used[path] = true
		s = maps.Clone(s)
		for k, v := range c {
			if v == nil {
				delete(s, k)
			} else {
				s[k] = v
			}
		}
	}
	return s, nil
}

func (b *schemaBuilder) derive(t reflect.Type, path string) (map[string]any, error) {
	if s, ok := special[t]; ok {
		return s, nil
	}
	switch t.Kind() {
	case reflect.Pointer:
		return b.derive(t.Elem(), path)
	case reflect.String:
		return map[string]any{"type": "string"}, nil
	case reflect.Bool:
		return map[string]any{"type": "boolean"}, nil
	case reflect.Int, reflect.Int32, reflect.Int64:
		return map[string]any{"type": "integer"}, nil
	case reflect.Interface:
		return map[string]any{}, nil
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return map[string]any{"type": "string"}, nil // []byte: base64
		}
		items, err := b.of(t.Elem(), path+"[]")
		if err != nil {
			return nil, err
		}
		return map[string]any{"type": "array", "items": items}, nil
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return nil, fmt.Errorf("%s: map keyed by %s", path, t.Key())
		}
		values, err := b.of(t.Elem(), path+"{}")
		if err != nil {
			return nil, err
		}
		return map[string]any{"type": "object", "additionalProperties": values}, nil
	case reflect.Struct:
		if t.PkgPath() == b.own {
			return b.object(t, path+".")
		}
		return b.reference(t)
	}
	return nil, fmt.Errorf("%s: no schema for %s", path, t)
}

// reference defines a Kubernetes type once and refers to it.
func (b *schemaBuilder) reference(t reflect.Type) (map[string]any, error) {
	name := definitionName(t)
	if _, done := b.definitions[name]; !done {
		b.definitions[name] = nil // a type that contains itself refers to its definition
		s, err := b.object(t, name+".")
		if err != nil {
			return nil, err
		}
		b.definitions[name] = s
	}
	return map[string]any{"$ref": "#/definitions/" + name}, nil
}

// definitionName is "<group>.<version>.<Type>", from the package path k8s.io/.../<group>/<version>.
func definitionName(t reflect.Type) string {
	parts := strings.Split(t.PkgPath(), "/")
	if len(parts) >= 2 {
		parts = parts[len(parts)-2:]
	}
	return strings.Join(append(parts, t.Name()), ".")
}

// object is a struct's schema: its JSON fields, inline ones merged, and no others.
func (b *schemaBuilder) object(t reflect.Type, prefix string) (map[string]any, error) {
	props := map[string]any{}
	if err := b.fields(t, prefix, props); err != nil {
		return nil, err
	}
	return map[string]any{"type": "object", "properties": props, "additionalProperties": false}, nil
}

func (b *schemaBuilder) fields(t reflect.Type, prefix string, props map[string]any) error {
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if strings.Contains(opts, "inline") || (name == "" && f.Anonymous) {
			if err := b.fields(f.Type, prefix, props); err != nil {
				return err
			}
			continue
		}
		if name == "" {
			return fmt.Errorf("%s%s has no JSON name", prefix, f.Name)
		}
		if implementsMarshaler(f.Type) && special[derefType(f.Type)] == nil {
			return fmt.Errorf("%s%s: %s marshals itself; say how in special", prefix, name, f.Type)
		}
		s, err := b.of(f.Type, strings.TrimPrefix(prefix, ".")+name)
		if err != nil {
			return err
		}
		props[name] = s
	}
	return nil
}

func derefType(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

func implementsMarshaler(t reflect.Type) bool {
	marshaler := reflect.TypeFor[json.Marshaler]()
	t = derefType(t)
	return t.Implements(marshaler) || reflect.PointerTo(t).Implements(marshaler)
}
