package conformance

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Cell IDs are the links between the code and CONTRACT.md: every cell ID a
// Go comment or a core scenario file cites (a word such as ops.ready.infer,
// or a family such as time.shutdown-* or ops.*.status) is a cell of
// CONTRACT.md, and every section a comment quotes after "CONTRACT.md," is
// one of its headings or paragraph leads. A renamed or mistyped cell fails here, naming the file.
func TestCitedCellsExist(t *testing.T) {
	b, cells := readContract(t)
	ids := map[string]bool{}
	prefixes := map[string]bool{}
	for _, c := range cells {
		ids[c.ID] = true
		prefixes[c.ID[:strings.IndexByte(c.ID, '.')]] = true
	}
	contract := "\n" + string(b)
	section := regexp.MustCompile(`CONTRACT\.md,? "([^"]+)"`)
	word := regexp.MustCompile(`[a-z0-9.*-]+`)
	file := regexp.MustCompile(`\.(go|md|txt|yaml|json|tla|cfg|sh|js|mjs|html|css|svg|png|ndjson|c|h|cpp|cu|so|onnx|bin|wav)$`)
	check := func(path string, n int, text string) {
		for _, m := range section.FindAllStringSubmatch(text, -1) {
			if !strings.Contains(contract, "\n# "+m[1]+"\n") && !strings.Contains(contract, "\n## "+m[1]+"\n") &&
				!strings.Contains(contract, "\n"+m[1]) {
				t.Errorf("%s:%d cites CONTRACT.md %q, which is no heading of it", path, n, m[1])
			}
		}
		for _, w := range word.FindAllString(text, -1) {
			w = strings.TrimRight(w, ".-")
			dot := strings.IndexByte(w, '.')
			if dot <= 0 || !prefixes[w[:dot]] || file.MatchString(w) || dot == len(w)-1 {
				continue
			}
			if strings.Contains(w, "*") {
				family := regexp.MustCompile("^" + strings.ReplaceAll(regexp.QuoteMeta(w), `\*`, "[a-z0-9.-]*") + "$")
				found := false
				for id := range ids {
					found = found || family.MatchString(id)
				}
				if !found {
					t.Errorf("%s:%d cites the cells %s, and CONTRACT.md has none", path, n, w)
				}
				continue
			}
			if !ids[w] {
				t.Errorf("%s:%d cites cell %s, which CONTRACT.md does not have", path, n, w)
			}
		}
	}
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch name := d.Name(); {
			case path != ".." && strings.HasPrefix(name, "."), name == "models", name == "out", name == "bin", name == "node_modules":
				return filepath.SkipDir
			}
			return nil
		}
		scenario := strings.Contains(filepath.ToSlash(path), "core/testdata/scenarios/")
		if !strings.HasSuffix(path, ".go") && !scenario {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for n := 1; sc.Scan(); n++ {
			line := sc.Text()
			switch k := strings.Index(line, "//"); {
			case scenario && strings.HasPrefix(line, "#"):
				check(path, n, line)
			case !scenario && k >= 0:
				check(path, n, line[k:])
			}
		}
		return sc.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
}

// No Go comment cites an issue number: a reader cannot look one up. Cite
// the CONTRACT.md cell (or section) instead.
func TestNoIssueNumbers(t *testing.T) {
	re := regexp.MustCompile(`(?i)\bissues? ?-?[0-9]+|issue-[0-9]+`)
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch name := d.Name(); {
			case path != ".." && strings.HasPrefix(name, "."), name == "models", name == "out", name == "bin", name == "node_modules":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for n, line := range strings.Split(string(b), "\n") {
			if k := strings.Index(line, "//"); k >= 0 && re.MatchString(line[k:]) {
				t.Errorf("%s:%d cites an issue number: %s", path, n+1, strings.TrimSpace(line[k:]))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
