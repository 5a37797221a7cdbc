package server

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The server's layering: package server is the wiring, and nothing of
// ours builds on it but the binary (cmd/...), the conformance launcher
// (conformance/inproc) and the benchmark harnesses (scripts/bench*).
// Its internal packages never import it, and no layer below it (core,
// backends, spec, sim, internal) imports anything under server/. Tests
// may drive the whole server: its own (server/, sdktest, uitest), the
// conformance suite's, cmd's, and the engines' end-to-end HTTP tests
// named in serverTestImporters. No file outside package server names one
// of its files (a comment such as "package server's routes.go"): the
// layer below describes what it is handed, not where. The check parses
// import blocks only, so it costs milliseconds.
func TestLayering(t *testing.T) {
	const mod = "github.com/sluice-dev/sluice"
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	prodImporters := []string{"cmd/", "conformance/inproc/", "scripts/bench"}
	// The engines' end-to-end tests over loopback HTTP (a real engine
	// behind the real server): tests, never a dependency of the engines.
	serverTestImporters := []string{"backends/flite/http_test.go", "backends/sherpa/http_test.go"}
	testImporters := append([]string{"server/", "conformance/", "cmd/", "scripts/bench"}, serverTestImporters...)
	below := []string{"core/", "backends/", "spec/", "sim/", "internal/"}
	fileRef := regexp.MustCompile(`package server's [a-z_]+\.go|\bserver/[a-z_]+\.go\b`)
	fset := token.NewFileSet()
	checked := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := filepath.ToSlash(strings.TrimPrefix(path, root+string(filepath.Separator)))
		if d.IsDir() {
			switch name := d.Name(); {
			case path == root:
			case strings.HasPrefix(name, "."), name == "testdata", name == "node_modules", name == "models",
				name == "models-sherpa", name == "bin", name == "out":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		checked++
		isTest := strings.HasSuffix(rel, "_test.go")
		inServerPkg := strings.HasPrefix(rel, "server/") && !strings.Contains(strings.TrimPrefix(rel, "server/"), "/")
		for _, im := range f.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			if p != mod+"/server" && !strings.HasPrefix(p, mod+"/server/") {
				continue
			}
			hasPrefix := func(ps []string) bool {
				return slices.ContainsFunc(ps, func(pre string) bool { return strings.HasPrefix(rel, pre) })
			}
			switch {
			case hasPrefix(below) && !(isTest && slices.Contains(serverTestImporters, rel)):
				t.Errorf("%s imports %s: the layers below the server never import it", rel, p)
			case p != mod+"/server":
			case strings.HasPrefix(rel, "server/internal/"):
				t.Errorf("%s imports package server: its internal packages are handed what they need", rel)
			case isTest && !hasPrefix(testImporters):
				t.Errorf("%s imports package server: only the server's, the conformance suite's, cmd's and %v tests may", rel, serverTestImporters)
			case !isTest && !hasPrefix(prodImporters):
				t.Errorf("%s imports package server: only %v may", rel, prodImporters)
			}
		}
		if inServerPkg || rel == "scripts/edgemutants/mutants.go" || strings.HasPrefix(rel, "scripts/benchpeers/") {
			return nil // the mutants edit these files by name; benchpeers names ollama's server/sched.go
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range fileRef.FindAllString(string(b), -1) {
			t.Errorf("%s names %q: a file of package server, from outside it", rel, m)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("only %d Go files checked under %s", checked, root)
	}
}
