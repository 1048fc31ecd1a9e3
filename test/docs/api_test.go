package docs

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// docs/api.md is held to the CRDs of config/crd/bases: its field tables (| field | type |
// default | meaning |) name fields that exist, with the type, bounds, enum, pattern,
// immutability and default the CRD has; every spec field appears in them; its rule tables
// (| rule | message begins with |) quote messages the CRD has, and every message the CRD has
// for a spec is quoted.

// opaque are the spec fields of Kubernetes' own types: a row naming one covers its subtree,
// which Kubernetes documents (kubectl explain shows it).
var opaque = map[string]bool{
	"spec.resources":                             true,
	"spec.archive.resources":                     true,
	"spec.affinity":                              true,
	"spec.topologySpreadConstraints":             true,
	"spec.tolerations":                           true,
	"spec.networkPolicy.clientSelector":          true,
	"spec.networkPolicy.clientNamespaceSelector": true,
}

// docTable is a table of api.md with the kind its section is about.
type docTable struct {
	Table
	kind string
}

var kindRE = regexp.MustCompile(`^(Etcd[A-Za-z]+)\b`)

// apiTables returns api.md's tables of one header (its first two cells), each with the kind
// of its section.
func apiTables(t *testing.T, doc string, first, second string) []docTable {
	t.Helper()
	var out []docTable
	for _, tb := range Tables(doc) {
		if len(tb.Header) < 2 || tb.Header[0] != first || tb.Header[1] != second {
			continue
		}
		m := kindRE.FindStringSubmatch(tb.Section)
		if m == nil {
			t.Errorf("api.md:%d: a %s table under %q, which names no kind", tb.Line, first, tb.Section)
			continue
		}
		out = append(out, docTable{Table: tb, kind: m[1]})
	}
	return out
}

func readDoc(t *testing.T, path string) string {
	t.Helper()
	doc, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// fieldRow is one row of a field table: the fields it names (paths from the object's root)
// and its cells.
type fieldRow struct {
	kind  string
	line  int
	paths []string
	cells []string // field, type, default, meaning
}

func fieldRows(t *testing.T, doc string) []fieldRow {
	t.Helper()
	var out []fieldRow
	for _, tb := range apiTables(t, doc, "field", "type") {
		if strings.Join(tb.Header, "|") != "field|type|default|meaning" {
			t.Errorf("api.md:%d: a field table's header is | field | type | default | meaning |, not %v", tb.Line, tb.Header)
			continue
		}
		for _, r := range tb.Rows {
			row := fieldRow{kind: tb.kind, line: r.Line, cells: r.Cells}
			for _, p := range CodeSpans(r.Cells[0]) {
				row.paths = append(row.paths, absolute(p))
			}
			if len(r.Cells) != 4 || len(row.paths) == 0 {
				t.Errorf("api.md:%d: a field row has four cells and names its fields in `code`: %v", r.Line, r.Cells)
				continue
			}
			out = append(out, row)
		}
	}
	if len(out) < 40 {
		t.Fatalf("api.md has %d field rows: the tables are no longer read", len(out))
	}
	return out
}

// absolute is a table's path from the object's root: spec.<path> unless it starts at the
// root (spec, status, metadata).
func absolute(p string) string {
	switch first, _, _ := strings.Cut(p, "."); first {
	case "spec", "status", "metadata":
		return p
	}
	return "spec." + p
}

func TestAPIFieldRowsMatchTheCRDs(t *testing.T) {
	t.Parallel()
	schemas := crds(t)
	for _, row := range fieldRows(t, readDoc(t, "docs/api.md")) {
		for _, p := range row.paths {
			for _, err := range checkFieldRow(schemas, row, p) {
				t.Errorf("api.md:%d: %s %s: %v", row.line, row.kind, p, err)
			}
		}
	}
}

// checkFieldRow compares what a row states of one of its fields with the kind's CRD.
func checkFieldRow(schemas map[string]*schema, row fieldRow, path string) []error {
	root, ok := schemas[row.kind]
	if !ok {
		return []error{fmt.Errorf("no CRD of kind %s", row.kind)}
	}
	f, err := lookup(root, path)
	if err != nil {
		return []error{err}
	}
	c, err := parseConstraint(row.cells[1])
	if err != nil {
		return []error{err}
	}
	var errs []error
	if c != nil {
		errs = c.check(f)
	}
	return append(errs, checkDefault(f, row.cells[2])...)
}

// checkDefault compares a default cell with the CRD: "required" exactly for required fields;
// a cell that starts with `code` states the CRD's default (the apiserver writes it into the
// object), and the CRD's default must be stated so. Prose is the operator's own default,
// applied when it reads the spec.
func checkDefault(f field, cell string) []error {
	var errs []error
	if says := regexp.MustCompile(`\brequired\b`).MatchString(cell); says != f.required {
		errs = append(errs, fmt.Errorf("default cell %q: the CRD has required=%v", cell, f.required))
	}
	stated, hasStated := "", strings.HasPrefix(cell, "`")
	if hasStated {
		stated = CodeSpans(cell)[0]
	}
	crd, hasCRD, err := scalarDefault(f.schema)
	switch {
	case err != nil:
		errs = append(errs, err)
	case hasCRD && stated != crd:
		errs = append(errs, fmt.Errorf("default cell %q: the CRD's default is `%s`; start the cell with it", cell, crd))
	case hasStated && !hasCRD:
		errs = append(errs, fmt.Errorf("default cell %q states a CRD default in `code`, the CRD has none: write the operator's default as prose", cell))
	}
	return errs
}

func TestAPIEverySpecFieldIsDocumented(t *testing.T) {
	t.Parallel()
	schemas := crds(t)
	rows := fieldRows(t, readDoc(t, "docs/api.md"))
	for kind, root := range schemas {
		for _, p := range fieldPaths(root, "spec", isLeafForDocs) {
			if !covered(rows, kind, p) {
				t.Errorf("%s %s is in no field table of api.md: give it a row, or name it in the row of its parent", kind, p)
			}
		}
	}
}

// isLeafForDocs says whether a row naming the field covers its subtree: a Kubernetes type,
// or a reference (an object whose only field is name).
func isLeafForDocs(path string, s *schema) bool {
	_, onlyName := elem(s).Properties["name"]
	return opaque[path] || (onlyName && len(elem(s).Properties) == 1)
}

var wordRE = regexp.MustCompile(`[A-Za-z][A-Za-z0-9]*`)

// covered says whether a row of the kind names the field, or names a parent of it and
// mentions every field in between (`bootstrap.restore.source.s3` ... `{endpoint, ...}`).
func covered(rows []fieldRow, kind, path string) bool {
	for _, row := range rows {
		if row.kind != kind {
			continue
		}
		words := map[string]bool{}
		for _, w := range wordRE.FindAllString(strings.Join(row.cells, " "), -1) {
			words[w] = true
		}
		for _, named := range row.paths {
			if path == named {
				return true
			}
			if rest, ok := strings.CutPrefix(path, named+"."); ok && allIn(strings.Split(rest, "."), words) {
				return true
			}
		}
	}
	return false
}

func allIn(list []string, set map[string]bool) bool {
	for _, s := range list {
		if !set[s] {
			return false
		}
	}
	return true
}

// ruleQuotes are the quotes of the rule tables of api.md, by kind, with their lines.
func ruleQuotes(t *testing.T, doc string) map[string][]quote {
	t.Helper()
	out := map[string][]quote{}
	for _, tb := range apiTables(t, doc, "rule", "message begins with") {
		for _, r := range tb.Rows {
			spans := CodeSpans(r.Cells[1])
			if len(spans) == 0 {
				t.Errorf("api.md:%d: a rule row quotes no message in `code`", r.Line)
			}
			for _, q := range spans {
				out[tb.kind] = append(out[tb.kind], quote{text: q, line: r.Line})
			}
		}
	}
	return out
}

type quote struct {
	text string
	line int
}

func TestAPIRuleQuotesExistInTheCRDs(t *testing.T) {
	t.Parallel()
	schemas := crds(t)
	quotes := ruleQuotes(t, readDoc(t, "docs/api.md"))
	if len(quotes["EtcdCluster"]) < 20 {
		t.Fatalf("api.md quotes %d EtcdCluster messages: the rule tables are no longer read", len(quotes["EtcdCluster"]))
	}
	for kind, qs := range quotes {
		msgs := messages(schemas[kind])
		for _, q := range qs {
			if !anyMatches(q.text, msgs, true) {
				t.Errorf("api.md:%d: %s has no rule whose message begins with %q", q.line, kind, q.text)
			}
		}
	}
}

// Every message a user can meet when writing a spec (the rules on the spec and on the object)
// is quoted in the rule tables of its kind.
func TestAPIEverySpecRuleIsQuoted(t *testing.T) {
	t.Parallel()
	schemas := crds(t)
	quotes := ruleQuotes(t, readDoc(t, "docs/api.md"))
	for kind, root := range schemas {
		spec := root.Properties["spec"]
		for _, msg := range dedupe(append(messages(&spec), ruleMessages(root.XValidations)...)) {
			if !quoted(quotes[kind], msg) {
				t.Errorf("%s: the message %q is quoted in no rule table of api.md", kind, strings.ReplaceAll(msg, wildcard, "…"))
			}
		}
	}
}

func quoted(qs []quote, msg string) bool {
	for _, q := range qs {
		if quoteMatches(q.text, msg, true) {
			return true
		}
	}
	return false
}
