package realtime

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/core/runtime"
	"github.com/sluice-dev/sluice/server/internal/httpapi"
)

// Subprotocol is the WebSocket subprotocol OpenAI's browser clients offer
// beside "openai-insecure-api-key.KEY" (the key is read by the server's
// authentication, never here); the handshake selects it when offered
// (CONTRACT.md live.subprotocol).
const Subprotocol = "realtime"

// Admission (CONTRACT.md live.admission, live.late-admission). A session
// is one lease on its asr model. When the URL names the model, the lease
// is taken at the handshake, before the upgrade, as before. When it does
// not (OpenAI's SDKs name the transcription model in the session's first
// update, not in the URL), the session opens unadmitted and holds nothing:
//
//   - the first update that names a model (session.update's
//     session.audio.input.transcription.model, transcription_session.update's
//     input_audio_transcription.model) is admitted through that model's
//     FIFO with the handshake's admission timeout, on the reader's
//     goroutine: the socket is not read meanwhile, as during
//     backpressure; a refusal (unknown model, not live, busy) is an error
//     event naming the model's field and the session stays open and
//     unadmitted, so the client may name another;
//   - audio appended before admission is refused with an error event
//     (model_not_set) and dropped, never buffered: nothing is held for a
//     session that holds no slot;
//   - once admitted, an update naming another model is refused, as an
//     update naming another model than the URL's always was;
//   - unadmitted sessions hold no slot, so the slots do not bound them:
//     at most Config.MaxPending are open at once (past it the handshake
//     is 503 server_busy, too_many_pending_sessions), and one not
//     admitted within --realtime-idle of its opening closes with 1008
//     "no model named", whatever it sends meanwhile.

// firstLook checks id's status before the handshake queues (or loads the
// model); the lease's own snapshot decides in admit (live.handshake).
func (h *Handler) firstLook(id string) error {
	if canon, ok := h.d.Runtime.Resolve(id); ok {
		id = canon // an alias names its model (names.alias-resolve)
	}
	st, err := h.d.Runtime.StatusOf(id)
	if err != nil {
		return httpapi.FromRuntimeModel(err)
	}
	if st.Task != "asr" || !h.takesLive(st.Engine) {
		return liveUnsupported(id, st.Engine, st.Task)
	}
	return nil
}

// admit leases id for a session through its FIFO with r's admission
// timeout; the lease's own snapshot decides the engine.
//
// Live sessions may hold at most ShareOf(slots) of the model's slots
// (live.slot-share), counted once the lease is granted: a session
// granted a slot past the share gives it back at once and is refused
// (503 server_busy, live_share_exceeded), so the slot requests keep is
// never held by a session; a session waiting in the FIFO is not counted
// (a one-slot model's sessions queue as before).
func (h *Handler) admit(r *http.Request, id string) (*runtime.Lease, error) {
	lease, err := h.d.Lease(r, id, "asr")
	if err != nil {
		return nil, err
	}
	ss := h.d.Sessions
	// While the lease is held no manager runs on the model, so its status
	// is the lease's config.
	slots := 1
	if st, err := h.d.Runtime.StatusOf(lease.Model()); err == nil {
		slots = st.Slots
	}
	if !ss.hold(lease, ShareOf(slots)) {
		ss.release(lease, false)
		return nil, &httpapi.Error{Status: http.StatusServiceUnavailable, Type: "server_busy", Code: "live_share_exceeded", Param: "model", RetryAfter: time.Second,
			Message: fmt.Sprintf("model %q: live sessions hold %d of its %d slots already, the most they may (one stays for requests)", lease.Model(), ShareOf(slots), slots)}
	}
	if !h.takesLive(lease.Engine()) { // reconfigured to another engine while the handshake queued
		ss.release(lease, false)
		return nil, liveUnsupported(id, lease.Engine(), "asr")
	}
	return lease, nil
}

// gaDialect reports whether a handshake speaks the GA Realtime API, whose
// created event is session.created: neither intent=transcription (the
// beta's transcription URL) nor the beta's "OpenAI-Beta: realtime=v1"
// header. Updates are answered in their own dialect whatever this says.
func gaDialect(r *http.Request) bool {
	if r.URL.Query().Get("intent") != "" {
		return false
	}
	for _, v := range r.Header.Values("OpenAI-Beta") {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), "realtime=v1") {
				return false
			}
		}
	}
	return true
}

// isAdmitted reports whether the session holds its model's lease.
func (ls *liveSession) isAdmitted() bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.lease != nil
}

// currentModel is the session's model, "" before admission.
func (ls *liveSession) currentModel() string {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.model
}

// leadsTo reports whether name, an ID or an alias, leads to model now
// (names.alias-resolve): an update that names the session's model by an
// alias, or by its ID after an alias admitted it, names the same model.
func (ls *liveSession) leadsTo(name, model string) bool {
	if model == "" {
		return false
	}
	canon, ok := ls.h.d.Runtime.Resolve(name)
	return ok && canon == model
}

// admitLate admits an unadmitted session on id, named by an update (see
// Admission); it returns the refusal's message and code.
func (ls *liveSession) admitLate(id string) *httpapi.Error {
	if err := ls.h.d.ValidModelID(id); err != nil {
		return asAPIError(err)
	}
	if err := ls.h.firstLook(id); err != nil {
		return asAPIError(err)
	}
	// The lease waits at most the admission timeout, and no longer than
	// the session: a limit or a shutdown that ends it ends the wait.
	ctx, stop := context.WithCancel(ls.ctx)
	defer stop()
	go func() {
		select {
		case <-ls.ended:
			stop()
		case <-ctx.Done():
		}
	}()
	lease, err := ls.h.admit(ls.hs.WithContext(ctx), id)
	if err != nil {
		return asAPIError(err)
	}
	ls.mu.Lock()
	if ls.ending {
		ls.mu.Unlock()
		ls.h.d.Sessions.release(lease, false)
		return &httpapi.Error{Type: "invalid_request_error", Code: "session_ending", Message: "the session is ending"}
	}
	ls.lease, ls.model = lease, lease.Model() // an alias names its model (names.alias-resolve)
	ls.mu.Unlock()
	return nil
}

// markAdmitted tells the watcher the session's model (after the whole
// update that named it took effect): it then drains the session when a
// manager waits on it (live.drain-unload).
func (ls *liveSession) markAdmitted() {
	ls.leavePending()
	close(ls.admitted)
	ls.log.Info("realtime session admitted", "model", ls.currentModel())
}

// leavePending uncounts the session from the unadmitted ones, once.
func (ls *liveSession) leavePending() {
	ls.mu.Lock()
	p := ls.pending
	ls.pending = false
	ls.mu.Unlock()
	if p {
		ls.h.d.Sessions.donePending()
	}
}

// unadmit gives back a lease admitLate took when the rest of its update
// was refused (an update takes effect whole or not at all); no audio has
// reached the engine yet.
func (ls *liveSession) unadmit() {
	ls.mu.Lock()
	lease := ls.lease
	ls.lease, ls.model = nil, ""
	ls.mu.Unlock()
	if lease != nil {
		ls.h.d.Sessions.release(lease, false)
	}
}

// asAPIError is err as the API's error.
func asAPIError(err error) *httpapi.Error {
	var e *httpapi.Error
	if errors.As(err, &e) {
		return e
	}
	return &httpapi.Error{Type: "server_error", Code: "internal_error", Message: err.Error()}
}
