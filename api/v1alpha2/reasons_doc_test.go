package v1alpha2

import (
	"go/ast"
	"go/constant"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// reasonConstants parses reasons.go and returns its constants named Reason*, by name, with
// their values: the reasons the operator may write.
func reasonConstants(t *testing.T) map[string]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "reasons.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, decl := range f.Decls {
		gen, ok := decl.(*ast.GenDecl)
		if !ok || gen.Tok != token.CONST {
			continue
		}
		for _, spec := range gen.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, id := range vs.Names {
				if strings.HasPrefix(id.Name, "Reason") && i < len(vs.Values) {
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						out[id.Name] = constant.StringVal(constant.MakeFromLiteral(lit.Value, lit.Kind, 0))
					}
				}
			}
		}
	}
	return out
}

// docs/reasons.md promises every condition and event reason with what to do: a reason added
// to reasons.go must get its row there.
func TestEveryReasonIsDocumented(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/reasons.md")
	if err != nil {
		t.Fatal(err)
	}
	reasons := reasonConstants(t)
	if len(reasons) < 100 {
		t.Fatalf("found only %d Reason constants in reasons.go: the parse no longer sees how they are written", len(reasons))
	}
	for name, value := range reasons {
		if !strings.Contains(string(doc), "`"+value+"`") {
			t.Errorf("%s (%q) has no row in docs/reasons.md: add what it means and what to do", name, value)
		}
	}
}

// A reason written as a string literal escapes the test above: the code must name the
// constant. TestNoReasonLiterals looks, in every non-test Go file under internal/, at the
// places a reason is written: a Reason field (set or in a literal), a variable named reason,
// the reason parameter of any function or method declared there (events, conditions,
// waits), and the argument after an event type or a condition status (the event recorders).
func TestNoReasonLiterals(t *testing.T) {
	t.Parallel()
	files := parseInternal(t)
	params := reasonParams(files)
	if len(params["event"]) == 0 || len(params["waitFor"]) == 0 {
		t.Fatalf("the scan no longer finds the reason parameters of event and waitFor: %v", params)
	}
	sites := 0
	for _, f := range files {
		ast.Inspect(f.file, func(n ast.Node) bool {
			for _, e := range reasonExprs(n, params) {
				sites++
				if lit, ok := e.(*ast.BasicLit); ok && lit.Kind == token.STRING && lit.Value != `""` {
					t.Errorf("%s: reason %s written as a literal: use (or add) its constant in api/v1alpha2/reasons.go", f.fset.Position(lit.Pos()), lit.Value)
				}
			}
			return true
		})
	}
	if sites < 150 {
		t.Fatalf("found only %d places that write a reason: the scan no longer sees how reasons are written", sites)
	}
}

type parsedFile struct {
	fset *token.FileSet
	file *ast.File
}

func parseInternal(t *testing.T) map[string]parsedFile {
	t.Helper()
	out := map[string]parsedFile{}
	fset := token.NewFileSet()
	err := filepath.WalkDir("../../internal", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		out[path] = parsedFile{fset, f}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// reasonParams maps the name of every function and method with a string parameter named
// reason to that parameter's positions.
func reasonParams(files map[string]parsedFile) map[string][]int {
	out := map[string][]int{}
	for _, f := range files {
		for _, decl := range f.file.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok {
				continue
			}
			i := 0
			for _, field := range fn.Type.Params.List {
				for _, id := range field.Names {
					if id.Name == "reason" {
						out[fn.Name.Name] = append(out[fn.Name.Name], i)
					}
					i++
				}
			}
		}
	}
	return out
}

// marksAReason are the identifiers after which a call's next argument is a reason.
var marksAReason = map[string]bool{"EventTypeNormal": true, "EventTypeWarning": true, "ConditionTrue": true, "ConditionFalse": true, "ConditionUnknown": true}

// reasonExprs returns the expressions of n that are written as a reason.
func reasonExprs(n ast.Node, params map[string][]int) []ast.Expr {
	var out []ast.Expr
	switch n := n.(type) {
	case *ast.KeyValueExpr:
		if id, ok := n.Key.(*ast.Ident); ok && id.Name == "Reason" {
			out = append(out, n.Value)
		}
	case *ast.AssignStmt:
		for i, lhs := range n.Lhs {
			if isReasonTarget(lhs) && len(n.Lhs) == len(n.Rhs) {
				out = append(out, n.Rhs[i])
			}
		}
	case *ast.CallExpr:
		for _, at := range params[calledName(n.Fun)] {
			if at < len(n.Args) {
				out = append(out, n.Args[at])
			}
		}
		for i, arg := range n.Args[:max(len(n.Args)-1, 0)] {
			if sel, ok := arg.(*ast.SelectorExpr); ok && marksAReason[sel.Sel.Name] {
				out = append(out, n.Args[i+1])
			}
		}
	}
	return out
}

func isReasonTarget(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name == "reason"
	case *ast.SelectorExpr:
		return e.Sel.Name == "Reason"
	}
	return false
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
