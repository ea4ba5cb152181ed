package fastnet

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

// The core is sans-IO (the package documentation, and the README's
// "Embedding the engine in your own loop"): no sockets, files, locks,
// logging, goroutines, wall clock or global randomness. This test reads the source of
// every core package and fails on any of them, so the rule cannot rot.
func TestCoreIsPure(t *testing.T) {
	forbiddenImports := map[string]bool{
		"net": true, "os": true, "sync": true, "syscall": true, "log": true,
		"math/rand": true, "unsafe": true, "time/tzdata": true,
	}
	forbiddenCalls := map[string]bool{
		"time.Now": true, "time.Sleep": true, "time.After": true, "time.AfterFunc": true,
		"time.NewTimer": true, "time.NewTicker": true, "time.Tick": true, "time.Since": true,
		"time.Until": true,
		// math/rand/v2's top-level functions use a global source.
		"rand.Int": true, "rand.IntN": true, "rand.Uint32": true, "rand.Uint64": true,
		"rand.Int64": true, "rand.Float64": true, "rand.Perm": true, "rand.Shuffle": true,
		"rand.N": true, "rand.Int32": true, "rand.Int64N": true, "rand.Uint32N": true,
		"rand.Uint64N": true, "rand.Int32N": true, "rand.UintN": true, "rand.Uint": true,
		"rand.Float32": true, "rand.NormFloat64": true, "rand.ExpFloat64": true,
	}
	// The URP core (docs/urp.md) needs no time at all: its relay and
	// client are driven by packets alone.
	stricter := map[string]map[string]bool{
		"../urp": {"time": true, "crypto/rand": true, "log/slog": true},
	}
	for _, dir := range []string{".", "../channel", "../coalesce", "../mtu", "../urp"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		if len(files) == 0 {
			t.Fatalf("no Go files in %s", dir)
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
				if forbiddenImports[path] || stricter[dir][path] {
					t.Errorf("%s imports %q", name, path)
				}
			}
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.GoStmt:
					t.Errorf("%s starts a goroutine", name)
				case *ast.SelectorExpr:
					if x, ok := n.X.(*ast.Ident); ok && forbiddenCalls[x.Name+"."+n.Sel.Name] {
						t.Errorf("%s uses %s.%s", name, x.Name, n.Sel.Name)
					}
				}
				return true
			})
		}
	}
}
