package docs

import (
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestCells(t *testing.T) {
	t.Parallel()
	for line, want := range map[string][]string{
		"| a | b |":                       {"a", "b"},
		"| `x \\| y` | z |":               {"`x | y`", "z"},
		"|a||c|":                          {"a", "", "c"},
		"| enum `A` \\| `B`, immutable |": {"enum `A` | `B`, immutable"},
	} {
		if got := Cells(line); !reflect.DeepEqual(got, want) {
			t.Errorf("Cells(%q) = %q, want %q", line, got, want)
		}
	}
}

func TestTablesAndBlocks(t *testing.T) {
	t.Parallel()
	doc := strings.Join([]string{
		"## Kind (`k`)", "", "### Rules", "",
		"| a | b |", "| --- | --- |", "| 1 | 2 |", "| 3 | 4 |", "",
		"```sh", "| not | a table |", "```", "",
		"<!-- walkthrough: skip it is an example -->", "```sh", "echo hi", "```",
	}, "\n")
	tables := Tables(doc)
	if len(tables) != 1 || tables[0].Section != "Kind (`k`)" || tables[0].Heading != "Rules" ||
		len(tables[0].Rows) != 2 || tables[0].Rows[1].Line != 8 || tables[0].Rows[1].Cells[1] != "4" {
		t.Fatalf("Tables: %+v", tables)
	}
	blocks := Blocks(doc)
	if len(blocks) != 2 || blocks[0].Marker != "" || blocks[1].Marker != "skip it is an example" ||
		blocks[1].Text != "echo hi" || blocks[1].Line != 16 {
		t.Fatalf("Blocks: %+v", blocks)
	}
}

func TestQuoteMatches(t *testing.T) {
	t.Parallel()
	msg := "spec.version cannot jump from " + wildcard + " to " + wildcard + ": etcd upgrades one minor"
	for _, c := range []struct {
		quote, message string
		prefix, want   bool
	}{
		{"spec.version cannot jump from OLD to NEW", msg, true, true},
		{"spec.version cannot jump", msg, true, true},
		{"cannot jump from OLD", msg, true, false},
		{"cannot jump from OLD", msg, false, true},
		{"... one minor", msg, true, true},
		{"spec.version ... one minor", msg, true, true},
		{"spec.version ... two minors", msg, true, false},
		{"spec.version cannot leap", msg, true, false},
		{"a ... b", "b then a", false, false},
	} {
		if got := quoteMatches(c.quote, c.message, c.prefix); got != c.want {
			t.Errorf("quoteMatches(%q, %q, %v) = %v, want %v", c.quote, c.message, c.prefix, got, c.want)
		}
	}
}

func TestTemplate(t *testing.T) {
	t.Parallel()
	got := template(`'spec.version cannot jump from ' + oldSelf + ' to ' + self + ': it\'s one at a time'`)
	want := "spec.version cannot jump from " + wildcard + " to " + wildcard + ": it's one at a time"
	if got != want {
		t.Errorf("template = %q, want %q", got, want)
	}
}

func TestParseConstraint(t *testing.T) {
	t.Parallel()
	n := func(v int64) *int64 { return &v }
	for cell, want := range map[string]*constraint{
		"":                          nil,
		"integer, 10..86400":        {typ: "integer", min: n(10), max: n(86400)},
		"integer, ≥ 0":              {typ: "integer", min: n(0)},
		"list, ≤ 32 items":          {typ: "list", max: n(32)},
		"string, 1.. characters":    {typ: "string", min: n(1)},
		"enum `A` | `B`, immutable": {typ: "enum", enum: []string{"A", "B"}, immutable: true},
		"string, pattern `^a|b$`":   {typ: "string", pattern: "^a|b$"},
	} {
		got, err := parseConstraint(cell)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("parseConstraint(%q) = %+v, %v; want %+v", cell, got, err, want)
		}
	}
	for _, bad := range []string{"int", "integer, at most 3", "enum", "string, immutable, red"} {
		if _, err := parseConstraint(bad); err == nil {
			t.Errorf("parseConstraint(%q): no error", bad)
		}
	}
}

func TestSplitCommands(t *testing.T) {
	t.Parallel()
	block := strings.Join([]string{
		"POD=secure-1",
		"f() {",
		"  # a comment",
		`  kubectl exec "$POD" -- etcdctl "$@"`,
		"}",
		"",
		"f put a b   # OK",
		"f put a b   # Error: permission denied",
		`kubectl get etcd -o jsonpath='{.status.x} # not a comment'   # prose, not checked`,
		`kubectl patch x \`,
		`  -p '{"a":`,
		`"b"}'`,
	}, "\n")
	cmds, err := SplitCommands(block, 10)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range cmds {
		got = append(got, strings.Join([]string{strings.Fields(c.Text)[0], c.Output, c.Error}, "|"))
	}
	want := []string{"POD=secure-1||", "f()||", "f|OK|", "f||permission denied", "kubectl||", "kubectl||"}
	if !reflect.DeepEqual(got, want) || cmds[1].Line != 11 || cmds[2].Line != 16 || !cmds[3].Fails {
		t.Fatalf("SplitCommands: %q, lines %d %d", got, cmds[1].Line, cmds[2].Line)
	}
	if _, err := SplitCommands("echo 'open", 1); err == nil {
		t.Error("a command with an open quote was taken as complete")
	}
}

func TestParseWalkthroughNeedsMarkers(t *testing.T) {
	t.Parallel()
	for doc, want := range map[string]string{
		"```sh\necho\n```": "without a marker",
		"<!-- walkthrough: later -->\n```sh\necho\n```":    "unknown walkthrough marker",
		"<!-- walkthrough: skip -->\n```sh\necho\n```":     "unknown walkthrough marker",
		"<!-- walkthrough: skip why -->\n```sh\necho\n```": "no block is marked",
	} {
		if _, err := ParseWalkthrough(doc); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseWalkthrough(%q) = %v, want an error saying %q", doc, err, want)
		}
	}
}

var appliedFileRE = regexp.MustCompile(`-f (\S+)`)

// docs/tls-journey.md is a walkthrough test/e2e runs as written: every shell block is marked,
// every command ends, the files it applies are its YAML blocks, and it waits with kubectl
// wait, never with sleep.
func TestTLSJourneyIsAWalkthrough(t *testing.T) {
	t.Parallel()
	w, err := ParseWalkthrough(readDoc(t, "docs/tls-journey.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range w.Commands {
		if strings.Contains(c.Text, "sleep") {
			t.Errorf("tls-journey.md:%d: %q sleeps; wait for a condition with kubectl wait", c.Line, c.Text)
		}
		for _, m := range appliedFileRE.FindAllStringSubmatch(c.Text, -1) {
			if w.Files[m[1]] == "" {
				t.Errorf("tls-journey.md:%d: %q applies %s, which no YAML block starting with # %s holds", c.Line, c.Text, m[1], m[1])
			}
		}
	}
	if len(w.Commands) < 20 {
		t.Errorf("tls-journey.md has %d commands to run: blocks lost their run markers", len(w.Commands))
	}
}

func TestCommandVerdict(t *testing.T) {
	t.Parallel()
	ok := Command{Text: "etcdctl put a b", Output: "OK"}
	refused := Command{Text: "etcdctl put a b", Fails: true, Error: "permission denied"}
	prose := Command{Text: "kubectl get etcd"}
	for _, c := range []struct {
		cmd            Command
		stdout, stderr string
		failed, kept   bool
	}{
		{ok, "OK\n", "", false, true},
		{ok, "OK\n", "", true, false},
		{ok, "Error\n", "", false, false},
		{refused, "", "Error: etcdserver: permission denied", true, true},
		{refused, "OK", "", false, false},
		{refused, "", "Error: context deadline exceeded", true, false},
		{prose, "anything", "", false, true},
		{prose, "", "NotFound", true, false},
	} {
		if got := c.cmd.Verdict(c.stdout, c.stderr, c.failed); (got == "") != c.kept {
			t.Errorf("%+v printing %q, %q, failed %v: verdict %q, want kept=%v", c.cmd, c.stdout, c.stderr, c.failed, got, c.kept)
		}
	}
}

func TestCommandTimeout(t *testing.T) {
	t.Parallel()
	for text, want := range map[string]time.Duration{
		"kubectl wait --for=condition=Available etcd/x --timeout=5m": 6 * time.Minute,
		"kubectl wait --for=delete pod/x --timeout=30s":              90 * time.Second,
		"kubectl get etcd":            2 * time.Minute,
		"make release VERSION=v0.3.0": 15 * time.Minute,
	} {
		if got := (Command{Text: text}).Timeout(); got != want {
			t.Errorf("Timeout of %q = %s, want %s", text, got, want)
		}
	}
}

// registryRE is the placeholder registry of install.md, with what precedes it.
var registryRE = regexp.MustCompile(`(\$\{REGISTRY:-)?registry\.example`)

// docs/install.md is a walkthrough test/e2e runs as written: every shell block is marked, the
// release is made, pushed, installed with helm, its CRDs applied and uninstalled, and every
// run command names the placeholder registry as ${REGISTRY:-registry.example}, through which
// the test gives its own.
func TestInstallDocIsAWalkthrough(t *testing.T) {
	t.Parallel()
	w, err := ParseWalkthrough(readDoc(t, "docs/install.md"))
	if err != nil {
		t.Fatal(err)
	}
	var ran []string
	for _, c := range w.Commands {
		fields := strings.Fields(c.Text)
		ran = append(ran, strings.Join(fields[:min(2, len(fields))], " "))
		for _, m := range registryRE.FindAllStringSubmatch(c.Text, -1) {
			if m[1] == "" {
				t.Errorf("install.md:%d: %q names registry.example: write ${REGISTRY:-registry.example}", c.Line, c.Text)
			}
		}
	}
	want := []string{"make release", "make push", "helm install", "tar -xzf", "kubectl apply", "helm uninstall"}
	if !reflect.DeepEqual(ran, want) {
		t.Errorf("install.md runs %q, want %q: blocks lost or gained their run markers", ran, want)
	}
}

func TestSplitCommandsHereDocuments(t *testing.T) {
	t.Parallel()
	block := strings.Join([]string{
		"kubectl apply -f - <<EOF   # created",
		"metadata:",
		"  name: it's # not a comment, nor an open quote",
		"  endpoint: ${S3_ENDPOINT:-https://s3.example}",
		"EOF",
		"cat <<-'END' | wc -l && echo done",
		"\tbody",
		"\tEND",
		"echo next   # next",
		`cat <<"X" &&`,
		"x",
		"X",
		"echo after",
		"cat <<<'a here-string, not a document'",
	}, "\n")
	cmds, err := SplitCommands(block, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(cmds) != 5 || cmds[0].Output != "created" || !strings.HasSuffix(cmds[0].Text, "\nEOF") ||
		cmds[1].Line != 6 || !strings.HasSuffix(cmds[1].Text, "\tEND") ||
		cmds[2].Text != "echo next   # next" || cmds[2].Output != "next" ||
		cmds[3].Line != 10 || !strings.HasSuffix(cmds[3].Text, "echo after") || cmds[4].Line != 14 {
		t.Fatalf("SplitCommands: %d commands %+v", len(cmds), cmds)
	}
	if _, err := SplitCommands("cat <<EOF\nno end", 1); err == nil || !strings.Contains(err.Error(), "never ends") {
		t.Errorf("a here-document without its delimiter line: %v", err)
	}
}

// sectionDoc is a document of three sections, the second with a subsection.
var sectionDoc = []string{
	"# Doc", // 1
	"```sh",
	"unmarked outside the section",
	"```",
	"## First", // 5
	"<!-- walkthrough: run -->",
	"```sh",
	"echo first",
	"```",
	"## Second", // 10
	"```yaml",
	"# file.yaml",
	"## not a heading: inside a block",
	"```",
	"<!-- walkthrough: run -->",
	"```sh",
	"kubectl apply -f file.yaml",
	"```",
	"### Sub of second", // 19
	"<!-- walkthrough: skip shown only -->",
	"```sh",
	"echo skipped",
	"```",
	"<!-- walkthrough: run -->",
	"```sh",
	"echo sub",
	"```",
	"## Third", // 28
	"```sh",
	"unmarked after the section",
	"```",
}

func TestParseSection(t *testing.T) {
	t.Parallel()
	doc := strings.Join(sectionDoc, "\n")
	w, err := ParseSection(doc, "## Second")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range w.Commands {
		got = append(got, fmt.Sprintf("%d %s", c.Line, c.Text))
	}
	want := []string{"17 kubectl apply -f file.yaml", "26 echo sub"}
	if !reflect.DeepEqual(got, want) || len(w.Files) != 1 || !strings.HasPrefix(w.Files["file.yaml"], "# file.yaml\n## not a heading") {
		t.Fatalf("ParseSection(## Second): commands %q, files %q; want %q and file.yaml", got, w.Files, want)
	}
	if w, err := ParseSection(doc, "### Sub of second"); err != nil || len(w.Commands) != 1 || w.Commands[0].Text != "echo sub" || len(w.Files) != 0 {
		t.Errorf("ParseSection(### Sub of second) = %+v, %v; want only echo sub", w, err)
	}
	if w, err := ParseSection(doc, "## First"); err != nil || len(w.Commands) != 1 || w.Commands[0].Line != 8 {
		t.Errorf("ParseSection(## First) = %+v, %v", w, err)
	}
}

func TestParseSectionRefuses(t *testing.T) {
	t.Parallel()
	doc := strings.Join(sectionDoc, "\n")
	for heading, want := range map[string]string{
		"## Third":                         "without a marker",
		"## Fourth":                        "no heading",
		"## First and more":                "no heading",
		"### First":                        "no heading",
		"First":                            "not a Markdown heading",
		"## not a heading: inside a block": "no heading",
	} {
		if _, err := ParseSection(doc, heading); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseSection(%q) = %v, want an error saying %q", heading, err, want)
		}
	}
	twice := doc + "\n## First\n"
	if _, err := ParseSection(twice, "## First"); err == nil || !strings.Contains(err.Error(), "lines 5 and 32") {
		t.Errorf("a heading written twice: %v", err)
	}
	// The whole document is still read as one walkthrough, and refused for its unmarked blocks.
	if _, err := ParseWalkthrough(doc); err == nil || !strings.Contains(err.Error(), "line 2:") {
		t.Errorf("ParseWalkthrough of the whole document: %v, want its unmarked first block refused", err)
	}
}
