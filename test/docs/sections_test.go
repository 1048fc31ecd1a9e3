package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// sectionWalkthroughs are the sections of the reference docs that walk through a capability
// step by step, with the e2e test (test/e2e) that runs each as written.
var sectionWalkthroughs = []struct{ doc, heading, test string }{
	{"docs/backup-restore.md", "## Point-in-time recovery", "TestPointInTimeRecoveryAsWritten"},
	{"docs/tls.md", "## Rotating a CA", "TestCARotationUnderAWriter"},
	{"docs/day-two.md", "## Going back a version", "TestGoingBackAVersionAsWritten"},
}

// A sleep that waits for nothing but a second to pass (a time noted to the second); any other
// sleep waits for a condition, which is kubectl wait's.
var secondRE = regexp.MustCompile(`^sleep 1$`)

// Each section walkthrough parses (every shell block in it marked, every command ends), applies
// only files its YAML blocks hold, waits with kubectl wait, checks at least one output, names
// its e2e test, and that test exists and reads that section of that document.
func TestSectionsAreWalkthroughs(t *testing.T) {
	t.Parallel()
	e2e := e2eSources(t)
	for _, s := range sectionWalkthroughs {
		w, err := ParseSection(readDoc(t, s.doc), s.heading)
		if err != nil {
			t.Errorf("%s: %v", s.doc, err)
			continue
		}
		if waits, checked := checkSectionCommands(t, s.doc, s.heading, w); waits == 0 || checked == 0 {
			t.Errorf("%s %q: %d kubectl waits and %d checked outputs among %d commands; want some of each", s.doc, s.heading, waits, checked, len(w.Commands))
		}
		section := sectionText(t, s.doc, s.heading)
		if !strings.Contains(section, "`"+s.test+"`") {
			t.Errorf("%s %q does not name %s, the test that runs it", s.doc, s.heading, s.test)
		}
		body, ok := e2e[s.test]
		if !ok {
			t.Errorf("%s %q: no func %s in test/e2e", s.doc, s.heading, s.test)
			continue
		}
		if want := `readSection(t, "` + s.doc + `", "` + s.heading + `")`; !strings.Contains(body, want) {
			t.Errorf("%s does not run %s %q: want it to call %s", s.test, s.doc, s.heading, want)
		}
	}
}

// checkSectionCommands checks that the section's commands sleep only for a second and apply
// only its files, and counts its kubectl waits and the commands whose output is checked.
func checkSectionCommands(t *testing.T, doc, heading string, w Walkthrough) (waits, checked int) {
	t.Helper()
	for _, c := range w.Commands {
		if strings.Contains(c.Text, "sleep") && !secondRE.MatchString(strings.TrimSpace(c.Text)) {
			t.Errorf("%s:%d: %q sleeps; wait for a condition with kubectl wait", doc, c.Line, c.Text)
		}
		for _, m := range appliedFileRE.FindAllStringSubmatch(c.Text, -1) {
			if m[1] != "-" && w.Files[m[1]] == "" {
				t.Errorf("%s:%d: %q applies %s, which no YAML block of %q starting with # %s holds", doc, c.Line, c.Text, m[1], heading, m[1])
			}
		}
		if strings.HasPrefix(c.Text, "kubectl wait ") {
			waits++
		}
		if c.Output != "" || c.Fails {
			checked++
		}
	}
	return waits, checked
}

// sectionText is the text of the section under heading.
func sectionText(t *testing.T, doc, heading string) string {
	t.Helper()
	text := readDoc(t, doc)
	first, end, err := sectionLines(text, heading)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(text, "\n")
	return strings.Join(lines[first-1:min(end-1, len(lines))], "\n")
}

// e2eSources is the body of each Test function of test/e2e, by name.
func e2eSources(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(Root(), "test", "e2e", "*_test.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("test/e2e: %v (%d files)", err, len(files))
	}
	out := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		parts := strings.Split(string(b), "\nfunc ")
		for _, p := range parts[1:] {
			if name, _, ok := strings.Cut(p, "(t *testing.T) {"); ok && strings.HasPrefix(name, "Test") && !strings.ContainsAny(name, " \n") {
				out[name] = p
			}
		}
	}
	return out
}
