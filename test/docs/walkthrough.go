package docs

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// A walkthrough is a document whose shell blocks a reader runs in order, in one shell, on the
// files its YAML blocks name. Every ```sh block of it carries a marker on the line above:
//
//	<!-- walkthrough: run -->          the test runs each of its commands, in order
//	<!-- walkthrough: skip REASON -->  the test does not run it, for the reason given
//
// A command's trailing comment may state what it does, in two checked forms:
//
//	etcdctl put greeting hello   # OK                 one word: exactly what it prints
//	etcdctl put greeting hello   # Error: permission denied
//	                                                  it fails, and says that
//
// Any other comment is prose. A command waits with `kubectl wait`, never with sleep.

// Walkthrough is what a test needs to run a walkthrough as written.
type Walkthrough struct {
	// Files are the YAML blocks whose first line is "# NAME", by NAME: what the commands apply.
	Files map[string]string
	// Commands are the commands of the run blocks, in order.
	Commands []Command
}

// Command is one shell command of a run block.
type Command struct {
	Text string // as written, on one or more lines, its trailing comment included
	Line int    // its first line in the document
	// Output is the exact output its trailing comment promises (trimmed); empty: none.
	Output string
	// Fails says that it fails; Error is what its output says then.
	Fails bool
	Error string
}

// ParseWalkthrough reads a walkthrough: its files, and the commands of its run blocks. An
// unmarked shell block, an unknown marker, or a command that never ends is an error.
func ParseWalkthrough(markdown string) (Walkthrough, error) {
	return parseBlocks(Blocks(markdown))
}

// ParseSection reads the walkthrough of one section of a document: the files and commands
// of the blocks under heading (written as in the document, "## Rotating a CA"), up to the
// next heading of the same or a higher level; its subsections are part of it. The rest of
// the document may hold unmarked shell blocks. A heading that is not in the document, or is
// in it twice, is an error, and so is anything ParseWalkthrough refuses inside the section.
func ParseSection(markdown, heading string) (Walkthrough, error) {
	first, end, err := sectionLines(markdown, heading)
	if err != nil {
		return Walkthrough{}, err
	}
	var in []Block
	for _, b := range Blocks(markdown) {
		if fence := b.Line - 1; fence > first && fence < end {
			in = append(in, b)
		}
	}
	w, err := parseBlocks(in)
	if err != nil {
		return w, fmt.Errorf("section %q: %w", heading, err)
	}
	return w, nil
}

// sectionLines is where the section under heading is: its heading's line and the line of the
// next heading of the same or a higher level (one past the document's last line when none
// follows), numbered from 1. Headings inside fenced blocks are not headings.
func sectionLines(markdown, heading string) (first, end int, err error) {
	want, level, ok := headingOf(strings.TrimSpace(heading))
	if !ok {
		return 0, 0, fmt.Errorf("%q is not a Markdown heading (# to ######, a space, its text)", heading)
	}
	lines := strings.Split(markdown, "\n")
	end = len(lines) + 1
	inFence := false
	for i, line := range lines {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "```") {
			inFence = !inFence
			continue
		}
		h, l, ok := headingOf(line)
		switch {
		case inFence || !ok:
		case l == level && h == want && first != 0:
			return 0, 0, fmt.Errorf("the heading %q is on lines %d and %d: name the section by a heading it alone has", heading, first, i+1)
		case l == level && h == want:
			first = i + 1
		case first != 0 && l <= level && end == len(lines)+1:
			end = i + 1
		}
	}
	if first == 0 {
		return 0, 0, fmt.Errorf("no heading %q", heading)
	}
	return first, end, nil
}

// parseBlocks is the walkthrough of these blocks.
func parseBlocks(blocks []Block) (Walkthrough, error) {
	w := Walkthrough{Files: map[string]string{}}
	for _, b := range blocks {
		switch b.Lang {
		case "yaml":
			if name, ok := fileName(b.Text); ok {
				w.Files[name] = b.Text + "\n"
			}
		case "sh":
			cmds, err := runCommands(b)
			if err != nil {
				return w, err
			}
			w.Commands = append(w.Commands, cmds...)
		}
	}
	if len(w.Commands) == 0 {
		return w, fmt.Errorf("no block is marked <!-- walkthrough: run -->")
	}
	return w, nil
}

// fileName is the NAME of a YAML block whose first line is "# NAME" (one word).
func fileName(text string) (string, bool) {
	first, _, _ := strings.Cut(text, "\n")
	name, ok := strings.CutPrefix(first, "# ")
	return name, ok && name != "" && !strings.ContainsAny(name, " \t")
}

// runCommands returns the commands of a shell block marked run; none for one marked skip.
func runCommands(b Block) ([]Command, error) {
	switch {
	case b.Marker == "run":
		return SplitCommands(b.Text, b.Line)
	case strings.HasPrefix(b.Marker, "skip ") && len(strings.TrimSpace(b.Marker)) > len("skip "):
		return nil, nil
	case b.Marker == "":
		return nil, fmt.Errorf("line %d: a sh block without a marker: put <!-- walkthrough: run --> or <!-- walkthrough: skip REASON --> on the line above it", b.Line-1)
	default:
		return nil, fmt.Errorf("line %d: unknown walkthrough marker %q: run, or skip with a reason", b.Line-1, b.Marker)
	}
}

// SplitCommands splits a shell block into its commands: a command goes on over the next line
// while a quote or a brace group ({ ... }) is open, or its line ends in "\", "|", "&&" or
// "||", and over the body of a here-document (<<EOF ... EOF) up to its delimiter line. first
// is the block's first line in the document.
func SplitCommands(text string, first int) ([]Command, error) {
	var out []Command
	var s shellScan
	var cur []string
	var comment string
	start := 0
	for i, line := range strings.Split(text, "\n") {
		if len(cur) == 0 && strings.TrimSpace(line) == "" {
			continue
		}
		if len(cur) == 0 {
			start, comment = first+i, ""
		}
		cur = append(cur, line)
		body := s.heredoc != ""
		code, c := s.line(line)
		if !body {
			comment = c
		}
		if s.open() || (!body && continues(code)) {
			continue
		}
		out = append(out, newCommand(strings.Join(cur, "\n"), start, comment))
		cur = nil
	}
	if len(cur) > 0 {
		return nil, fmt.Errorf("line %d: the command %q never ends (an open quote, brace, here-document or continuation)", start, strings.Join(cur, "\n"))
	}
	return out, nil
}

func continues(code string) bool {
	code = strings.TrimSpace(code)
	for _, end := range []string{`\`, "|", "&&"} {
		if strings.HasSuffix(code, end) {
			return true
		}
	}
	return false
}

// newCommand is a command with what its trailing comment promises.
func newCommand(text string, line int, comment string) Command {
	c := Command{Text: text, Line: line}
	comment = strings.TrimSpace(comment)
	switch {
	case strings.HasPrefix(comment, "Error: "):
		c.Fails, c.Error = true, strings.TrimPrefix(comment, "Error: ")
	case comment != "" && !strings.ContainsAny(comment, " \t"):
		c.Output = comment
	}
	return c
}

// shellScan follows the shell's quoting across the lines of one command, as far as a
// walkthrough needs: single and double quotes, backslash escapes, comments, brace groups
// written as words ("f() {" ... "}"), and here-documents, whose bodies are not shell code.
type shellScan struct {
	single, double bool
	braces         int
	// heredoc is the delimiter of the here-document whose body the next line is in; dash
	// says that the delimiter line may be indented with tabs (<<-).
	heredoc string
	dash    bool
	// cont says that the line that opened the here-document goes on after its body.
	cont bool
}

func (s *shellScan) open() bool {
	return s.single || s.double || s.braces > 0 || s.heredoc != "" || s.cont
}

// line scans one line and returns its code and its comment (after an unquoted "#" that
// starts a word). A line of a here-document's body has neither; its delimiter line ends it.
func (s *shellScan) line(line string) (code, comment string) {
	if s.heredoc != "" {
		end := line
		if s.dash {
			end = strings.TrimLeft(end, "\t")
		}
		if end == s.heredoc {
			s.heredoc, s.dash = "", false // s.cont stays: the command goes on when its line did
		}
		return "", ""
	}
	s.cont = false
	code, comment = s.scan(line)
	if s.heredoc != "" {
		s.cont = continues(code)
	}
	return code, comment
}

func (s *shellScan) scan(line string) (code, comment string) {
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case s.single:
			s.single = c != '\''
		case c == '\\':
			i++
		case s.double:
			s.double = c != '"'
		case c == '\'':
			s.single = true
		case c == '"':
			s.double = true
		case c == '#' && wordStart(line, i):
			return line[:i], line[i+1:]
		case (c == '{' || c == '}') && isWord(line, i):
			s.braces += map[byte]int{'{': 1, '}': -1}[c]
		case hereDocAt(line, i):
			i += s.hereDocument(line[i+2:]) + 1
		}
	}
	return line, ""
}

// hereDocAt says whether a here-document's "<<" starts at i (not a here-string's "<<<").
func hereDocAt(line string, i int) bool {
	return strings.HasPrefix(line[i:], "<<") && !strings.HasPrefix(line[i:], "<<<") && (i == 0 || line[i-1] != '<')
}

// hereDocument reads the delimiter after "<<" (rest is what follows it): "-" for tabs, then
// a word, quoted or not. It returns how many characters of rest it read.
func (s *shellScan) hereDocument(rest string) int {
	n := 0
	if strings.HasPrefix(rest, "-") {
		s.dash, n = true, 1
	}
	for n < len(rest) && (rest[n] == ' ' || rest[n] == '\t') {
		n++
	}
	var word strings.Builder
	for ; n < len(rest) && !strings.ContainsRune(" \t;|&<>()", rune(rest[n])); n++ {
		if q := rest[n]; q == '\'' || q == '"' {
			closing := strings.IndexByte(rest[n+1:], q)
			if closing < 0 {
				break
			}
			word.WriteString(rest[n+1 : n+1+closing])
			n += closing + 1
			continue
		}
		if rest[n] != '\\' {
			word.WriteByte(rest[n])
		}
	}
	s.heredoc = word.String()
	return n
}

func wordStart(line string, i int) bool { return i == 0 || line[i-1] == ' ' || line[i-1] == '\t' }

// isWord says whether the character at i stands alone between blanks (or ";", or the line's
// ends): a brace that opens or closes a group, not one of ${x} or '{...}'.
func isWord(line string, i int) bool {
	before := i == 0 || strings.ContainsRune(" \t;", rune(line[i-1]))
	after := i == len(line)-1 || strings.ContainsRune(" \t;", rune(line[i+1]))
	return before && after
}

// Verdict compares what a command did with what its comment promises: "" when it kept it.
// failed says that it ended with a non-zero status.
func (c Command) Verdict(stdout, stderr string, failed bool) string {
	switch {
	case c.Fails && !failed:
		return "succeeded; the walkthrough says it fails with " + c.Error
	case c.Fails && !strings.Contains(stdout+stderr, c.Error):
		return fmt.Sprintf("failed without saying %q", c.Error)
	case !c.Fails && failed:
		return "failed: " + strings.TrimSpace(stderr)
	case c.Output != "" && strings.TrimSpace(stdout) != c.Output:
		return fmt.Sprintf("printed %q; the walkthrough says %q", strings.TrimSpace(stdout), c.Output)
	}
	return ""
}

// timeoutRE is a command's own --timeout (kubectl wait's).
var timeoutRE = regexp.MustCompile(`--timeout=(\d+)(s|m)\b`)

// Timeout is how long a command may take: its own --timeout and a minute more; a make
// command, which builds (a release compiles the operator and the plugin), 15 minutes; else two
// minutes.
func (c Command) Timeout() time.Duration {
	m := timeoutRE.FindStringSubmatch(c.Text)
	switch {
	case m == nil && strings.HasPrefix(c.Text, "make "):
		return 15 * time.Minute
	case m == nil:
		return 2 * time.Minute
	}
	n, _ := strconv.Atoi(m[1])
	unit := map[string]time.Duration{"s": time.Second, "m": time.Minute}[m[2]]
	return time.Duration(n)*unit + time.Minute
}
