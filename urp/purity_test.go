package urp

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestCoreIsPure checks that the core is sans-IO, as the package
// documentation says: no sockets, files, locks, logging, goroutines,
// clock or global randomness in its non-test source.
func TestCoreIsPure(t *testing.T) {
	forbiddenImports := map[string]bool{
		"net": true, "os": true, "sync": true, "syscall": true, "log": true, "log/slog": true,
		"math/rand": true, "unsafe": true, "time": true, "crypto/rand": true,
	}
	files, err := filepath.Glob("*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go files: %v", err)
	}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if forbiddenImports[path] {
				t.Errorf("%s imports %q", name, path)
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.GoStmt:
				t.Errorf("%s starts a goroutine", name)
			case *ast.SelectorExpr:
				// math/rand/v2's functions use a global source; the
				// core draws only from Config.Rand.
				if x, ok := n.X.(*ast.Ident); ok && x.Name == "rand" && n.Sel.Name != "Rand" && n.Sel.Name != "New" && n.Sel.Name != "NewPCG" {
					t.Errorf("%s uses rand.%s", name, n.Sel.Name)
				}
			}
			return true
		})
	}
}
