package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// zerologFields are the methods of zerolog's Event and Context whose first
// argument is a field's key.
var zerologFields = map[string]bool{
	"Str": true, "Strs": true, "Stringer": true, "Int": true, "Ints": true,
	"Int32": true, "Int64": true, "Uint32": true, "Uint64": true, "Float64": true,
	"Bool": true, "Dur": true, "Time": true, "AnErr": true, "Errs": true,
	"Interface": true, "Any": true, "RawJSON": true, "Hex": true, "Bytes": true,
	"Dict": true, "Object": true, "Array": true, "IPAddr": true,
}

var logKey = regexp.MustCompile(`^[a-z][a-zA-Z0-9]*$`)

// TestLogKeysAreLowerCamelCase reads every Go file of the module and checks
// that each log field key is written one way (lowerCamelCase, as "retryIn"
// or "statusBranch"), so an operator's query for a key finds every line
// that carries it.
func TestLogKeysAreLowerCamelCase(t *testing.T) {
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	checked := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) != 2 { // a field: key and value (a flag set's Bool has three)
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || !zerologFields[sel.Sel.Name] {
				return true
			}
			lit, ok := call.Args[0].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			key, err := strconv.Unquote(lit.Value)
			if err != nil {
				return true
			}
			checked++
			if !logKey.MatchString(key) {
				t.Errorf("%s: log key %q is not lowerCamelCase", fset.Position(lit.Pos()), key)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 50 {
		t.Fatalf("only %d log keys found: the walk missed the module's files", checked)
	}
}
