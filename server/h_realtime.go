package server

import (
	"context"
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
)

// handleRealtime answers GET /v1/realtime?intent=transcription&model=ID
// (CONTRACT.md "Live sessions"):
//
//	(1) the query and the handshake's headers are checked (400 before
//	    anything is held; the model must be an asr model of an engine that
//	    takes live audio);
//	(2) admission through the model's FIFO with the admission timeout, as
//	    for any request (live.admission): a full model answers 503
//	    server_busy with Retry-After before the upgrade;
//	(3) the upgrade; the session then holds its one lease until the
//	    client closes, the connection drops, or a limit ends it
//	    (realtime_session.go), and releases it before the handler returns.
func (s *Server) handleRealtime(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	for k := range q {
		if k != "intent" && k != "model" {
			return &Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "unknown_parameter", Param: k, Message: fmt.Sprintf("unknown query parameter %q (want intent and model)", k)}
		}
	}
	if it := q.Get("intent"); it != "transcription" {
		return InvalidParam("intent", "intent %q is not supported: this server opens transcription sessions only (intent=transcription)", it)
	}
	id := q.Get("model")
	if id == "" {
		return InvalidParam("model", "the model query parameter is required: a session is admitted on its model at the handshake")
	}
	if !isWebSocketHandshake(r) {
		return &Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "websocket_required",
			Message: "GET /v1/realtime is a WebSocket endpoint: send a WebSocket upgrade (version 13)"}
	}
	// The handshake is a GET, which the Origin middleware lets through: a
	// foreign origin is refused here, before a lease (and perhaps a load)
	// is taken for it (CONTRACT.md err.origin).
	if err := s.checkWSOrigin(r); err != nil {
		return err
	}
	if err := validModelID(id); err != nil {
		return err
	}
	if canon, ok := s.rt.Resolve(id); ok {
		id = canon // an alias names its model for the whole session (CONTRACT.md names.alias-resolve)
	}
	st, err := s.rt.StatusOf(id)
	if err != nil {
		return fromRuntime(err)
	}
	if e, ok := s.roots.engines[st.Engine].(backends.LiveEngine); st.Task != "asr" || !ok || !e.Live() {
		return &Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "live_unsupported",
			Message: fmt.Sprintf("model %q (engine %q, task %q) does not take live audio; live sessions need an asr model of an engine that decodes incrementally", id, st.Engine, st.Task)}
	}
	if !s.live.add() {
		return FromCode(core.CodeShuttingDown, "server shutting down", nil)
	}
	defer s.live.done()
	lease, err := s.taskLease(r, id, "asr")
	if err != nil {
		return err
	}
	// The browser origins trusted for state-changing requests (err.origin)
	// may open sessions too; others are 403 (a same-origin page always may).
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{CompressionMode: websocket.CompressionDisabled, OriginPatterns: s.wsOrigins()})
	if err != nil {
		lease.Release(true)
		logger(r.Context()).Warn("realtime upgrade failed", "err", err)
		return nil // Accept answered the client
	}
	c.SetReadLimit(realtimeReadLimit)
	ctx, cut := context.WithCancelCause(context.WithoutCancel(r.Context()))
	defer cut(nil)
	ls := &liveSession{s: s, c: c, lease: lease, model: id, log: logger(r.Context()),
		q: newLiveQueue(int(s.cfg.RealtimeBuffer.Seconds() * realtimeRate)), ctx: ctx, cut: cut,
		activity: make(chan struct{}, 1), drainReq: make(chan struct{}, 1), ended: make(chan struct{}), start: time.Now(),
		items: map[int]string{}, sent: map[int]string{}, prev: map[int]string{}}
	ls.newItemLocked()
	s.live.track(ls, true)
	defer s.live.track(ls, false)
	failed := ls.run()
	lease.Release(failed)
	return nil
}

// run drives the session until its end and closes the socket; it reports
// whether the session failed (cut or engine error) for the lease.
func (ls *liveSession) run() (failed bool) {
	_ = ls.send(map[string]any{"type": "transcription_session.created", "session": ls.sessionObject("")})
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
		lang := ls.language
		ls.mu.Unlock()
		in := []byte(`{}`)
		if lang != "" {
			in = fmt.Appendf(nil, `{"language":%q}`, lang)
		}
		_, err = ls.lease.Infer(ls.ctx, backends.Request{ID: requestIDFrom(ls.ctx), Input: in, Live: ls.q}, ls.onEngine)
	default:
	}
	ls.stopVAD()
	if ls.ctx.Err() != nil {
		ls.log.Info("realtime session cut", "model", ls.model, "cause", context.Cause(ls.ctx))
		_ = ls.c.CloseNow()
		return true
	}
	if err != nil {
		ls.log.Error("realtime session failed", "model", ls.model, "err", err)
		msg := fromRuntime(err).Message
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
	ls.cut(errors.New("server: realtime session closed"))
	return err != nil
}

// checkWSOrigin refuses a WebSocket handshake from a browser page of
// another origin with 403 origin_not_allowed: the Origin's host must be
// the request's own Host (a same-host page, whatever its scheme, as
// coder/websocket's own check has it), or the Origin must be one of
// --allowed-origins exactly, scheme included (as the state-changing
// routes' net/http.CrossOriginProtection has it). A handshake without an
// Origin (not a browser) passes.
func (s *Server) checkWSOrigin(r *http.Request) error {
	o := r.Header.Get("Origin")
	if o == "" {
		return nil
	}
	if u, err := url.Parse(o); err == nil && u.Host != "" && strings.EqualFold(u.Host, r.Host) {
		return nil
	}
	for _, t := range s.cfg.AllowedOrigins {
		if strings.EqualFold(strings.TrimSuffix(strings.TrimSpace(t), "/"), o) {
			return nil
		}
	}
	return &Error{Status: http.StatusForbidden, Type: "permission_error", Code: "origin_not_allowed",
		Message: fmt.Sprintf("origin %q is not allowed: start the server with --allowed-origins to trust it", o)}
}

// wsOrigins are --allowed-origins as coder/websocket's origin patterns
// (host[:port]).
func (s *Server) wsOrigins() []string {
	var out []string
	for _, o := range s.cfg.AllowedOrigins {
		if u, err := url.Parse(o); err == nil && u.Host != "" {
			out = append(out, u.Host)
		}
	}
	return out
}

// isWebSocketHandshake reports whether r asks for a WebSocket upgrade
// (RFC 6455 4.2.1), checked before a lease is taken.
func isWebSocketHandshake(r *http.Request) bool {
	has := func(h, token string) bool {
		for _, v := range strings.Split(r.Header.Get(h), ",") {
			if strings.EqualFold(strings.TrimSpace(v), token) {
				return true
			}
		}
		return false
	}
	return r.Method == http.MethodGet && has("Connection", "upgrade") && has("Upgrade", "websocket") &&
		r.Header.Get("Sec-WebSocket-Version") == "13" && r.Header.Get("Sec-WebSocket-Key") != ""
}

// liveSessions are the server's open live sessions: shutdown ends them
// (live.shutdown) and waits for their handlers, which the connection
// tracker no longer sees once the connection is hijacked.
type liveSessions struct {
	stopping chan struct{}
	once     sync.Once

	mu     sync.Mutex
	closed bool
	n      int
	zero   chan struct{} // closed when closed and n is 0
	open   map[*liveSession]struct{}
}

func newLiveSessions() *liveSessions {
	return &liveSessions{stopping: make(chan struct{}), zero: make(chan struct{}), open: map[*liveSession]struct{}{}}
}

// add counts a handshake in; false once shutdown began.
func (l *liveSessions) add() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.n++
	return true
}

func (l *liveSessions) done() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n--
	if l.closed && l.n == 0 {
		close(l.zero)
	}
}

func (l *liveSessions) track(ls *liveSession, on bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if on {
		l.open[ls] = struct{}{}
	} else {
		delete(l.open, ls)
	}
}

// count returns the open sessions.
func (l *liveSessions) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.open)
}

// shutdown tells every session to end (each commits its turn in progress
// and closes with 1001) and refuses new handshakes.
func (l *liveSessions) shutdown() {
	l.once.Do(func() {
		close(l.stopping)
		l.mu.Lock()
		l.closed = true
		if l.n == 0 {
			close(l.zero)
		}
		l.mu.Unlock()
	})
}

// wait waits for every session's handler; when ctx ends first, the
// sessions' sockets are closed at once and it waits for the handlers to
// see that.
func (l *liveSessions) wait(ctx context.Context) {
	select {
	case <-l.zero:
		return
	case <-ctx.Done():
	}
	l.mu.Lock()
	for ls := range l.open {
		ls.cut(context.Cause(ctx))
		_ = ls.c.CloseNow()
	}
	l.mu.Unlock()
	<-l.zero
}
