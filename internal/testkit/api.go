package testkit

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// APIShape describes one exported function or method as ExportedAPI found
// it.
type APIShape struct {
	// Context: one of its parameters is a context.Context.
	Context bool
	// Comm: it takes a *Comm (the comm package's own, or comm.Comm
	// elsewhere) as its receiver or a parameter.
	Comm bool
}

// ExportedAPI parses the non-test Go files of the package in dir and
// returns its exported functions ("Name") and the exported methods of its
// exported types ("Type.Method", generic or not), with their shapes.
// Tests that must cover a package's whole API (the malformed-call tests)
// compare their tables with it, so that a new function cannot be added
// without its cases. Files with build constraints are read too: the API
// is the union over builds.
func ExportedAPI(dir string) (map[string]APIShape, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	api := map[string]APIShape{}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || !fd.Name.IsExported() {
				continue
			}
			key := fd.Name.Name
			var shape APIShape
			if fd.Recv != nil {
				recv := receiverName(fd.Recv.List[0].Type)
				if !ast.IsExported(recv) {
					continue
				}
				key = recv + "." + key
				shape.Comm = recv == "Comm"
			}
			for _, p := range fd.Type.Params.List {
				shape.Context = shape.Context || isSelector(p.Type, "Context")
				if star, ok := p.Type.(*ast.StarExpr); ok && (isIdent(star.X, "Comm") || isSelector(star.X, "Comm")) {
					shape.Comm = true
				}
			}
			api[key] = shape
		}
	}
	return api, nil
}

// receiverName is the type name of a method's receiver (generic or not).
func receiverName(e ast.Expr) string {
	if s, ok := e.(*ast.StarExpr); ok {
		e = s.X
	}
	switch x := e.(type) {
	case *ast.IndexExpr:
		e = x.X
	case *ast.IndexListExpr:
		e = x.X
	}
	if id, ok := e.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}

func isSelector(e ast.Expr, name string) bool {
	sel, ok := e.(*ast.SelectorExpr)
	return ok && sel.Sel.Name == name
}

// CheckAPICovered fails t unless the names in cased are exactly the
// exported functions and methods of the package in dir (ExportedAPI),
// apart from those allowed lists with the reason they need no case.
func CheckAPICovered(t testing.TB, dir string, cased []string, allowed map[string]string) {
	t.Helper()
	api, err := ExportedAPI(dir)
	if err != nil {
		t.Fatal(err)
	}
	has := map[string]bool{}
	for _, name := range cased {
		has[name] = true
		if _, ok := api[name]; !ok {
			t.Errorf("case for %s, which is not an exported function or method", name)
		}
	}
	var missing []string
	for name := range api {
		if !has[name] && allowed[name] == "" {
			missing = append(missing, name)
		}
	}
	slices.Sort(missing)
	if len(missing) > 0 {
		t.Errorf("exported API without malformed calls: %v", missing)
	}
}

// ExportedFuncs parses the Go files of the package in dir (its test files
// when tests is set, else the others) and returns their exported top-level
// functions by name. The Start-form and Example checks read it.
func ExportedFuncs(dir string, tests bool) (map[string]*ast.FuncDecl, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	funcs := map[string]*ast.FuncDecl{}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") != tests {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil && fd.Name.IsExported() {
				funcs[fd.Name.Name] = fd
			}
		}
	}
	return funcs, nil
}

// TakesCtxAndComm reports whether fd's first two parameters are a
// context.Context and a *Comm (the comm package's own, or comm.Comm
// elsewhere): the shape of a collective.
func TakesCtxAndComm(fd *ast.FuncDecl) bool {
	var types []ast.Expr
	for _, p := range fd.Type.Params.List {
		for range max(len(p.Names), 1) {
			types = append(types, p.Type)
		}
	}
	if len(types) < 2 {
		return false
	}
	if sel, ok := types[0].(*ast.SelectorExpr); !ok || sel.Sel.Name != "Context" {
		return false
	}
	star, ok := types[1].(*ast.StarExpr)
	return ok && typeName(star.X) == "Comm"
}

// ReturnsPointerTo reports whether fd's only result is *name or, for a
// generic type, *name[...].
func ReturnsPointerTo(fd *ast.FuncDecl, name string) bool {
	if fd.Type.Results == nil || len(fd.Type.Results.List) != 1 {
		return false
	}
	star, ok := fd.Type.Results.List[0].Type.(*ast.StarExpr)
	return ok && typeName(star.X) == name
}

// typeName is the name a type expression refers to, without its package
// or type arguments ("" for other expressions).
func typeName(x ast.Expr) string {
	switch t := x.(type) {
	case *ast.Ident:
		return t.Name
	case *ast.SelectorExpr:
		return t.Sel.Name
	case *ast.IndexExpr:
		return typeName(t.X)
	case *ast.IndexListExpr:
		return typeName(t.X)
	}
	return ""
}
