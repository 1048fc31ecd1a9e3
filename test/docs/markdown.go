// Package docs reads the project's Markdown documentation for the tests that hold it to the
// code: its tables (field references, validation rules), its fenced blocks, and the markers
// that say which shell blocks of a walkthrough a test runs. The tests here check docs/ against
// the CRDs (config/crd/bases) and the code; test/e2e runs the walkthroughs.
package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
)

// Root is the repository's root directory, found from this file's place in it, so that the
// tests of any package (test/docs, test/e2e) read the same files.
func Root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Read returns a file of the repository by its path from the root (docs/api.md).
func Read(path string) (string, error) {
	b, err := os.ReadFile(filepath.Join(Root(), path))
	return string(b), err
}

// Table is one Markdown table: its header cells and rows, under which headings.
type Table struct {
	Section string // the level-2 heading above it ("EtcdCluster (`etcd`)")
	Heading string // the nearest heading above it, of any level
	Line    int    // the header's line, from 1
	Header  []string
	Rows    []Row
}

// Row is one table row: its cells, unescaped, and its line.
type Row struct {
	Line  int
	Cells []string
}

// Block is one fenced code block: its language, its text (without the fences), its first
// line's number, and the walkthrough marker on the line before its opening fence, if any.
type Block struct {
	Lang   string
	Text   string
	Line   int
	Marker string
}

// markerRE is a walkthrough marker: an HTML comment (invisible once rendered) right above a
// block, "<!-- walkthrough: run -->" or "<!-- walkthrough: skip REASON -->".
var markerRE = regexp.MustCompile(`^<!--\s*walkthrough:\s*(.*?)\s*-->$`)

// Tables returns every table outside fenced blocks, in order. A table is a header row, a
// delimiter row (| --- |) and the rows after it up to the first line that is not a row.
func Tables(markdown string) []Table {
	var out []Table
	var section, heading string
	lines := strings.Split(markdown, "\n")
	inFence := false
	for i := 0; i < len(lines); i++ {
		line := strings.TrimSpace(lines[i])
		if strings.HasPrefix(line, "```") {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		if h, level, ok := headingOf(line); ok {
			heading = h
			if level == 2 {
				section = h
			}
			continue
		}
		if !isRow(line) || i+1 >= len(lines) || !isDelimiter(strings.TrimSpace(lines[i+1])) {
			continue
		}
		t := Table{Section: section, Heading: heading, Line: i + 1, Header: Cells(line)}
		for i += 2; i < len(lines) && isRow(strings.TrimSpace(lines[i])); i++ {
			t.Rows = append(t.Rows, Row{Line: i + 1, Cells: Cells(strings.TrimSpace(lines[i]))})
		}
		i--
		out = append(out, t)
	}
	return out
}

func headingOf(line string) (text string, level int, ok bool) {
	level = len(line) - len(strings.TrimLeft(line, "#"))
	if level == 0 || level > 6 || !strings.HasPrefix(line[level:], " ") {
		return "", 0, false
	}
	return strings.TrimSpace(line[level:]), level, true
}

func isRow(line string) bool { return strings.HasPrefix(line, "|") }

func isDelimiter(line string) bool {
	if !isRow(line) {
		return false
	}
	for _, c := range Cells(line) {
		if strings.Trim(c, ":-") != "" || !strings.Contains(c, "-") {
			return false
		}
	}
	return true
}

// Cells splits a table row at its unescaped pipes, as GitHub's Markdown does (inside code
// spans too), and unescapes "\|" in each cell.
func Cells(line string) []string {
	line = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(line), "|"), "|")
	var cells []string
	var cell strings.Builder
	for i := 0; i < len(line); i++ {
		switch {
		case line[i] == '\\' && i+1 < len(line) && line[i+1] == '|':
			cell.WriteByte('|')
			i++
		case line[i] == '|':
			cells = append(cells, strings.TrimSpace(cell.String()))
			cell.Reset()
		default:
			cell.WriteByte(line[i])
		}
	}
	return append(cells, strings.TrimSpace(cell.String()))
}

// Blocks returns every fenced code block, in order, with the walkthrough marker written on
// the line right above its opening fence.
func Blocks(markdown string) []Block {
	var out []Block
	lines := strings.Split(markdown, "\n")
	for i := 0; i < len(lines); i++ {
		open := strings.TrimSpace(lines[i])
		if !strings.HasPrefix(open, "```") {
			continue
		}
		b := Block{Lang: strings.TrimPrefix(open, "```"), Line: i + 2}
		if i > 0 {
			if m := markerRE.FindStringSubmatch(strings.TrimSpace(lines[i-1])); m != nil {
				b.Marker = m[1]
			}
		}
		var text []string
		for i++; i < len(lines) && !strings.HasPrefix(strings.TrimSpace(lines[i]), "```"); i++ {
			text = append(text, lines[i])
		}
		b.Text = strings.Join(text, "\n")
		out = append(out, b)
	}
	return out
}

// codeSpanRE is an inline code span.
var codeSpanRE = regexp.MustCompile("`([^`]+)`")

// CodeSpans returns the contents of the inline code spans of a text, in order.
func CodeSpans(text string) []string {
	var out []string
	for _, m := range codeSpanRE.FindAllStringSubmatch(text, -1) {
		out = append(out, m[1])
	}
	return out
}
