// Package realtime serves live transcription over WebSocket: the
// transcription-session subset of OpenAI's Realtime API at GET
// /v1/realtime, in its beta dialect (transcription_session.update) and its
// GA one (session.update, type "transcription"), the model named in the
// URL or in the first update (CONTRACT.md "Live sessions").
//
// It is a thin adapter: it never imports package server. It calls httpapi
// directly for the request's ID and logger, the runtime-error mapping and
// the strict decoder of client events; the server lends it the rest in a
// Deps (the runtime, the engines table, the edge's task lease) and mounts
// Handler.Serve on its router behind its own middleware (Host allow-list,
// keys); the server's shutdown tells the sessions to end and waits for
// them through Sessions (CONTRACT.md live.shutdown).
package realtime

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/core/runtime"
	"github.com/sluice-dev/sluice/server/internal/httpapi"
)

// Runtime is what a session reads of the runtime and leases from it.
type Runtime interface {
	StatusOf(id string) (core.ModelStatus, error)
	// WatchManagers signals when a manager waits on model id
	// (live.drain-unload).
	WatchManagers(id string) (<-chan struct{}, func())
	// AcquireTask leases model id for task, checking the task on the
	// lease's own snapshot (the turn-detection model's lease).
	AcquireTask(ctx context.Context, id, task string, timeout *time.Duration) (*runtime.Lease, error)
	// Resolve returns the model an alias names (names.alias-resolve).
	Resolve(name string) (string, bool)
}

// Config are the server's flags that shape a session.
type Config struct {
	// AllowedOrigins are --allowed-origins: browser origins trusted to
	// open sessions besides same-host pages (CONTRACT.md err.origin).
	AllowedOrigins []string
	// WriteTimeout bounds every server event's write (live.write-timeout).
	WriteTimeout time.Duration
	// Idle, MaxSession, Drain, Buffer, MaxRate and VADModel are
	// --realtime-idle, --realtime-max-session, --realtime-drain,
	// --realtime-buffer, --realtime-max-rate and --realtime-vad-model
	// (live.limits, live.drain-unload, live.backpressure,
	// live.turn-detection).
	Idle, MaxSession, Drain, Buffer time.Duration
	MaxRate                         float64
	VADModel                        string
	// MaxPending caps the sessions open without a model at once (0:
	// DefaultMaxPending; live.late-admission): they hold no slot, so the
	// models' slots do not bound them.
	MaxPending int
}

// DefaultMaxPending is Config.MaxPending's default.
const DefaultMaxPending = 64

// Deps is what the server lends the adapter: each field is the server's
// own implementation, so that a session is admitted, refused and logged as
// any request is.
type Deps struct {
	Runtime Runtime
	// Engines is the server's engines table (read only): a session needs
	// a model whose engine takes live audio (backends.LiveEngine).
	Engines backends.Registry
	// Sessions tracks the open sessions for the server's shutdown.
	Sessions *Sessions
	Config   Config
	// ValidModelID checks a model ID's shape (400 naming model).
	ValidModelID func(id string) error
	// Lease takes a lease on model id for task through the model's FIFO,
	// with the request's admission timeout (live.admission); another task
	// is a 400 wrong_task decided on the lease's own snapshot.
	Lease func(r *http.Request, id, task string) (*runtime.Lease, error)
}

// Handler serves GET /v1/realtime.
type Handler struct {
	d Deps
}

// New returns the handler over d.
func New(d Deps) *Handler {
	// A model name that names no model, at the handshake or in an update,
	// is OpenAI's model_not_found, naming the model (CONTRACT.md
	// err.not-found; an update's error event names its own field).
	if lease := d.Lease; lease != nil {
		d.Lease = func(r *http.Request, id, task string) (*runtime.Lease, error) {
			l, err := lease(r, id, task)
			return l, httpapi.ModelNotFoundErr(err)
		}
	}
	return &Handler{d: d}
}

// Serve answers GET /v1/realtime[?intent=transcription][&model=ID]
// (CONTRACT.md "Live sessions"):
//
//	(1) the query and the handshake's headers are checked (400 before
//	    anything is held; a model named here must be an asr model of an
//	    engine that takes live audio: live.handshake);
//	(2) with a model in the URL, admission through the model's FIFO with
//	    the admission timeout, as for any request (live.admission): a full
//	    model answers 503 server_busy with Retry-After before the upgrade;
//	    the lease's own snapshot (the config its pool was built from)
//	    decides the task and the engine, so a concurrent reconfigure never
//	    hands a session a model that takes no live audio. Without one (the
//	    SDKs' transcription sessions name it in their first update), the
//	    session opens unadmitted and is admitted by the update that names
//	    the model (admission.go, live.late-admission);
//	(3) the upgrade, selecting the "realtime" subprotocol when the client
//	    offers it (live.subprotocol); the session then holds its one lease
//	    until the client closes, the connection drops, or a limit ends it
//	    (session.go), and releases it before the handler returns.
//
// An error is returned for the server's error writer.
func (h *Handler) Serve(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	for k := range q {
		if k != "intent" && k != "model" {
			return &httpapi.Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "unknown_parameter", Param: k, Message: fmt.Sprintf("unknown query parameter %q (want intent and model)", k)}
		}
	}
	if it, ok := q["intent"]; ok && (len(it) != 1 || it[0] != "transcription") {
		return httpapi.InvalidParam("intent", "intent %q is not supported: this server opens transcription sessions only (intent=transcription, or no intent)", q.Get("intent"))
	}
	id := q.Get("model")
	if m, ok := q["model"]; ok && (len(m) != 1 || id == "") {
		return httpapi.InvalidParam("model", "the model query parameter, when given, names one model; leave it out to name the model in the session's first update")
	}
	if err := checkHandshake(r); err != nil {
		return err
	}
	// The handshake is a GET, which the Origin middleware lets through: a
	// foreign origin is refused here, before a lease (and perhaps a load)
	// is taken for it (CONTRACT.md err.origin).
	if err := h.checkOrigin(r); err != nil {
		return err
	}
	ss := h.d.Sessions
	var lease *runtime.Lease
	pending := false
	if id != "" {
		if err := h.d.ValidModelID(id); err != nil {
			return err
		}
		// A first look, before the handshake queues (or loads the model):
		// the lease's own snapshot decides in admit (live.handshake).
		if err := h.firstLook(id); err != nil {
			return err
		}
		if !ss.add() {
			return shuttingDown()
		}
		defer ss.done()
		var err error
		if lease, err = h.admit(r, id); err != nil {
			return err
		}
		id = lease.Model() // an alias names its model for the whole session (names.alias-resolve)
	} else {
		if !ss.add() {
			return shuttingDown()
		}
		defer ss.done()
		max := h.d.Config.MaxPending
		if max <= 0 {
			max = DefaultMaxPending
		}
		if !ss.addPending(max) {
			return &httpapi.Error{Status: http.StatusServiceUnavailable, Type: "server_busy", Code: "too_many_pending_sessions", RetryAfter: time.Second,
				Message: fmt.Sprintf("%d sessions are open without a model: name the model in the URL (model=) or retry", max)}
		}
		pending = true
	}
	log := httpapi.Logger(r.Context())
	// The origin was decided above, before the lease (checkOrigin): the
	// library's own check is skipped, not run a second time with other
	// rules. It read --allowed-origins' hosts as glob patterns, so an
	// allowed IPv6 origin ("[::1]" a character class) was refused here,
	// after the lease, in plain text.
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{CompressionMode: websocket.CompressionDisabled,
		InsecureSkipVerify: true, Subprotocols: []string{Subprotocol}})
	if err != nil {
		if lease != nil {
			ss.release(lease, true)
		}
		log.Warn("realtime upgrade failed", "err", err)
		return nil // Accept answered the client
	}
	c.SetReadLimit(readLimit)
	ctx, cut := context.WithCancelCause(context.WithoutCancel(r.Context()))
	defer cut(nil)
	ls := &liveSession{h: h, c: c, lease: lease, model: id, log: log, reqID: httpapi.RequestID(r.Context()), hs: r,
		ga: gaDialect(r), q: newLiveQueue(int(h.d.Config.Buffer.Seconds() * Rate)), ctx: ctx, cut: cut,
		activity: make(chan struct{}, 1), drainReq: make(chan struct{}, 1), ended: make(chan struct{}), admitted: make(chan struct{}), start: time.Now(),
		items: map[int]string{}, sent: map[int]string{}, prev: map[int]string{}}
	if lease != nil {
		close(ls.admitted)
	}
	ls.pending = pending
	ls.newItemLocked()
	ss.track(ls, true)
	defer ss.track(ls, false)
	failed := ls.run()
	ls.mu.Lock()
	lease = ls.lease
	ls.mu.Unlock()
	ls.leavePending()
	if lease != nil {
		ss.release(lease, failed)
	}
	return nil
}

// shuttingDown is the handshake's 503 once shutdown began (live.shutdown).
func shuttingDown() *httpapi.Error {
	return &httpapi.Error{Status: http.StatusServiceUnavailable, Type: "shutting_down", Code: core.CodeShuttingDown.String(), Message: "server shutting down"}
}

// takesLive reports whether engine takes live audio.
func (h *Handler) takesLive(engine string) bool {
	e, ok := h.d.Engines[engine].(backends.LiveEngine)
	return ok && e.Live()
}

// liveUnsupported is the handshake's 400 for a model that takes no live
// audio (live.handshake).
func liveUnsupported(id, engine, task string) *httpapi.Error {
	return &httpapi.Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "live_unsupported",
		Message: fmt.Sprintf("model %q (engine %q, task %q) does not take live audio; live sessions need an asr model of an engine that decodes incrementally", id, engine, task)}
}

// run drives the session until its end and closes the socket; it reports
// whether the session failed (cut or engine error) for the lease.
func (ls *liveSession) run() (failed bool) {
	if ls.ga {
		_ = ls.send(map[string]any{"type": "session.created", "session": ls.gaSessionObject("")})
	} else {
		_ = ls.send(map[string]any{"type": "transcription_session.created", "session": ls.sessionObject("")})
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); ls.read() }()
	go func() { defer wg.Done(); ls.watch() }()
	defer wg.Wait()
	select {
	case <-ls.q.started:
	case <-ls.ended:
	case <-ls.ctx.Done():
	}
	var err error
	select {
	case <-ls.q.started:
		ls.mu.Lock()
		lang, lease := ls.language, ls.lease
		ls.mu.Unlock()
		in := []byte(`{}`)
		if lang != "" {
			in = fmt.Appendf(nil, `{"language":%q}`, lang)
		}
		_, err = lease.Infer(ls.ctx, backends.Request{ID: ls.reqID, Input: in, Live: ls.q}, ls.onEngine)
	default:
	}
	ls.stopVAD()
	if ls.ctx.Err() != nil {
		ls.log.Info("realtime session cut", "model", ls.currentModel(), "cause", context.Cause(ls.ctx))
		_ = ls.c.CloseNow()
		return true
	}
	if err != nil {
		ls.log.Error("realtime session failed", "model", ls.currentModel(), "err", err)
		msg := httpapi.FromRuntimeModel(err).Message
		if runtime.CodeOf(err) == core.CodeShuttingDown {
			ls.finish(closeShutdown, "server shutting down", false)
		} else {
			_ = ls.send(map[string]any{"type": "error", "error": rtError{Type: "server_error", Code: "engine_failed", Message: msg}})
			ls.finish(closeInternal, "transcription failed", false)
		}
	}
	ls.finish(websocket.StatusNormalClosure, "", false) // the input ended: nothing more to say
	ls.mu.Lock()
	code, reason := ls.closeCode, ls.closeReason
	ls.mu.Unlock()
	switch code {
	case websocket.StatusAbnormalClosure, websocket.StatusNoStatusRcvd:
		_ = ls.c.CloseNow()
	default:
		_ = ls.c.Close(code, reason)
	}
	if err != nil {
		_ = ls.c.CloseNow()
	}
	ls.cut(errors.New("realtime: session closed"))
	return err != nil
}

// checkOrigin refuses a WebSocket handshake from a browser page of
// another origin with 403 origin_not_allowed: the Origin's host must be
// the request's own Host (a same-host page, whatever its scheme), or the Origin must be one of
// --allowed-origins exactly, scheme included (as the state-changing
// routes' net/http.CrossOriginProtection has it). A handshake without an
// Origin (not a browser) passes.
func (h *Handler) checkOrigin(r *http.Request) error {
	o := r.Header.Get("Origin")
	if o == "" {
		return nil
	}
	if u, err := url.Parse(o); err == nil && u.Host != "" && strings.EqualFold(u.Host, r.Host) {
		return nil
	}
	for _, t := range h.d.Config.AllowedOrigins {
		if strings.EqualFold(strings.TrimSuffix(strings.TrimSpace(t), "/"), o) {
			return nil
		}
	}
	return &httpapi.Error{Status: http.StatusForbidden, Type: "permission_error", Code: "origin_not_allowed",
		Message: fmt.Sprintf("origin %q is not allowed: start the server with --allowed-origins to trust it", o)}
}

// checkHandshake refuses, in the server's error shape and before a lease
// is taken, a request that is not a WebSocket upgrade (RFC 6455 4.2.1) or
// whose upgrade the WebSocket library would refuse (an HTTP/1.0 request,
// a repeated or malformed Sec-WebSocket-Key): the library answers those
// itself in plain text, which names no field (CONTRACT.md live.handshake,
// err.shape).
func checkHandshake(r *http.Request) *httpapi.Error {
	has := func(h, token string) bool {
		for _, line := range r.Header.Values(h) {
			for _, v := range strings.Split(line, ",") {
				if strings.EqualFold(strings.TrimSpace(v), token) {
					return true
				}
			}
		}
		return false
	}
	if r.Method != http.MethodGet || !r.ProtoAtLeast(1, 1) || !has("Connection", "upgrade") || !has("Upgrade", "websocket") ||
		r.Header.Get("Sec-WebSocket-Version") != "13" || len(r.Header.Values("Sec-WebSocket-Key")) == 0 {
		return &httpapi.Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "websocket_required",
			Message: "GET /v1/realtime is a WebSocket endpoint: send a WebSocket upgrade (HTTP/1.1, version 13)"}
	}
	keys := r.Header.Values("Sec-WebSocket-Key")
	if b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(keys[0])); len(keys) != 1 || err != nil || len(b) != 16 {
		return &httpapi.Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "invalid_value", Param: "Sec-WebSocket-Key",
			Message: "the handshake needs exactly one Sec-WebSocket-Key header: 16 bytes in base64"}
	}
	return nil
}
