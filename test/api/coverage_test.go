package api

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// minimumRejectionCases is the floor the issue set for invalid creates and updates together.
const minimumRejectionCases = 40

// Every CEL rule of the CRDs is shown to work by a case that the apiserver refuses with the
// rule's message: a rule added without a case, or a case whose message no rule gives any
// more, fails here (besides the floor of 40 cases the issue asks for).
func TestEveryCELRuleHasARejectionCase(t *testing.T) {
	var wants []string
	for _, c := range invalidCreates() {
		wants = append(wants, c.want)
	}
	for _, u := range invalidUpdates() {
		wants = append(wants, u.want)
	}
	if len(wants) < minimumRejectionCases {
		t.Fatalf("only %d invalid cases, want at least %d", len(wants), minimumRejectionCases)
	}
	messages := celMessages(t, filepath.Join(repoRoot, "config", "crd", "bases"))
	if len(messages) == 0 {
		t.Fatal("no CEL rule with a message in the CRDs")
	}
	var uncovered []string
	for _, m := range messages {
		if !coveredBy(m, wants) {
			uncovered = append(uncovered, m)
		}
	}
	if len(uncovered) > 0 {
		t.Fatalf("%d of %d CEL rules have no invalid case refused with their message:\n%s",
			len(uncovered), len(messages), strings.Join(uncovered, "\n"))
	}
}

// coveredBy reports whether a case expects the rule's message (or a telling part of it: a
// case names the words that matter, and a message may go on to say more).
func coveredBy(message string, wants []string) bool {
	for _, w := range wants {
		if strings.Contains(message, w) || strings.Contains(w, message) {
			return true
		}
	}
	return false
}

// celMessages collects the message of every x-kubernetes-validations rule in the CRDs of dir.
func celMessages(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs in %s: %v", dir, err)
	}
	seen := map[string]bool{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(data, crd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, v := range crd.Spec.Versions {
			if v.Schema != nil && v.Schema.OpenAPIV3Schema != nil {
				collectMessages(v.Schema.OpenAPIV3Schema, seen)
			}
		}
	}
	out := make([]string, 0, len(seen))
	for m := range seen {
		out = append(out, m)
	}
	sort.Strings(out)
	return out
}

func collectMessages(s *apiextensionsv1.JSONSchemaProps, into map[string]bool) {
	for _, rule := range s.XValidations {
		if rule.Message != "" {
			into[rule.Message] = true
		}
	}
	for _, child := range s.Properties {
		collectMessages(&child, into)
	}
	if s.Items != nil && s.Items.Schema != nil {
		collectMessages(s.Items.Schema, into)
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		collectMessages(s.AdditionalProperties.Schema, into)
	}
}
