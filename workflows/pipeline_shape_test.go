package workflows

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The limits issue #47 set on a call's path: a newcomer who wants to change
// one stage reads the stage file and that stage, not every step of every
// other.
const (
	maxPathSteps   = 25
	maxPathFiles   = 8
	maxStageLines  = 200
	stageFile      = "pipeline.go"
	pathRoot       = "run.execute"
	flightTypeName = "flight"
)

// A call's path, from run.execute, is the functions that take the call in
// flight (a *flight, as receiver or parameter) reachable from it through
// such functions: the pipeline, its boundaries and its stages. The stages'
// own helpers — a policy's evaluation, a memo lookup, a ledger request —
// take plain values and are read by whoever changes that stage.
func TestCallPathIsShort(t *testing.T) {
	path, files := callPath(t, ".")
	t.Logf("a call's path: %d steps in %d files: %s", len(path), len(files), strings.Join(path, ", "))
	require.LessOrEqual(t, len(path), maxPathSteps, "steps on a call's path")
	require.LessOrEqual(t, len(files), maxPathFiles, "files on a call's path: %v", files)
	src, err := os.ReadFile(stageFile)
	require.NoError(t, err)
	require.Less(t, strings.Count(string(src), "\n"), maxStageLines, "lines in %s", stageFile)
}

// fn is a function declared in the package, by its key ("run.execute",
// "flight.end", "spanOf").
type fn struct {
	decl *ast.FuncDecl
	file string
}

// callPath lists the steps of a call's path (see TestCallPathIsShort) in
// the package in dir, and the files they are in.
func callPath(t *testing.T, dir string) (steps, files []string) {
	t.Helper()
	fset := token.NewFileSet()
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	require.NoError(t, err)
	funcs := map[string]fn{}
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		require.NoError(t, err)
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok {
				funcs[funcKey(fd)] = fn{decl: fd, file: filepath.Base(name)}
			}
		}
	}
	require.Contains(t, funcs, pathRoot)
	seen := map[string]bool{}
	inFiles := map[string]bool{}
	var walk func(key string)
	walk = func(key string) {
		if seen[key] {
			return
		}
		seen[key] = true
		f := funcs[key]
		inFiles[f.file] = true
		vars := paramTypes(f.decl)
		ast.Inspect(f.decl.Body, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			for _, callee := range callees(call, vars, funcs) {
				if takesFlight(funcs[callee].decl) {
					walk(callee)
				}
			}
			return true
		})
	}
	walk(pathRoot)
	for k := range seen {
		steps = append(steps, k)
	}
	for k := range inFiles {
		files = append(files, k)
	}
	sort.Strings(steps)
	sort.Strings(files)
	return steps, files
}

// funcKey is "Type.Method" for a method, the name for a function.
func funcKey(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	return typeName(fd.Recv.List[0].Type) + "." + fd.Name.Name
}

// typeName is a type expression's name without its pointer ("*run": run).
func typeName(e ast.Expr) string {
	if s, ok := e.(*ast.StarExpr); ok {
		e = s.X
	}
	if id, ok := e.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

// paramTypes maps a function's receiver and parameter names to their types.
func paramTypes(fd *ast.FuncDecl) map[string]string {
	vars := map[string]string{}
	for _, l := range []*ast.FieldList{fd.Recv, fd.Type.Params} {
		if l == nil {
			continue
		}
		for _, field := range l.List {
			for _, n := range field.Names {
				vars[n.Name] = typeName(field.Type)
			}
		}
	}
	return vars
}

// takesFlight reports whether fd takes the call in flight.
func takesFlight(fd *ast.FuncDecl) bool {
	if fd == nil {
		return false
	}
	for _, ty := range paramTypes(fd) {
		if ty == flightTypeName {
			return true
		}
	}
	return false
}

// callees are the package's functions call may call: a method on a
// receiver or parameter of known type, a package function, or — on a
// variable of unknown type — every method of that name.
func callees(call *ast.CallExpr, vars map[string]string, funcs map[string]fn) []string {
	switch f := call.Fun.(type) {
	case *ast.Ident:
		if _, ok := funcs[f.Name]; ok {
			return []string{f.Name}
		}
	case *ast.SelectorExpr:
		if x, ok := f.X.(*ast.Ident); ok {
			if ty, ok := vars[x.Name]; ok {
				return []string{ty + "." + f.Sel.Name}
			}
		}
		var out []string
		for k := range funcs {
			if strings.HasSuffix(k, "."+f.Sel.Name) {
				out = append(out, k)
			}
		}
		return out
	}
	return nil
}
