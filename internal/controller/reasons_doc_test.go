package controller

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// reasonsInCode finds, in the non-test files of this package and of the controllers under it
// (snapshot, schedule, defrag, alarms), every reason the operator writes: constants named
// Reason*, the string given right after an event type or a condition status (events,
// readyCondition), Reason fields of condition literals, and the reason argument of waitFor
// and of the defrag controller's wait and finish (reasonArg).
func reasonsInCode(t *testing.T) []string {
	t.Helper()
	var files []string
	for _, pattern := range []string{"*.go", "*/*.go"} {
		matches, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, matches...)
	}
	if !slices.Contains(files, filepath.Join("snapshot", "controller.go")) {
		t.Fatalf("the search does not reach the snapshot controller: %v", files)
	}
	found := map[string]bool{}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			for _, r := range reasonsIn(n) {
				found[r] = true
			}
			return true
		})
	}
	out := make([]string, 0, len(found))
	for r := range found {
		out = append(out, r)
	}
	slices.Sort(out)
	return out
}

// marksAReason are the identifiers after which a call's next argument is a reason.
var marksAReason = map[string]bool{"EventTypeNormal": true, "EventTypeWarning": true, "ConditionTrue": true, "ConditionFalse": true}

func reasonsIn(n ast.Node) []string {
	var out []string
	switch n := n.(type) {
	case *ast.ValueSpec:
		for i, id := range n.Names {
			if strings.HasPrefix(id.Name, "Reason") && i < len(n.Values) {
				out = appendLiteral(out, n.Values[i])
			}
		}
	case *ast.KeyValueExpr:
		if id, ok := n.Key.(*ast.Ident); ok && id.Name == "Reason" {
			out = appendLiteral(out, n.Value)
		}
	case *ast.CallExpr:
		if at, ok := reasonArg[calledName(n.Fun)]; ok && len(n.Args) >= 2 {
			out = appendLiteral(out, n.Args[at(len(n.Args))])
		}
		for i, arg := range n.Args[:max(len(n.Args)-1, 0)] {
			if sel, ok := arg.(*ast.SelectorExpr); ok && marksAReason[sel.Sel.Name] {
				out = appendLiteral(out, n.Args[i+1])
			}
		}
	}
	return out
}

// reasonArg says which argument of a call (given how many there are) is a reason: waitFor's
// first; the one before the message, last, of the defrag controller's wait and finish.
var reasonArg = map[string]func(n int) int{
	"waitFor": func(int) int { return 0 },
	"wait":    func(n int) int { return n - 2 },
	"finish":  func(n int) int { return n - 2 },
}

func calledName(fun ast.Expr) string {
	switch f := fun.(type) {
	case *ast.Ident:
		return f.Name
	case *ast.SelectorExpr:
		return f.Sel.Name
	}
	return ""
}

func appendLiteral(out []string, e ast.Expr) []string {
	if lit, ok := e.(*ast.BasicLit); ok && lit.Kind == token.STRING {
		if s, err := strconv.Unquote(lit.Value); err == nil {
			return append(out, s)
		}
	}
	return out
}

// docs/reasons.md promises every condition and event reason with what to do: a reason added
// in code must get its row there.
func TestEveryReasonIsDocumented(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/reasons.md")
	if err != nil {
		t.Fatal(err)
	}
	reasons := reasonsInCode(t)
	if len(reasons) < 30 {
		t.Fatalf("found only %d reasons in the code (%v): the search no longer sees how reasons are written", len(reasons), reasons)
	}
	for _, r := range reasons {
		if !strings.Contains(string(doc), "`"+r+"`") {
			t.Errorf("reason %s is written by the operator but has no row in docs/reasons.md: add what it means and what to do", r)
		}
	}
}
