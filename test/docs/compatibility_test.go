package docs

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/snapshotstore"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// docs/compatibility.md is held to the CRDs and the code where it speaks of this operator:
// the messages its refusals quote, its limits, its defaults and its labels.

const compatibilityMD = "docs/compatibility.md"

// compatTables are the tables of compatibility.md under a heading, each at least one.
func compatTables(t *testing.T, heading string) []Table {
	t.Helper()
	var out []Table
	for _, tb := range Tables(readDoc(t, compatibilityMD)) {
		if tb.Heading == heading {
			out = append(out, tb)
		}
	}
	if len(out) == 0 {
		t.Fatalf("compatibility.md has no table under %q", heading)
	}
	return out
}

// allMessages are the rule messages of every CRD.
func allMessages(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, root := range crds(t) {
		out = append(out, messages(root)...)
	}
	return out
}

func TestCompatibilityRefusalsQuoteRealMessages(t *testing.T) {
	t.Parallel()
	msgs := allMessages(t)
	for _, tb := range compatTables(t, "Refused, with the reason") {
		for _, r := range tb.Rows {
			quotes := CodeSpans(r.Cells[1])
			if len(quotes) == 0 {
				t.Errorf("compatibility.md:%d: a refusal quotes no message", r.Line)
			}
			for _, q := range quotes {
				if !anyMatches(q, msgs, false) {
					t.Errorf("compatibility.md:%d: no rule of the CRDs says %q", r.Line, q)
				}
			}
		}
	}
}

// row is a kind | field | here | Cozystack's row, its field read from its `code`.
type compatRow struct {
	line              int
	kind, field, here string
}

func compatRows(t *testing.T, heading string) []compatRow {
	t.Helper()
	var out []compatRow
	for _, tb := range compatTables(t, heading) {
		for _, r := range tb.Rows {
			fields := CodeSpans(r.Cells[1])
			if len(r.Cells) != 4 || len(fields) != 1 {
				t.Errorf("compatibility.md:%d: a row is | kind | `field` | here | Cozystack's |", r.Line)
				continue
			}
			out = append(out, compatRow{line: r.Line, kind: r.Cells[0], field: fields[0], here: r.Cells[2]})
		}
	}
	return out
}

func TestCompatibilityLimitsAreTheCRDs(t *testing.T) {
	t.Parallel()
	schemas := crds(t)
	for _, r := range compatRows(t, "Limits") {
		c, err := parseConstraint(r.here)
		if err != nil || c == nil {
			t.Errorf("compatibility.md:%d: %s %s: the limit is no type cell: %v", r.line, r.kind, r.field, err)
			continue
		}
		root, ok := schemas[r.kind]
		if !ok {
			t.Errorf("compatibility.md:%d: no CRD of kind %s", r.line, r.kind)
			continue
		}
		for _, err := range checkLimit(root, r.field, c) {
			t.Errorf("compatibility.md:%d: %s %s: %v", r.line, r.kind, r.field, err)
		}
	}
}

// checkLimit compares a stated limit with the CRD: a field's schema, or for metadata.name
// (which a CRD's schema does not describe) the object's CEL rule on it.
func checkLimit(root *schema, path string, c *constraint) []error {
	if path == "metadata.name" {
		return checkNameRule(root, c)
	}
	f, err := lookup(root, path)
	if err != nil {
		return []error{err}
	}
	return c.check(f)
}

// checkNameRule finds the rule on metadata.name and checks that it bounds the length and
// matches the pattern as stated.
func checkNameRule(root *schema, c *constraint) []error {
	if c.typ != "string" || c.max == nil || c.pattern == "" || c.min != nil {
		return []error{fmt.Errorf("state a name as string, ≤ N characters, pattern `...`")}
	}
	for _, v := range root.XValidations {
		if strings.Contains(v.Rule, "self.metadata.name") {
			var errs []error
			if !strings.Contains(v.Rule, fmt.Sprintf("size(self.metadata.name) <= %d", *c.max)) {
				errs = append(errs, fmt.Errorf("the rule %q bounds no length at %d", v.Rule, *c.max))
			}
			if !strings.Contains(v.Rule, "matches('"+c.pattern+"')") {
				errs = append(errs, fmt.Errorf("the rule %q matches no %q", v.Rule, c.pattern))
			}
			return errs
		}
	}
	return []error{fmt.Errorf("no rule of the CRD reads metadata.name")}
}

// defaultChecks check what a row of "Defaults and behaviour that differ" says of this
// operator against the CRD or the code that decides it, by kind and field.
var defaultChecks = map[string]func(t *testing.T, here string) error{
	"EtcdCluster spec.options.quotaBackendBytes":                        checkQuotaDefault,
	"EtcdCluster spec.resources":                                        checkResourcesDefault,
	"EtcdCluster spec.persistentVolumeClaimRetentionPolicy.whenDeleted": checkCRDDefault("EtcdCluster", "spec.persistentVolumeClaimRetentionPolicy.whenDeleted"),
	"EtcdSnapshot spec.destination.s3.key":                              checkObjectKey,
	"EtcdSnapshot spec.destination.pvc.subPath":                         checkFilePath,
}

func TestCompatibilityDefaultsAreTheOperators(t *testing.T) {
	t.Parallel()
	for _, r := range compatRows(t, "Defaults and behaviour that differ") {
		check, ok := defaultChecks[r.kind+" "+r.field]
		if !ok {
			t.Errorf("compatibility.md:%d: nothing checks the row of %s %s: add its check to defaultChecks", r.line, r.kind, r.field)
			continue
		}
		if err := check(t, r.here); err != nil {
			t.Errorf("compatibility.md:%d: %s %s: %v", r.line, r.kind, r.field, err)
		}
	}
}

// checkQuotaDefault: "half of `spec.storage.size`, at most `MAX` (`EXAMPLE` with the default
// `SIZE`)" against specs.DefaultQuotaBackendBytes, and SIZE against the CRD's default.
func checkQuotaDefault(t *testing.T, here string) error {
	spans := CodeSpans(here)
	if len(spans) != 4 || spans[0] != "spec.storage.size" || !strings.Contains(here, "half of") {
		return fmt.Errorf("want half of `spec.storage.size`, at most `MAX` (`EXAMPLE` with the default `SIZE`), got %q", here)
	}
	most, example, size := resource.MustParse(spans[1]), resource.MustParse(spans[2]), resource.MustParse(spans[3])
	if err := checkCRDDefault("EtcdCluster", "spec.storage.size")(t, "`"+spans[3]+"`"); err != nil {
		return err
	}
	if got := specs.DefaultQuotaBackendBytes(&size); got != example.Value() {
		return fmt.Errorf("with %s the quota is %d, not %s", spans[3], got, spans[2])
	}
	for _, s := range []string{"256Mi", "1Gi", "10Gi", "16Gi", "100Gi"} {
		q := resource.MustParse(s)
		if got, want := specs.DefaultQuotaBackendBytes(&q), min(q.Value()/2, most.Value()); got != want {
			return fmt.Errorf("with %s the quota is %d, not half at most %s (%d)", s, got, spans[1], want)
		}
	}
	return nil
}

// checkResourcesDefault: "requests of `CPU` CPU and `MEMORY` memory" against
// specs.DefaultResources.
func checkResourcesDefault(_ *testing.T, here string) error {
	spans := CodeSpans(here)
	r := specs.DefaultResources()
	if len(spans) != 2 || len(r.Limits) != 0 || len(r.Requests) != 2 {
		return fmt.Errorf("want requests of `CPU` CPU and `MEMORY` memory; the code's are %v, limits %v", r.Requests, r.Limits)
	}
	if r.Requests.Cpu().String() != spans[0] || r.Requests.Memory().String() != spans[1] {
		return fmt.Errorf("the code requests %s CPU and %s memory", r.Requests.Cpu(), r.Requests.Memory())
	}
	return nil
}

// checkCRDDefault: the cell starts with the CRD's default of the field, in `code`.
func checkCRDDefault(kind, path string) func(t *testing.T, here string) error {
	return func(t *testing.T, here string) error {
		f, err := lookup(crds(t)[kind], path)
		if err != nil {
			return err
		}
		if errs := checkDefault(f, here); len(errs) > 0 {
			return errs[0]
		}
		if f.schema.Default == nil {
			return fmt.Errorf("the CRD has no default for %s", path)
		}
		return nil
	}
}

// sampleFile is the snapshot the key and path checks place.
var sampleFile = snapshotstore.FileOf{Namespace: "team-a", Cluster: "orders", Name: "nightly"}

// expand fills a documented layout's placeholders with sampleFile.
func expand(layout string) string {
	return strings.NewReplacer("<namespace>", sampleFile.Namespace, "<cluster>", sampleFile.Cluster, "<name>", sampleFile.Name).Replace(layout)
}

// checkObjectKey: "... `LAYOUT` ...; a key ending in `.db` is the key itself" against
// snapshotstore.ObjectKey.
func checkObjectKey(_ *testing.T, here string) error {
	return checkLayout(here, snapshotstore.ObjectKey)
}

// checkFilePath: the same of a PVC's subPath, against snapshotstore.FilePath.
func checkFilePath(_ *testing.T, here string) error {
	return checkLayout(here, snapshotstore.FilePath)
}

func checkLayout(here string, place func(string, snapshotstore.FileOf) string) error {
	spans := CodeSpans(here)
	if len(spans) != 2 || spans[1] != ".db" {
		return fmt.Errorf("want `LAYOUT` and a prefix ending in `.db` taken as it is, got %q", here)
	}
	if got, want := place("backups", sampleFile), path.Join("backups", expand(spans[0])); got != want {
		return fmt.Errorf("under the prefix backups the file is %s, not %s", got, want)
	}
	if got := place("backups/one.db", sampleFile); got != "backups/one.db" {
		return fmt.Errorf("backups/one.db becomes %s, not itself", got)
	}
	return nil
}

// The labels compatibility.md names are the operator's, and the role's value is the one it
// writes on voters' Pods (a learner's carries none).
func TestCompatibilityLabelsAreTheOperators(t *testing.T) {
	t.Parallel()
	keys := []string{etcdv1.LabelCluster, etcdv1.LabelInstance, etcdv1.LabelRole}
	var seen []string
	for _, tb := range compatTables(t, "Labels") {
		for _, r := range tb.Rows {
			key := strings.Trim(r.Cells[0], "`")
			seen = append(seen, key)
			if !slices.Contains(keys, key) {
				t.Errorf("compatibility.md:%d: %q is none of the operator's labels %v", r.Line, key, keys)
			}
			roles := []string{etcdv1.RoleLabelVoter}
			if key == etcdv1.LabelRole && !slices.Equal(CodeSpans(r.Cells[1]), roles) {
				t.Errorf("compatibility.md:%d: the role label's values: the doc says %v, the operator writes %v", r.Line, CodeSpans(r.Cells[1]), roles)
			}
		}
	}
	if !slices.Equal(seen, keys) {
		t.Errorf("compatibility.md's labels are %v, want %v", seen, keys)
	}
}
