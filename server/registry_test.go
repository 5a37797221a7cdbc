package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/server/internal/registry"
)

// restartable builds servers on one state dir and one models root, as
// `sluice serve --state-dir DIR` restarted with the same flags.
type restartable struct {
	t     *testing.T
	dir   string
	root  string
	trace string
}

func newRestartable(t *testing.T) *restartable {
	return &restartable{t: t, dir: filepath.Join(t.TempDir(), "state"), root: t.TempDir()}
}

func (rs *restartable) config() Config {
	cfg := testConfig(rs.t)
	cfg.StateDir, cfg.ModelsRoot, cfg.TraceFile = rs.dir, rs.root, rs.trace
	return cfg
}

// start builds a server on the state dir and loads what it restored, as
// cmd/sluice does before it listens.
func (rs *restartable) start() *tserver {
	rs.t.Helper()
	ts := newServerCfg(rs.t, rs.config())
	if err := ts.s.LoadRestored(context.Background()); err != nil {
		rs.t.Fatal(err)
	}
	return ts
}

func (rs *restartable) startErr() error {
	s, err := New(rs.config(), Options{Logger: slog.New(slog.DiscardHandler)})
	if err == nil {
		_ = s.Shutdown(context.Background())
	}
	return err
}

func (ts *tserver) summary(id string) (uint64, bool, int) {
	m := ts.model(id)
	return m.ConfigVersion, m.Loaded, m.Slots
}

// Every kind of committed change survives a restart: registrations,
// reconfigurations with their config_version, unloads, bulk unloads and
// loads as the desired state, and the models root; config_version then
// continues from where it was (CONTRACT.md persist.restore,
// persist.version-continues, persist.models-root).
func TestRegistryRestoresEveryChange(t *testing.T) {
	rs := newRestartable(t)
	rootB := t.TempDir()
	writeCheckpoint(t, rootB, "voice-b", "fixture", 4)

	a := rs.start()
	a.put("a", `{"engine":"fixture","slots":1}`)
	a.put("a", `{"engine":"fixture","slots":2}`)     // v2
	a.put("a", `{"engine":"fixture","slots":3}`)     // v3
	a.put("b", `{"engine":"fixture","max_queue":4}`) // v1
	a.put("c", `{"engine":"fixture"}`)
	a.put("d", `{"engine":"fixture"}`)
	a.must(200, "POST", "/v1/models/b/unload", "")
	a.must(200, "POST", "/v1/models/unload", `{"models":["c","d","nope"]}`)
	a.must(200, "POST", "/v1/models/d/load", "")
	a.must(200, "PUT", "/v1/settings/models-root", `{"models_root":"`+rootB+`"}`)
	a.close()

	b := rs.start()
	for _, w := range []struct {
		id     string
		ver    uint64
		loaded bool
		slots  int
	}{{"a", 3, true, 3}, {"b", 1, false, 1}, {"c", 1, false, 1}, {"d", 1, true, 1}} {
		v, l, n := b.summary(w.id)
		if v != w.ver || l != w.loaded || n != w.slots {
			t.Errorf("%s after restart: v%d loaded=%v slots=%d, want v%d loaded=%v slots=%d", w.id, v, l, n, w.ver, w.loaded, w.slots)
		}
	}
	var spec ModelSpec
	b.must(200, "GET", "/v1/models/b/spec", "").json(t, &spec)
	if spec.MaxQueue != 4 {
		t.Errorf("b's max_queue not restored: %+v", spec)
	}
	if c := b.catalogue(); c.ModelsRoot != realPath(t, rootB) || names(c) != "voice-b" {
		t.Errorf("models root not restored: %+v", c)
	}
	if m := b.put("a", `{"engine":"fixture","slots":1}`); m.ConfigVersion != 4 {
		t.Errorf("config_version after restart: %d, want 4 (never a repeat of 1..3)", m.ConfigVersion)
	}
	if m := b.put("a", `{"engine":"fixture","slots":1}`); m.ConfigVersion != 4 {
		t.Errorf("an identical PUT after restart moved config_version to %d", m.ConfigVersion)
	}
	b.close()

	c := rs.start()
	if v, l, n := c.summary("a"); v != 4 || !l || n != 1 {
		t.Errorf("a after the second restart: v%d loaded=%v slots=%d", v, l, n)
	}
}

// The registry wins for the IDs it knows; the startup config adds the
// others, unrecorded until a management change touches them (CONTRACT.md
// persist.config-merge).
func TestRegistryWinsOverStartupConfig(t *testing.T) {
	rs := newRestartable(t)
	a := rs.start()
	a.put("x", `{"engine":"fixture","slots":2}`)
	a.close()

	b := rs.start()
	models, err := ParseModelsYAML([]byte("models:\n  - {id: x, engine: fixture, slots: 4}\n  - {id: y, engine: fixture}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.s.RegisterModels(context.Background(), models); err != nil {
		t.Fatal(err)
	}
	if v, _, n := b.summary("x"); v != 1 || n != 2 {
		t.Errorf("x: v%d slots=%d, want the restored v1 slots=2", v, n)
	}
	if v, l, _ := b.summary("y"); v != 1 || !l {
		t.Errorf("y from the config: v%d loaded=%v", v, l)
	}
	st, err := registry.ReadState(rs.dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := st.Get("y"); ok || len(st.Models) != 1 {
		t.Errorf("a startup config model was recorded: %+v", st.Models)
	}
}

// A second server on the same state dir fails to start with a clear error;
// the lock is released by shutdown (CONTRACT.md persist.lock).
func TestRegistryLock(t *testing.T) {
	rs := newRestartable(t)
	a := rs.start()
	err := rs.startErr()
	if err == nil || !strings.Contains(err.Error(), "another sluice server is using this state dir") {
		t.Fatalf("second server on the same state dir: %v", err)
	}
	a.close()
	if err := rs.startErr(); err != nil {
		t.Fatalf("after the first one shut down: %v", err)
	}
}

// A corrupt state file is a startup error that names the file and the
// problem, never a silent reset; the file is left as it was (CONTRACT.md
// persist.corrupt).
func TestRegistryCorruptIsStartupError(t *testing.T) {
	rs := newRestartable(t)
	a := rs.start()
	a.put("a", `{"engine":"fixture","slots":2}`)
	if err := a.s.store.Compact(); err != nil { // the change into the snapshot
		t.Fatal(err)
	}
	a.close()
	file := filepath.Join(rs.dir, "registry.json")
	good, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	flip := bytes.Clone(good)
	k := bytes.Index(flip, []byte(`"slots":2`))
	flip[k+len(`"slots":`)] = '3' // same length, wrong checksum
	header, body, _ := bytes.Cut(good, []byte("\n"))
	for name, tc := range map[string]struct {
		data []byte
		want string
	}{
		"flipped byte": {flip, "checksum mismatch"},
		"truncated":    {good[:len(good)-5], "the header says"},
		"no header":    {body, "no header line"},
		"bad magic":    {append([]byte("other 1 crc32c=0 len=2\n"), "{}"...), "bad header"},
		"future":       {append(bytes.Replace(header, []byte("registry 2 "), []byte("registry 9 "), 1), append([]byte("\n"), body...)...), "format 9"},
		"empty":        {nil, "no header line"},
	} {
		if err := os.WriteFile(file, tc.data, 0o600); err != nil {
			t.Fatal(err)
		}
		err := rs.startErr()
		if err == nil || !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: startup error %v, want one naming %s and %q", name, err, file, tc.want)
		}
		if now, _ := os.ReadFile(file); !bytes.Equal(now, tc.data) {
			t.Errorf("%s: the corrupt file was changed", name)
		}
	}
	if err := os.WriteFile(file, good, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := rs.startErr(); err != nil {
		t.Fatalf("the good file again: %v", err)
	}
}

// A change that could not be made durable is 500, never a silent 200, and
// is not restored; a journal record torn by a crash (the process died in
// the middle of its append) is cut off at the next start with a WARN and
// the changes before it are restored (CONTRACT.md persist.atomic,
// persist.durable-before-200).
func TestRegistryTornWrite(t *testing.T) {
	rs := newRestartable(t)
	a := rs.start()
	a.put("a", `{"engine":"fixture","slots":1}`)
	torn := errors.New("torn: the process died here")
	a.s.store.SetWriteHook(func(f *os.File, b []byte) error {
		_, _ = f.Write(b[:len(b)/2])
		return torn
	})
	r := a.do("PUT", "/v1/models/a", `{"engine":"fixture","slots":2}`)
	if r.status != 500 || r.errType(t) != "internal_error" || !strings.Contains(string(r.body), "durable") {
		t.Fatalf("PUT with a failing write: %d %s", r.status, r.body)
	}
	r = a.do("PUT", "/v1/settings/models-root", `{"models_root":"`+t.TempDir()+`"}`)
	if r.status != 500 || r.errType(t) != "internal_error" {
		t.Fatalf("models root with a failing write: %d %s", r.status, r.body)
	}
	if c := a.catalogue(); c.ModelsRoot != realPath(t, rs.root) {
		t.Errorf("a models root that was not durable was swapped in: %s", c.ModelsRoot)
	}
	a.s.store.SetWriteHook(nil)
	a.put("b", `{"engine":"fixture"}`) // durable again: a new journal after the failed ones
	a.close()

	// What a crash in the middle of an append leaves: half a record.
	journal := filepath.Join(rs.dir, "registry.journal")
	f, err := os.OpenFile(journal, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("r crc32c=0badf00d len=400\n{\"models\":[{\"id\":\"a\",\"config_v"); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	b := rs.start()
	if v, _, n := b.summary("a"); v != 1 || n != 1 {
		t.Errorf("after the failed writes: v%d slots=%d, want the last durable v1 slots=1", v, n)
	}
	if v, _, _ := b.summary("b"); v != 1 {
		t.Errorf("b: v%d, want v1", v)
	}
	if !strings.Contains(b.logs.String(), "level=WARN") || !strings.Contains(b.logs.String(), "torn by a crash") {
		t.Errorf("no WARN for the torn record:\n%s", b.logs)
	}
	if j, _ := os.ReadFile(journal); bytes.Contains(j, []byte("0badf00d")) {
		t.Errorf("the torn record was kept:\n%s", j)
	}
	b.put("c", `{"engine":"fixture"}`) // appends after the cut
	b.close()
	c := rs.start()
	if v, _, _ := c.summary("c"); v != 1 {
		t.Errorf("c after the cut: v%d", v)
	}
}

// Only what committed is recorded: a PUT refused before any change writes
// nothing, a registration whose first load fails is recorded registered
// and unloaded (CONTRACT.md persist.committed-only, reg.first-load-failure).
func TestRegistryRecordsOnlyCommitted(t *testing.T) {
	rs := newRestartable(t)
	a := rs.start()
	a.put("a", `{"engine":"fixture","slots":2}`)
	files := func() []byte {
		s, _ := os.ReadFile(filepath.Join(rs.dir, "registry.json"))
		j, _ := os.ReadFile(filepath.Join(rs.dir, "registry.journal"))
		if len(j) == 0 {
			t.Fatal("no journal")
		}
		return append(s, j...)
	}
	before := files()
	a.must(400, "PUT", "/v1/models/a", `{"engine":"fixture","slots":99}`)
	a.must(400, "PUT", "/v1/models/z", `{"engine":"nope"}`)
	if after := files(); !bytes.Equal(before, after) {
		t.Errorf("a refused PUT changed the state:\n%s\n%s", before, after)
	}
	if r := a.do("PUT", "/v1/models/f", `{"engine":"fixture","options":{"fail_load":true}}`); r.status == 200 {
		t.Fatalf("first load should fail: %s", r.body)
	}
	// A reconfigure that commits and then fails its load: the new spec at v2.
	if r := a.do("PUT", "/v1/models/a", `{"engine":"fixture","slots":1,"options":{"fail_load":true}}`); r.status == 200 {
		t.Fatalf("load after the commit should fail: %s", r.body)
	}
	a.close()
	st, err := registry.ReadState(rs.dir)
	if err != nil {
		t.Fatal(err)
	}
	if m, ok := st.Get("f"); !ok || m.Loaded || m.ConfigVersion != 1 {
		t.Errorf("failed first load recorded as %+v (present %v), want registered unloaded v1", m, ok)
	}
	if m, _ := st.Get("a"); m.ConfigVersion != 2 || m.Slots != 1 || string(m.Options) != `{"fail_load":true}` {
		t.Errorf("reconfigure committed before its failed load recorded as %+v", m)
	}
}

// --trace FILE never truncates: the earlier run's trace is moved to FILE.1,
// FILE.2, ... and the new run starts a fresh file (CONTRACT.md
// persist.trace-kept).
func TestTraceFileKeptAcrossRestarts(t *testing.T) {
	rs := newRestartable(t)
	rs.trace = filepath.Join(t.TempDir(), "trace.ndjson")
	for range 3 {
		a := rs.start()
		a.put("a", `{"engine":"fixture"}`)
		a.close()
	}
	for _, p := range []string{rs.trace, rs.trace + ".1", rs.trace + ".2"} {
		b, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(b, []byte(`"ev":"SubmitManager"`)) {
			t.Errorf("%s: %v, %d bytes", p, err, len(b))
		}
		var first map[string]any
		line, _, _ := bytes.Cut(b, []byte("\n"))
		if err := json.Unmarshal(line, &first); err != nil || first["ev"] != "SubmitManager" {
			t.Errorf("%s does not start with the run's first event: %s", p, line)
		}
	}
	if _, err := os.Stat(rs.trace + ".3"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("one rotation too many: %v", err)
	}
}

// A recorded model that no longer validates stops the start with an error
// naming the state file and the model, rather than being dropped from the
// registry by the next write (CONTRACT.md persist.restore).
func TestRegistryRestoreInvalidModel(t *testing.T) {
	rs := newRestartable(t)
	a := rs.start()
	a.put("a", `{"engine":"fixture"}`)
	a.close()
	cfg := rs.config()
	cfg.Fixture = false // the fixture engine is no longer served
	s, err := New(cfg, Options{Logger: slog.New(slog.DiscardHandler)})
	if err == nil {
		_ = s.Shutdown(context.Background())
		t.Fatal("a model whose engine is gone was restored")
	}
	if file := filepath.Join(rs.dir, "registry.json"); !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), `"a"`) {
		t.Fatalf("error %v, want one naming %s and the model", err, file)
	}
	if err := rs.startErr(); err != nil { // the lock was released and the file kept
		t.Fatalf("restart with the fixture again: %v", err)
	}
}

// Two changes of one model that overlap in time are recorded in the order
// the model's queue ran them, not in the order their handlers wrote
// (CONTRACT.md persist.restore): here the unload ran after the load, but
// the load's handler writes last, as a slow handler would.
func TestRegistryRecordsQueueOrderNotHandlerOrder(t *testing.T) {
	rs := newRestartable(t)
	a := rs.start()
	a.put("m", `{"engine":"fixture"}`)
	ctx := context.Background()
	if _, err := a.s.rt.Load(ctx, "m"); err != nil { // the load's manager, then ...
		t.Fatal(err)
	}
	if _, err := a.s.rt.Unload(ctx, "m"); err != nil { // ... the unload's, behind it
		t.Fatal(err)
	}
	if err := a.s.reg.Record("m"); err != nil { // the unload's handler writes first
		t.Fatal(err)
	}
	if err := a.s.reg.Record("m"); err != nil { // the load's handler last
		t.Fatal(err)
	}
	a.close()
	b := rs.start()
	if _, loaded, _ := b.summary("m"); loaded {
		t.Fatal("restored loaded: the load's late write won over the unload that ran after it")
	}
}
