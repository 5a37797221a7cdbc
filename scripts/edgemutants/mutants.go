package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// A mutant is one planted bug: one or more textual edits of server files
// (package server and its internal packages).
type mutant struct {
	name  string
	area  string // deadline, budget, origin, durable, auth, lease
	why   string // the bug it stands for
	edits []edit
}

// An edit replaces old by new in file. old must occur exactly once, or,
// with nth > 0, at least nth times (the nth occurrence is replaced).
type edit struct {
	file     string
	old, new string
	nth      int
}

// check reports whether every edit of m applies to the files under root,
// without changing them.
func (m mutant) check(root string) error {
	for _, e := range m.edits {
		b, err := os.ReadFile(filepath.Join(root, e.file))
		if err != nil {
			return fmt.Errorf("mutant %s: %w", m.name, err)
		}
		if err := e.applies(string(b)); err != nil {
			return fmt.Errorf("mutant %s: %w", m.name, err)
		}
	}
	return nil
}

// applies reports whether e can be applied to the text s.
func (e edit) applies(s string) error {
	n := strings.Count(s, e.old)
	switch {
	case e.nth == 0 && n != 1:
		return fmt.Errorf("%q occurs %d times in %s, want once", e.old, n, e.file)
	case e.nth > n:
		return fmt.Errorf("%q occurs %d times in %s, want at least %d", e.old, n, e.file, e.nth)
	}
	return nil
}

// apply plants m in the module at root and returns the function that
// restores the files it changed.
func (m mutant) apply(root string) (func() error, error) {
	saved := map[string][]byte{}
	restore := func() error {
		for p, b := range saved {
			if err := os.WriteFile(p, b, 0o644); err != nil {
				return err
			}
		}
		return nil
	}
	for _, e := range m.edits {
		p := filepath.Join(root, e.file)
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("mutant %s: %w", m.name, err)
		}
		if _, ok := saved[p]; !ok {
			saved[p] = b
		}
		s := string(b)
		if err := e.applies(s); err != nil {
			_ = restore()
			return nil, fmt.Errorf("mutant %s: %w", m.name, err)
		}
		k := max(e.nth, 1)
		i := -1
		for range k {
			j := strings.Index(s[i+1:], e.old)
			i += 1 + j
		}
		s = s[:i] + e.new + s[i+len(e.old):]
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			_ = restore()
			return nil, err
		}
	}
	return restore, nil
}

// durableEdit makes the registry's operation record (call) but drop its
// error: the change is answered as if durable.
func durableEdit(call string, nth int) edit {
	return edit{file: "server/internal/registry/service.go", nth: nth,
		old: "notDurable(" + call + ")",
		new: "func() error { _ = " + call + "; return nil }()"}
}

// v2DurableEdits make the nth OIP repository manager answer 200 when its
// change was not durable.
func v2DurableEdits(nth int) []edit {
	return []edit{v2DurableEdit(nth), {file: "server/internal/oip/repo.go",
		old: "\t\"github.com/sluice-dev/sluice/core\"\n",
		new: "\t\"github.com/sluice-dev/sluice/core\"\n\t\"github.com/sluice-dev/sluice/server/internal/httpapi\"\n"}}
}

// v2DurableEdit is v2DurableEdits' change of the nth manager's error path.
func v2DurableEdit(nth int) edit {
	return edit{file: "server/internal/oip/repo.go", nth: nth,
		old: "\t\treturn err\n\t}\n\treturn v2Empty(w)\n",
		new: "\t\tif e, _ := err.(*httpapi.Error); e.Status != 500 {\n\t\t\treturn e\n\t\t}\n\t}\n\treturn v2Empty(w)\n"}
}

var mutants = []mutant{
	// Deadlines: a client that stops reading or sending must lose its
	// connection within the limits, on every write and every read.
	{name: "piece-deadline-armed-once", area: "deadline", why: "the write deadline is armed for the first piece only, not re-armed per write",
		edits: []edit{{file: "server/internal/edge/conn.go", old: "\t\t\tif wt > 0 {\n\t\t\t\tc.pieceWrite = now.Add(wt)", new: "\t\t\tif wt > 0 && c.pieceWrite.IsZero() {\n\t\t\t\tc.pieceWrite = now.Add(wt)"}}},
	{name: "piece-deadline-skipped", area: "deadline", why: "no write deadline per piece at all (--write-timeout ignored)",
		edits: []edit{{file: "server/internal/edge/conn.go", old: "\t\t\t\tc.pieceWrite = now.Add(wt)", new: "\t\t\t\t_ = now"}}},
	{name: "events-write-deadline", area: "deadline", why: "the event stream writes without its per-write deadline",
		edits: []edit{{file: "server/internal/sse/sse.go", old: "\t\t_ = s.rc.SetWriteDeadline(time.Now().Add(s.timeout)) // unsupported", new: "\t\t_ = s.timeout // unsupported"}}},
	{name: "body-deadline-once", area: "deadline", why: "the body's read deadline is set before the first read only, never moved as bytes arrive",
		edits: []edit{{file: "server/internal/edge/limits.go", old: "\t\tb.armReadDeadline(d)\n\t\tb.cleared = false", new: "\t\tif b.n == 0 {\n\t\t\tb.armReadDeadline(d)\n\t\t}\n\t\tb.cleared = false"}}},
	{name: "body-deadline-not-lifted", area: "deadline", why: "the body's read deadline stays after EOF (net/http's background read inherits it)",
		edits: []edit{{file: "server/internal/edge/limits.go", old: "\t\tb.lift()\n\t}\n\treturn n, err", new: "\t}\n\treturn n, err"}}},
	{name: "header-timeout-unset", area: "deadline", why: "ReadHeaderTimeout is not given to the http.Server (--read-header-timeout ignored: a stalled header holds its connection)",
		edits: []edit{{file: "server/server.go", old: "\t\tReadHeaderTimeout: cfg.ReadHeaderTimeout,\n", new: ""}}},
	{name: "idle-timeout-unset", area: "deadline", why: "IdleTimeout is not given to the http.Server (--idle-conn-timeout ignored: an idle keep-alive connection stays open)",
		edits: []edit{{file: "server/server.go", old: "\t\tIdleTimeout:       cfg.IdleConnTimeout,\n", new: ""}}},
	{name: "body-timeout-ignored", area: "deadline", why: "a read that hit its deadline is not turned into the 408",
		edits: []edit{{file: "server/internal/edge/limits.go", old: "\t\tif errors.Is(err, os.ErrDeadlineExceeded) {", new: "\t\tif false && errors.Is(err, os.ErrDeadlineExceeded) {"}}},

	// Budgets: every reservation is given back on every path.
	{name: "budget-mem-not-returned", area: "budget", why: "the memory reservation of a body is never given back",
		edits: []edit{{file: "server/internal/edge/limits.go", old: "\tb.lim.mem.give(b.memHeld)\n", new: ""}}},
	{name: "budget-disk-not-returned", area: "budget", why: "the spool reservation of a body is never given back",
		edits: []edit{{file: "server/internal/edge/limits.go", old: "\tb.lim.disk.give(b.disk)\n", new: ""}}},
	{name: "budget-refusal-leaks-mem", area: "budget", why: "a body refused for the spool budget keeps its memory reservation",
		edits: []edit{{file: "server/internal/edge/limits.go", old: "\t\t\t\tbr.release()\n\t\t\t\trefuse(bodyBusy())", new: "\t\t\t\trefuse(bodyBusy())"}}},
	{name: "budget-chunked-untracked", area: "budget", why: "a body of unknown length is not counted against the budgets",
		edits: []edit{{file: "server/internal/edge/limits.go", old: "\tif !b.declared && n > 0 && !b.account(int64(n)) {", new: "\tif false && !b.declared && n > 0 && !b.account(int64(n)) {"}}},
	{name: "budget-limit-off-by-one", area: "budget", why: "the budget admits one byte past its limit",
		edits: []edit{{file: "server/internal/edge/limits.go", old: "b.used+n > b.limit", new: "b.used+n > b.limit+1"}}},
	{name: "spool-file-kept", area: "budget", why: "a spooled upload's temporary file is not removed",
		edits: []edit{{file: "server/internal/edge/spool.go", old: "\tif rerr := os.Remove(name); rerr != nil && err == nil {", new: "\tif rerr := error(nil); rerr != nil && err == nil && name == \"\" {"}}},
	{name: "spool-kept-on-query-refusal", area: "budget", why: "a raw upload refused for its query keeps its spool file",
		edits: []edit{{file: "server/internal/openai/upload.go", old: "\t\t\t_ = p.Close()\n\t\t\treturn nil, httpapi.InvalidParam(\"query\", \"more than %d query parameters\", MaxFormFields)", new: "\t\t\treturn nil, httpapi.InvalidParam(\"query\", \"more than %d query parameters\", MaxFormFields)"}}},
	{name: "spool-kept-on-multipart-error", area: "budget", why: "a multipart upload that fails after its file part keeps the spool file",
		edits: []edit{{file: "server/internal/openai/upload.go", old: "\tfail := func(err error) (*upload, error) {\n\t\tu.Close()", new: "\tfail := func(err error) (*upload, error) {"}}},

	// Host and Origin on every state-changing entry.
	{name: "origin-delete-unchecked", area: "origin", why: "DELETE is not checked for a cross-site Origin",
		edits: []edit{{file: "server/internal/edge/origin.go", old: "\t\tif err := c.Check(r); err != nil {", new: "\t\tif err := c.Check(r); err != nil && r.Method != http.MethodDelete {"}}},
	{name: "origin-put-unchecked", area: "origin", why: "PUT is not checked for a cross-site Origin",
		edits: []edit{{file: "server/internal/edge/origin.go", old: "\t\tif err := c.Check(r); err != nil {", new: "\t\tif err := c.Check(r); err != nil && r.Method != http.MethodPut {"}}},
	{name: "ws-origin-unchecked", area: "origin", why: "the WebSocket handshake is not checked for a foreign Origin before its lease",
		edits: []edit{{file: "server/internal/realtime/realtime.go", old: "\tif err := h.checkOrigin(r); err != nil {\n\t\treturn err\n\t}\n", new: ""}}},
	{name: "ws-origin-scheme-ignored", area: "origin", why: "the handshake matches --allowed-origins by host, not scheme://host",
		edits: []edit{{file: "server/internal/realtime/realtime.go", old: "strings.EqualFold(strings.TrimSuffix(strings.TrimSpace(t), \"/\"), o)", new: "strings.HasSuffix(strings.ToLower(t), strings.ToLower(strings.TrimPrefix(strings.TrimPrefix(o, \"http://\"), \"https://\")))"}}},
	{name: "ws-any-origin", area: "origin", why: "the WebSocket handshake's origin check accepts any Origin (the library's own check is skipped: this one decides)",
		edits: []edit{{file: "server/internal/realtime/realtime.go", old: "\to := r.Header.Get(\"Origin\")\n\tif o == \"\" {", new: "\to := r.Header.Get(\"Origin\")\n\tif true {"}}},
	{name: "host-portless-any", area: "origin", why: "a Host without a port passes whatever its name",
		edits: []edit{{file: "server/internal/edge/origin.go", old: "\treturn port != \"\" && h.exact[host+\":\"+port]", new: "\treturn port == \"\" || h.exact[host+\":\"+port]"}}},
	{name: "host-probe-prefix", area: "origin", why: "every /v2/ path is exempt from the Host check, not only the two probes",
		edits: []edit{{file: "server/internal/edge/origin.go", old: "\treturn p == \"/healthz\" ||", new: "\treturn strings.HasPrefix(p, \"/v2/\") || p == \"/healthz\" ||"}}},
	{name: "session-origin-proof-skipped", area: "origin", why: "a cookie session's PUT and DELETE need no same-origin proof (only POST)",
		edits: []edit{{file: "server/internal/auth/auth.go", old: "!safeMethod(r.Method) && !sameOrigin(r)", new: "r.Method == http.MethodPost && !sameOrigin(r)"}}},
	{name: "same-origin-foreign-accepted", area: "origin", why: "a foreign Origin with the X-Sluice-UI header passes as same-origin",
		edits: []edit{{file: "server/internal/auth/auth.go", old: "\tif origin != \"\" && origin != scheme+r.Host {", new: "\tif false && origin != scheme+r.Host {"}}},
	{name: "sign-in-no-proof", area: "origin", why: "sign-in needs no same-origin proof (login CSRF)",
		edits: []edit{{file: "server/internal/auth/auth.go", old: "\tif !sameOrigin(r) {\n\t\treturn errNoProof\n\t}\n\t// Every attempt", new: "\t// Every attempt"}}},

	// A change is answered 200 only once it is durable.
	{name: "durable-apply", area: "durable", why: "PUT answers 200 although its record failed",
		edits: []edit{durableEdit("g.settle(id, intent, true)", 0)}},
	{name: "durable-load", area: "durable", why: "load answers 200 although its record failed",
		edits: []edit{durableEdit("g.Record(id)", 1)}},
	{name: "durable-unload", area: "durable", why: "unload answers 200 although its record failed",
		edits: []edit{durableEdit("g.Record(id)", 2)}},
	{name: "durable-unregister", area: "durable", why: "DELETE /v1/models/{id} answers 200 although its tombstone was not recorded",
		edits: []edit{durableEdit("s.commit(change{Models: []Model{m}})", 0)}},
	{name: "durable-bulk-unload", area: "durable", why: "bulk unload answers 200 although its record failed",
		edits: []edit{durableEdit("g.Record(res.Unloaded...)", 0)}},
	{name: "durable-v2-load", area: "durable", why: "the OIP repository load answers 200 although its record failed",
		edits: v2DurableEdits(1)},
	{name: "durable-v2-unload", area: "durable", why: "the OIP repository unload answers 200 although its record failed",
		edits: v2DurableEdits(2)},
	{name: "committed-error-unrecorded", area: "durable", why: "a PUT that committed but then failed (its load) is not recorded",
		edits: []edit{{file: "server/internal/registry/service.go", old: "g.settle(id, intent, runtime.Committed(err))", new: "g.settle(id, intent, false)"}}},
	{name: "record-goes-backwards", area: "durable", why: "an older config_version may overwrite a newer record",
		edits: []edit{{file: "server/internal/registry/service.go", old: "known && old.ConfigVersion > status.ConfigVersion {", new: "known && old.ConfigVersion > status.ConfigVersion+1 {"}}},

	// Authorization on every protocol's management routes.
	{name: "auth-api-key-manages", area: "auth", why: "the API key (not the management key) can manage",
		edits: []edit{{file: "server/internal/auth/auth.go", old: "\tcase c.scope == scopeManage && (c.bearer || c.cookie && sessionsOK):", new: "\tcase c.scope != scopeNone && (c.bearer || c.cookie && sessionsOK):"}}},
	{name: "auth-management-flag-ignored", area: "auth", why: "management works without --ui-management",
		edits: []edit{{file: "server/internal/auth/auth.go", old: "\tcase !a.management:", new: "\tcase false:"}}},
	{name: "auth-session-everywhere", area: "auth", why: "a dashboard session is accepted on API-key-only routes",
		edits: []edit{{file: "server/internal/auth/auth.go", old: "\tcase c.scope != scopeNone && c.cookie && sessionsOK:", new: "\tcase c.scope != scopeNone && c.cookie:"}}},
	{name: "auth-bulk-unload-read", area: "auth", why: "the management-key-only routes (bulk unload) need only the API key",
		edits: []edit{{file: "server/routes.go", old: "\t\tr.Use(a.APIManage())", new: "\t\tr.Use(a.APIRead())"}}},
	{name: "auth-dashboard-manage-read", area: "auth", why: "the dashboard's management routes (PUT, load, unload, OIP repository) need only read access",
		edits: []edit{{file: "server/routes.go", old: "\t\tr.Use(a.DashboardManage())", new: "\t\tr.Use(a.DashboardRead())"}}},
	{name: "auth-v2-repo-load-open", area: "auth", why: "the OIP repository load route is registered among the read routes",
		edits: []edit{
			{file: "server/routes.go", old: "\t\tr.Post(\"/v2/repository/models/{id}/load\", httpapi.Adapt(v2.Load)) // the same managers (internal/oip)\n", new: ""},
			{file: "server/routes.go", old: "\t\tr.Post(\"/v2/models/{id}/infer\", httpapi.Adapt(v2.Infer))\n", new: "\t\tr.Post(\"/v2/models/{id}/infer\", httpapi.Adapt(v2.Infer))\n\t\tr.Post(\"/v2/repository/models/{id}/load\", httpapi.Adapt(v2.Load))\n"},
		}},
	{name: "auth-models-root-open", area: "auth", why: "PUT /v1/settings/models-root is registered among the read routes",
		edits: []edit{
			{file: "server/routes.go", old: "\t\tr.Put(\"/v1/settings/models-root\", httpapi.Adapt(s.handleSetModelsRoot))\n", new: ""},
			{file: "server/routes.go", old: "\t\tr.Get(\"/v1/ui/config\", httpapi.Adapt(s.handleUIConfig))\n", new: "\t\tr.Get(\"/v1/ui/config\", httpapi.Adapt(s.handleUIConfig))\n\t\tr.Put(\"/v1/settings/models-root\", httpapi.Adapt(s.handleSetModelsRoot))\n"},
		}},
	{name: "auth-repeated-header", area: "auth", why: "a repeated Authorization header is not refused (the first one wins)",
		edits: []edit{{file: "server/internal/auth/auth.go", old: "\tswitch len(vals) {\n\tcase 0:", new: "\tswitch min(len(vals), 1) {\n\tcase 0:"}}},

	// Leases held by the edge are given back on every path.
	{name: "ws-failed-upgrade-leaks-lease", area: "lease", why: "a refused WebSocket upgrade keeps its lease (a slot lost per attempt)",
		edits: []edit{{file: "server/internal/realtime/realtime.go", old: "\t\tif lease != nil {\n\t\t\tss.release(lease, true)\n\t\t}\n\t\tlog.Warn(\"realtime upgrade failed\"", new: "\t\tlog.Warn(\"realtime upgrade failed\""}}},
	{name: "stream-error-leaks-lease", area: "lease", why: "an /infer stream whose engine failed keeps its lease",
		edits: []edit{{file: "server/h_infer.go", old: "\tif err != nil {\n\t\tlease.Release(true)\n\t\tif !sw.Started() {", new: "\tif err != nil {\n\t\tif !sw.Started() {"}}},
}
