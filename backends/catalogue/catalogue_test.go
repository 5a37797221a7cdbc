package catalogue

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/backends"
)

// fixture writes source files and returns a recipe for a small checkpoint.
func fixture(t *testing.T, name string) Recipe {
	t.Helper()
	src := t.TempDir()
	a := filepath.Join(src, "weights.bin")
	b := filepath.Join(src, "vocab.txt")
	os.WriteFile(a, []byte("0123456789abcdef"), 0o644)
	os.WriteFile(b, []byte("hello\nworld\n"), 0o644)
	return Recipe{
		Manifest: Manifest{Schema: Schema, Name: name, Task: "asr", Engine: "fake", Options: json.RawMessage(`{"beam":3}`), Parallel: Parallel{MaxSlots: 4}},
		Files:    []Source{{Dest: "weights.bin", Src: a}, {Dest: "sub/vocab.txt", Src: b}, {Dest: "gen.txt", Content: []byte("generated")}},
	}
}

func build(t *testing.T, root string, rs ...Recipe) BuildReport {
	t.Helper()
	rep, err := Build(root, rs)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func isInvalid(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, backends.ErrInvalid) {
		t.Errorf("%s: got %v, want an error wrapping ErrInvalid", what, err)
	}
}

func TestScanAndResolve(t *testing.T) {
	root := t.TempDir()
	build(t, root, fixture(t, "alpha"), fixture(t, "beta.v2"))
	os.Mkdir(filepath.Join(root, ".cache"), 0o755) // hidden entries are skipped
	c, err := Scan(root, ScanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.Names(), ","); got != "alpha,beta.v2" {
		t.Fatalf("names %s", got)
	}
	cp, err := c.Resolve("alpha")
	if err != nil || cp.Task != "asr" || len(cp.Files) != 3 || cp.Parallel.MaxSlots != 4 {
		t.Fatalf("resolve: %+v %v", cp, err)
	}
	if p, err := cp.File("sub/vocab.txt"); err != nil || !strings.HasSuffix(p, "alpha/sub/vocab.txt") {
		t.Fatalf("file: %s %v", p, err)
	}
	for _, ref := range []string{"../alpha", "/etc", "alpha/../beta.v2", "./alpha", "missing", "", "a\\b", "alpha/sub"} {
		_, err := c.Resolve(ref)
		isInvalid(t, "resolve "+ref, err)
	}
	for _, rel := range []string{"../beta.v2/weights.bin", "/etc/passwd", "nope.bin"} {
		_, err := cp.File(rel)
		isInvalid(t, "file "+rel, err)
	}
}

func TestScanFailsWholeAndCollectsEveryFault(t *testing.T) {
	cases := map[string]func(t *testing.T, root string){
		"corrupt file": func(t *testing.T, root string) {
			os.WriteFile(filepath.Join(root, "beta", "weights.bin"), []byte("0123456789abcdeX"), 0o644)
		},
		"truncated file": func(t *testing.T, root string) {
			os.WriteFile(filepath.Join(root, "beta", "weights.bin"), []byte("0123"), 0o644)
		},
		"missing file": func(t *testing.T, root string) { os.Remove(filepath.Join(root, "beta", "sub", "vocab.txt")) },
		"no manifest":  func(t *testing.T, root string) { os.Remove(filepath.Join(root, "beta", ManifestName)) },
		"stray file":   func(t *testing.T, root string) { os.WriteFile(filepath.Join(root, "notes.txt"), nil, 0o644) },
		"bad name":     func(t *testing.T, root string) { os.Mkdir(filepath.Join(root, "bad name"), 0o755) },
		"renamed folder": func(t *testing.T, root string) {
			os.Rename(filepath.Join(root, "beta"), filepath.Join(root, "gamma"))
		},
		"bad manifest": func(t *testing.T, root string) {
			os.WriteFile(filepath.Join(root, "beta", ManifestName), []byte(`{"schema":1,"name":"beta","extra":true}`), 0o644)
		},
		"file symlink escape": func(t *testing.T, root string) {
			outside := filepath.Join(t.TempDir(), "weights.bin")
			os.WriteFile(outside, []byte("0123456789abcdef"), 0o644)
			p := filepath.Join(root, "beta", "weights.bin")
			os.Remove(p)
			os.Symlink(outside, p)
		},
		"folder symlink escape": func(t *testing.T, root string) {
			elsewhere := t.TempDir()
			build(t, elsewhere, fixture(t, "delta"))
			os.Symlink(filepath.Join(elsewhere, "delta"), filepath.Join(root, "delta"))
		},
	}
	for name, damage := range cases {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			build(t, root, fixture(t, "alpha"), fixture(t, "beta"))
			damage(t, root)
			c, err := Scan(root, ScanOptions{})
			if c != nil {
				t.Fatalf("got a partial catalogue %v", c.Names())
			}
			isInvalid(t, name, err)
			t.Logf("%v", err)
		})
	}
	// Two faults are both reported.
	root := t.TempDir()
	build(t, root, fixture(t, "alpha"), fixture(t, "beta"))
	os.Remove(filepath.Join(root, "alpha", ManifestName))
	os.Remove(filepath.Join(root, "beta", ManifestName))
	if _, err := Scan(root, ScanOptions{}); err == nil || !strings.Contains(err.Error(), "alpha") || !strings.Contains(err.Error(), "beta") {
		t.Fatalf("both faults: %v", err)
	}
	// A Check hook's refusal fails the scan too.
	root = t.TempDir()
	build(t, root, fixture(t, "alpha"))
	_, err := Scan(root, ScanOptions{Check: func(*Checkpoint) error { return backends.Invalidf("engine says no") }})
	if err == nil || !strings.Contains(err.Error(), "engine says no") {
		t.Fatalf("check hook: %v", err)
	}
}

func TestSymlinkInsideIsAllowed(t *testing.T) {
	root := t.TempDir()
	build(t, root, fixture(t, "alpha"))
	if err := os.Symlink(filepath.Join(root, "alpha"), filepath.Join(root, "alias")); err != nil {
		t.Fatal(err)
	}
	// alias resolves inside the root but its manifest names "alpha".
	if _, err := Scan(root, ScanOptions{}); err == nil || !strings.Contains(err.Error(), `names it "alpha"`) {
		t.Fatalf("alias: %v", err)
	}
	os.Remove(filepath.Join(root, "alias"))
	cp, err := Load(filepath.Join(root, "alpha"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("weights.bin", filepath.Join(root, "alpha", "link.bin")); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.File("link.bin"); err != nil {
		t.Fatalf("symlink inside the checkpoint: %v", err)
	}
}

func TestBuildIsIdempotent(t *testing.T) {
	root := t.TempDir()
	r := fixture(t, "alpha")
	if rep := build(t, root, r); rep.Copied != 3 || rep.Written != 1 {
		t.Fatalf("first build %+v", rep)
	}
	m1, _ := os.ReadFile(filepath.Join(root, "alpha", ManifestName))
	if rep := build(t, root, r); rep.Copied != 0 || rep.Kept != 3 || rep.Written != 0 || rep.Current != 1 {
		t.Fatalf("second build %+v", rep)
	}
	m2, _ := os.ReadFile(filepath.Join(root, "alpha", ManifestName))
	if string(m1) != string(m2) {
		t.Fatal("manifest changed")
	}
	os.WriteFile(r.Files[0].Src, []byte("new weights"), 0o644)
	if rep := build(t, root, r); rep.Copied != 1 || rep.Written != 1 {
		t.Fatalf("after a source change %+v", rep)
	}
	if _, err := Load(filepath.Join(root, "alpha")); err != nil {
		t.Fatal(err)
	}
	leftovers, _ := filepath.Glob(filepath.Join(root, "alpha", ".tmp-*"))
	if len(leftovers) != 0 {
		t.Fatalf("temporary files left: %v", leftovers)
	}
}

func TestVerifyNoticesChangedContent(t *testing.T) {
	root := t.TempDir()
	build(t, root, fixture(t, "alpha"))
	dir := filepath.Join(root, "alpha")
	if _, err := Load(dir); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "weights.bin")
	os.WriteFile(p, []byte("0123456789abcdeZ"), 0o644) // same size
	later := time.Now().Add(time.Hour)
	os.Chtimes(p, later, later)
	_, err := Load(dir)
	isInvalid(t, "changed content", err)
	if err == nil || !strings.Contains(err.Error(), "SHA-256") {
		t.Fatalf("message: %v", err)
	}
}

func TestManifestChecks(t *testing.T) {
	good := `{"schema":1,"name":"m","task":"tts","engine":"flite","files":[],"parallel":{"max_slots":1}}`
	if _, err := ParseManifest([]byte(good)); err != nil {
		t.Fatal(err)
	}
	sha := strings.Repeat("a", 64)
	bad := map[string]string{
		"unknown field": `{"schema":1,"name":"m","task":"tts","engine":"flite","files":[],"parallel":{"max_slots":1},"x":1}`,
		"trailing":      good + `{}`,
		"schema":        `{"schema":2,"name":"m","task":"tts","engine":"flite","files":[],"parallel":{"max_slots":1}}`,
		"name":          `{"schema":1,"name":"..","task":"tts","engine":"flite","files":[],"parallel":{"max_slots":1}}`,
		"task":          `{"schema":1,"name":"m","task":"ocr","engine":"flite","files":[],"parallel":{"max_slots":1}}`,
		"engine":        `{"schema":1,"name":"m","task":"tts","engine":"Flite!","files":[],"parallel":{"max_slots":1}}`,
		"slots 0":       `{"schema":1,"name":"m","task":"tts","engine":"flite","files":[],"parallel":{"max_slots":0}}`,
		"slots 17":      `{"schema":1,"name":"m","task":"tts","engine":"flite","files":[],"parallel":{"max_slots":17}}`,
		"options":       `{"schema":1,"name":"m","task":"tts","engine":"flite","files":[],"options":[1],"parallel":{"max_slots":1}}`,
		"rate":          `{"schema":1,"name":"m","task":"tts","engine":"flite","sample_rate":5,"files":[],"parallel":{"max_slots":1}}`,
		"dotdot":        `{"schema":1,"name":"m","task":"tts","engine":"flite","files":[{"path":"../x","size":1,"sha256":"` + sha + `"}],"parallel":{"max_slots":1}}`,
		"absolute":      `{"schema":1,"name":"m","task":"tts","engine":"flite","files":[{"path":"/x","size":1,"sha256":"` + sha + `"}],"parallel":{"max_slots":1}}`,
		"twice":         `{"schema":1,"name":"m","task":"tts","engine":"flite","files":[{"path":"x","size":1,"sha256":"` + sha + `"},{"path":"x","size":1,"sha256":"` + sha + `"}],"parallel":{"max_slots":1}}`,
		"own manifest":  `{"schema":1,"name":"m","task":"tts","engine":"flite","files":[{"path":"manifest.json","size":1,"sha256":"` + sha + `"}],"parallel":{"max_slots":1}}`,
		"bad sha":       `{"schema":1,"name":"m","task":"tts","engine":"flite","files":[{"path":"x","size":1,"sha256":"ABC"}],"parallel":{"max_slots":1}}`,
	}
	for name, b := range bad {
		_, err := ParseManifest([]byte(b))
		isInvalid(t, name, err)
	}
}

func TestMergeOptions(t *testing.T) {
	got, err := MergeOptions(json.RawMessage(`{"voice":"slt","b":1}`), json.RawMessage(`{"b":2,"a":true}`))
	if err != nil || string(got) != `{"a":true,"b":2,"voice":"slt"}` {
		t.Fatalf("%s %v", got, err)
	}
	if got, _ := MergeOptions(nil, json.RawMessage("null")); string(got) != `{}` {
		t.Fatalf("empty: %s", got)
	}
	_, err = MergeOptions(nil, json.RawMessage(`[1]`))
	isInvalid(t, "array options", err)
}

func TestDefaultsNameTheirPackages(t *testing.T) {
	src := Sources{NPMPrefix: "/nonexistent", PocketsphinxModel: "/nonexistent", EspeakData: "/nonexistent"}
	for _, n := range []string{PocketsphinxEnUS, SileroV5, EspeakEn} {
		_, err := DefaultRecipe(src, n)
		if !errors.Is(err, ErrMissingSource) {
			t.Errorf("%s: %v", n, err)
		}
	}
	if r, err := DefaultRecipe(src, FliteSLT); err != nil || len(r.Files) != 0 {
		t.Fatalf("flite-slt needs no files: %v", err)
	}
	if _, err := DefaultRecipe(src, "nope"); err == nil {
		t.Fatal("unknown default accepted")
	}
}
