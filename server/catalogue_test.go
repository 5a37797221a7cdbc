package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sluice-dev/sluice/backends/catalogue"
)

// writeCheckpoint writes a checkpoint folder for the fixture engine (or
// engine) under root, with one data file.
func writeCheckpoint(t *testing.T, root, name, engine string, maxSlots int) {
	t.Helper()
	dir := filepath.Join(root, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	data := []byte("weights of " + name)
	if err := os.WriteFile(filepath.Join(dir, "weights.bin"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	m := catalogue.Manifest{Schema: catalogue.Schema, Name: name, Task: "tts", Engine: engine, Description: "test voice",
		Files:    []catalogue.File{{Path: "weights.bin", Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:])}},
		Options:  json.RawMessage(`{"capacity":4}`),
		Parallel: catalogue.Parallel{MaxSlots: maxSlots}}
	b, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, catalogue.ManifestName), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func (ts *tserver) catalogue() CatalogueList {
	ts.t.Helper()
	var c CatalogueList
	ts.must(200, "GET", "/v1/catalogue", "").json(ts.t, &c)
	return c
}

func names(c CatalogueList) string {
	var out []string
	for _, cp := range c.Data {
		out = append(out, cp.ID)
	}
	return strings.Join(out, ",")
}

func realPath(t *testing.T, p string) string {
	t.Helper()
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// GET /v1/catalogue lists the checkpoints of --models-root with their
// manifests and parallel admission.
func TestCatalogueList(t *testing.T) {
	root := t.TempDir()
	writeCheckpoint(t, root, "voice-b", "fixture", 2)
	writeCheckpoint(t, root, "voice-a", "fixture", 4)
	ts := startServer(t, func(c *Config) { c.ModelsRoot = root })
	c := ts.catalogue()
	if c.Object != "list" || c.ModelsRoot != realPath(t, root) || names(c) != "voice-a,voice-b" || c.Error != "" {
		t.Fatalf("%+v", c)
	}
	a := c.Data[0]
	if a.Object != "checkpoint" || a.Task != "tts" || a.Engine != "fixture" || a.MaxSlots != 4 ||
		a.Manifest.Name != "voice-a" || len(a.Manifest.Files) != 1 {
		t.Fatalf("%+v", a)
	}
	// A catalogue checkpoint registers by name.
	ts.put("m", `{"engine":"fixture","checkpoint":"voice-a","slots":2}`)
}

// A configured root that fails its scan still starts the server; the
// catalogue says why it is empty.
func TestCatalogueStartupRootMissing(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.ModelsRoot = filepath.Join(t.TempDir(), "absent") })
	c := ts.catalogue()
	if len(c.Data) != 0 || c.Error == "" {
		t.Fatalf("%+v", c)
	}
}

// PUT /v1/settings/models-root scans the new folder completely before it
// swaps; a failing scan keeps the old root and catalogue as a pair
// (CONTRACT.md fail.models-root), and registered models are unaffected.
func TestModelsRootSwap(t *testing.T) {
	rootA, rootC := t.TempDir(), t.TempDir()
	writeCheckpoint(t, rootA, "voice-a", "fixture", 4)
	writeCheckpoint(t, rootC, "voice-c", "fixture", 2)
	ts := startServer(t, func(c *Config) { c.ModelsRoot = rootA })
	ts.put("m", `{"engine":"fixture","checkpoint":"voice-a"}`)

	bad := map[string]func(dir string){
		"corrupt file": func(dir string) {
			writeCheckpoint(t, dir, "good", "fixture", 2)
			writeCheckpoint(t, dir, "broken", "fixture", 2)
			if err := os.WriteFile(filepath.Join(dir, "broken", "weights.bin"), []byte("tampered!"), 0o644); err != nil {
				t.Fatal(err)
			}
		},
		"unserved engine": func(dir string) { writeCheckpoint(t, dir, "v", "no-such-engine", 2) },
		"stray file": func(dir string) {
			if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		},
		"missing folder": func(dir string) {
			if err := os.Remove(dir); err != nil {
				t.Fatal(err)
			}
		},
	}
	for name, mk := range bad {
		dir := filepath.Join(t.TempDir(), "root")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		mk(dir)
		body, _ := json.Marshal(ModelsRootRequest{ModelsRoot: dir})
		r := ts.must(400, "PUT", "/v1/settings/models-root", string(body))
		if r.errType(t) != "invalid_request_error" {
			t.Fatalf("%s: %s", name, r.body)
		}
		c := ts.catalogue()
		if c.ModelsRoot != realPath(t, rootA) || names(c) != "voice-a" {
			t.Fatalf("%s: after a failed swap the pair is %s %s", name, c.ModelsRoot, names(c))
		}
		// Checkpoints still resolve under the old root.
		ts.put("m", `{"engine":"fixture","checkpoint":"voice-a","slots":2}`)
	}
	ts.must(400, "PUT", "/v1/settings/models-root", `{"models_root":""}`).errType(t)
	ts.must(400, "PUT", "/v1/settings/models-root", `{"root":"x"}`).errType(t)

	body, _ := json.Marshal(ModelsRootRequest{ModelsRoot: rootC})
	var c CatalogueList
	ts.must(200, "PUT", "/v1/settings/models-root", string(body)).json(t, &c)
	if c.ModelsRoot != realPath(t, rootC) || names(c) != "voice-c" {
		t.Fatalf("%+v", c)
	}
	if got := ts.catalogue(); got.ModelsRoot != c.ModelsRoot || names(got) != "voice-c" {
		t.Fatalf("%+v", got)
	}
	ts.put("n", `{"engine":"fixture","checkpoint":"voice-c","slots":2}`)
	if m := ts.model("m"); m.State != "ready" || m.ConfigVersion != 2 {
		t.Fatalf("registered model changed by the swap: %+v", m)
	}
}

// Readers never see the root of one pair with the catalogue of another,
// while swaps succeed and fail concurrently (run with -race).
func TestModelsRootSwapConsistent(t *testing.T) {
	rootA, rootC, bad := t.TempDir(), t.TempDir(), t.TempDir()
	writeCheckpoint(t, rootA, "voice-a", "fixture", 4)
	writeCheckpoint(t, rootC, "voice-c", "fixture", 2)
	writeCheckpoint(t, bad, "v", "no-such-engine", 2)
	ts := startServer(t, func(c *Config) { c.ModelsRoot = rootA })
	want := map[string]string{realPath(t, rootA): "voice-a", realPath(t, rootC): "voice-c"}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				root, cat, err := ts.s.roots.Current(context.Background())
				if err != nil || cat == nil {
					t.Errorf("no catalogue: %v", err)
					return
				}
				if got := strings.Join(cat.Names(), ","); root != cat.Root || want[root] != got {
					t.Errorf("root %s with catalogue %s", root, got)
					return
				}
			}
		})
	}
	for i := range 30 {
		dir := []string{rootC, bad, rootA}[i%3]
		body, _ := json.Marshal(ModelsRootRequest{ModelsRoot: dir})
		r := ts.do("PUT", "/v1/settings/models-root", string(body))
		if (dir == bad) != (r.status == 400) {
			t.Fatalf("%s: %d %s", dir, r.status, r.body)
		}
	}
	close(stop)
	wg.Wait()
}

// Without --ui-management the swap is 403 and changes nothing; the
// catalogue stays readable.
func TestModelsRootNeedsManagement(t *testing.T) {
	root := t.TempDir()
	writeCheckpoint(t, root, "voice-a", "fixture", 4)
	ts := newServer(t, func(c *Config) { c.ModelsRoot = root; c.UIManagement = false })
	body, _ := json.Marshal(ModelsRootRequest{ModelsRoot: t.TempDir()})
	if typ := ts.must(403, "PUT", "/v1/settings/models-root", string(body)).errType(t); typ != "permission_error" {
		t.Fatal(typ)
	}
	if c := ts.catalogue(); names(c) != "voice-a" {
		t.Fatalf("%+v", c)
	}
}

// A refused models root never lists the folder (the issue: PUT with /etc
// answered 400 with /etc's contents); CONTRACT.md err.models-root-leak.
func TestModelsRootErrorLeaksNothing(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"shadow-secret", "id_rsa.private", "passwd.bak"} {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "ssh-keys-folder"), 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "link-to-root")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	ts := newServer(t, nil)
	secrets := []string{"shadow-secret", "id_rsa", "passwd", "ssh-keys-folder", realPath(t, dir)}
	check := func(what, msg string) {
		t.Helper()
		for _, s := range secrets {
			if strings.Contains(msg, s) {
				t.Errorf("%s: message names %q: %s", what, s, msg)
			}
		}
	}
	for _, root := range []string{link, filepath.Join(dir, "passwd.bak"), filepath.Join(dir, "ssh-keys-folder", "nope")} {
		body, _ := json.Marshal(ModelsRootRequest{ModelsRoot: root})
		r := ts.must(400, "PUT", "/v1/settings/models-root", string(body))
		var e errorBody
		r.json(t, &e)
		if e.Error.Code != "invalid_models_root" || !strings.Contains(e.Error.Message, root) {
			t.Errorf("%s: %s, want the path as given and code invalid_models_root", root, r.body)
		}
		check(root, strings.ReplaceAll(e.Error.Message, root, "<root>"))
	}
	r := ts.must(400, "PUT", "/v1/settings/models-root", `{"models_root":"`+link+`"}`)
	if !strings.Contains(string(r.body), "4 of its entries are not valid checkpoints") {
		t.Errorf("what is wrong is not said: %s", r.body)
	}
	// A startup root that failed its scan: the catalogue's error says why,
	// without the listing.
	ts2 := newServer(t, func(c *Config) { c.ModelsRoot = link })
	cat := ts2.catalogue()
	if cat.Error == "" {
		t.Fatalf("no error for a refused startup root: %+v", cat)
	}
	check("catalogue", strings.ReplaceAll(cat.Error, link, "<root>"))
}

// A refused checkpoint names the checkpoint as given, never the resolved
// models root or a symlink's target (CONTRACT.md err.models-root-leak).
func TestCheckpointErrorLeaksNothing(t *testing.T) {
	ts := newServer(t, nil)
	root := ts.s.cfg.ModelsRoot
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(root, "escape")); err != nil {
		t.Fatal(err)
	}
	r := ts.must(400, "PUT", "/v1/models/m", `{"engine":"fixture","checkpoint":"escape"}`)
	for _, s := range []string{realPath(t, root), realPath(t, outside), root, outside} {
		if strings.Contains(string(r.body), s) {
			t.Fatalf("the answer names %q: %s", s, r.body)
		}
	}
	if !strings.Contains(string(r.body), `\"escape\"`) {
		t.Fatalf("the answer does not name the checkpoint: %s", r.body)
	}
}
