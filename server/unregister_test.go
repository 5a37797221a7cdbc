package server

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/server/internal/wire"
)

// CONTRACT.md unreg.delete, unreg.not-found, unreg.404-after,
// unreg.re-register: DELETE answers in OpenAI's models.delete shape, the
// model is gone from the list and from targeted operations, an unknown ID
// is 404, and a re-registration starts past the last config_version.
func TestDeleteModel(t *testing.T) {
	ts := newServer(t, nil)
	ts.put("a", `{"engine":"fixture","slots":1}`)
	ts.put("a", `{"engine":"fixture","slots":2}`) // v2
	ts.put("b", `{"engine":"fixture"}`)
	var got wire.DeletedModel
	ts.must(200, "DELETE", "/v1/models/a", "").json(t, &got)
	if got != (wire.DeletedModel{ID: "a", Object: "model", Deleted: true}) {
		t.Fatalf("DELETE answered %+v", got)
	}
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/v1/models/a", ""}, {"POST", "/v1/models/a/load", ""}, {"POST", "/v1/models/a/unload", ""},
		{"POST", "/v1/models/a/infer", `{"input":1}`}, {"DELETE", "/v1/models/a", ""}, {"DELETE", "/v1/models/never", ""},
	} {
		if r := ts.must(404, c.method, c.path, c.body); r.errType(t) != "not_found_error" {
			t.Errorf("%s %s: %s", c.method, c.path, r.body)
		}
	}
	var list struct {
		Data []Model `json:"data"`
	}
	ts.must(200, "GET", "/v1/models", "").json(t, &list)
	if len(list.Data) != 1 || list.Data[0].ID != "b" {
		t.Fatalf("GET /v1/models after DELETE lists %+v", list.Data)
	}
	var bulk wire.BulkUnloadResult
	ts.must(200, "POST", "/v1/models/unload", `{"models":["a","b"]}`).json(t, &bulk)
	if strings.Join(bulk.NotFound, ",") != "a" || strings.Join(bulk.Unloaded, ",") != "b" {
		t.Fatalf("bulk unload after DELETE: %+v", bulk)
	}
	if m := ts.put("a", `{"engine":"fixture","slots":1}`); m.ConfigVersion != 3 || !m.Loaded {
		t.Fatalf("re-registered a: v%d loaded=%v, want v3 (never a repeat of 1..2) loaded", m.ConfigVersion, m.Loaded)
	}
	ts.must(200, "POST", "/v1/models/a/infer", `{"input":1}`)
	// The scheduler's self-checks are exported, and quiet.
	ts.awaitMetrics("sluice_invariant_violations_total 0", "sluice_core_disagreements_total 0")
}

// CONTRACT.md unreg.barrier: a DELETE waits for the work admitted before it;
// a request and a PUT that arrive while it waits queue behind it and get
// 404 once the model is gone.
func TestDeleteIsABarrier(t *testing.T) {
	ts := newServer(t, nil)
	ts.put("a", `{"engine":"fixture","slots":1}`)
	rec := ts.records()
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { ts.must(200, "POST", "/v1/models/a/infer", `{"input":{"gate":"g"}}`) })
	ts.awaitGate("g", 1)
	deleted := make(chan resp, 1)
	wg.Go(func() { deleted <- ts.do("DELETE", "/v1/models/a", "") })
	rec.next("the DELETE's manager", isEv(core.EvSubmitManager, "a"))
	behind := make(chan resp, 2)
	wg.Go(func() { behind <- ts.do("POST", "/v1/models/a/infer", `{"input":1}`) })
	rec.next("the request behind it", isEv(core.EvSubmitRequest, "a"))
	wg.Go(func() { behind <- ts.do("PUT", "/v1/models/a", `{"engine":"fixture","slots":1}`) })
	rec.next("the PUT behind it", isEv(core.EvSubmitManager, "a"))
	if m := ts.model("a"); m.QueuedRequests != 1 || m.ActiveSlots != 1 {
		t.Fatalf("while the lease runs: %+v", m)
	}
	ts.s.Fixture().Gates().Open("g")
	if r := <-deleted; r.status != 200 {
		t.Fatalf("DELETE: %d %s", r.status, r.body)
	}
	for range 2 {
		if r := <-behind; r.status != 404 || r.errType(t) != "not_found_error" {
			t.Fatalf("behind the DELETE: %d %s", r.status, r.body)
		}
	}
	ts.must(404, "GET", "/v1/models/a", "")
}

// CONTRACT.md unreg.persisted: a restart does not bring an unregistered
// model back, and its re-registration continues past its last version.
func TestDeletePersists(t *testing.T) {
	rs := newRestartable(t)
	a := rs.start()
	a.put("a", `{"engine":"fixture","slots":1}`)
	a.put("a", `{"engine":"fixture","slots":2}`) // v2
	a.put("b", `{"engine":"fixture"}`)
	a.must(200, "DELETE", "/v1/models/a", "")
	a.close()

	b := rs.start()
	b.must(404, "GET", "/v1/models/a", "")
	b.must(404, "DELETE", "/v1/models/a", "")
	if v, l, _ := b.summary("b"); v != 1 || !l {
		t.Fatalf("b after restart: v%d loaded=%v", v, l)
	}
	b.close()

	c := rs.start()
	if m := c.put("a", `{"engine":"fixture","slots":1}`); m.ConfigVersion != 3 {
		t.Fatalf("re-registered after two restarts at v%d, want v3", m.ConfigVersion)
	}
	c.close()

	d := rs.start()
	if v, l, n := d.summary("a"); v != 3 || !l || n != 1 {
		t.Fatalf("a after its re-registration and a restart: v%d loaded=%v slots=%d", v, l, n)
	}
}

// CONTRACT.md err.max-models, unreg.tombstone: an unregistered model frees
// its place under --max-models; tombstones are bounded at twice the cap,
// past which only IDs with a tombstone register again.
func TestDeleteAndMaxModels(t *testing.T) {
	ts := newServer(t, func(c *Config) { c.MaxModels = 1 })
	ts.put("a", `{"engine":"fixture"}`)
	ts.must(200, "DELETE", "/v1/models/a", "")
	ts.put("b", `{"engine":"fixture"}`) // a's place is free
	ts.must(200, "DELETE", "/v1/models/b", "")
	r := ts.must(400, "PUT", "/v1/models/c", `{"engine":"fixture"}`)
	if !strings.Contains(string(r.body), "too_many_models") {
		t.Fatalf("a third ID past the tombstone bound: %s", r.body)
	}
	if m := ts.put("a", `{"engine":"fixture"}`); m.ConfigVersion != 2 {
		t.Fatalf("re-registered a at v%d", m.ConfigVersion)
	}
}

// The event stream says a model was unregistered, without a status object
// (there is no model to describe), and a registration of the ID again.
func TestDeleteInEvents(t *testing.T) {
	ts := startServer(t, nil)
	st := ts.openEvents("")
	ts.awaitClients(1)
	ts.put("a", `{"engine":"fixture"}`)
	st.until("a's registration", isType("registered", "a"))
	ts.must(200, "DELETE", "/v1/models/a", "")
	fr := st.until("a's unregistration", isType("unregistered", "a"))
	if ev := fr[len(fr)-1].ev(t); ev.Status != nil {
		t.Fatalf("unregistered with a status: %s", fr[len(fr)-1].data)
	}
	ts.put("a", `{"engine":"fixture"}`)
	st.until("a's second registration", isType("registered", "a"))
	st.until("a's load", func(ev Event) bool {
		return ev.Model == "a" && ev.Status != nil && ev.Status.ConfigVersion == 2 && ev.Status.Loaded
	})
}

// A deleted model of the startup config stays deleted across a restart
// (the state dir wins, persist.config-merge) and no longer holds
// /v2/health/ready back (CONTRACT.md unreg.persisted).
func TestDeletedStartupModelStaysDeleted(t *testing.T) {
	rs := newRestartable(t)
	models, err := ParseModelsYAML([]byte("models:\n  - {id: x, engine: fixture}\n  - {id: y, engine: fixture}\n"))
	if err != nil {
		t.Fatal(err)
	}
	a := rs.start()
	if err := a.s.RegisterModels(context.Background(), models); err != nil {
		t.Fatal(err)
	}
	a.must(200, "GET", "/v2/health/ready", "")
	a.must(200, "DELETE", "/v1/models/x", "")
	a.must(200, "GET", "/v2/health/ready", "")
	a.close()

	b := rs.start()
	if err := b.s.RegisterModels(context.Background(), models); err != nil {
		t.Fatal(err)
	}
	b.must(404, "GET", "/v1/models/x", "")
	b.must(200, "GET", "/v2/health/ready", "")
	if m := b.put("x", `{"engine":"fixture"}`); m.ConfigVersion != 2 {
		t.Fatalf("x registered again at v%d, want v2", m.ConfigVersion)
	}
}
