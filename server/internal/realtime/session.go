package realtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/core/runtime"
	"github.com/sluice-dev/sluice/server/internal/httpapi"
)

// A live session (CONTRACT.md "Live sessions"): one WebSocket, one lease.
// Three goroutines work on it:
//
//   - the handler's, which runs the engine on the lease (one Infer call
//     whose Request.Live is the session's liveQueue) from the first audio
//     to the end of the input, then closes the socket and releases the
//     lease;
//   - the reader, which reads client events, answers the small ones and
//     pushes audio, commits and clears into the queue (waiting while it is
//     full: live.backpressure);
//   - the watcher, which ends the session at its limits: the idle limit,
//     the maximum length, a manager waiting on the model (after the drain
//     deadline) and the server's shutdown.
//
// Every server event is written with the write timeout (live.write-timeout):
// a client that stops reading fails a write, which cuts the session: the
// socket is closed, the engine stops, the lease is released.

// Close codes of live sessions (CONTRACT.md "Live sessions", its close codes).
const (
	closeShutdown = websocket.StatusGoingAway       // 1001: the server shuts down
	closePolicy   = websocket.StatusPolicyViolation // 1008: idle, maximum length, audio rate
	closeDrained  = websocket.StatusServiceRestart  // 1012: a manager waits on the model
	closeInternal = websocket.StatusInternalError   // 1011: the engine failed
)

// Turn limits: a commit needs 100 ms of audio (OpenAI's rule); a turn
// that reaches maxTurn is committed by the server.
const (
	minCommitSamples = Rate / 10
	maxTurnSamples   = 120 * Rate
	// readLimit bounds one client message (base64 of about 4 s of pcm16);
	// a larger one closes the socket with 1009.
	readLimit = 256 << 10
)

type liveSession struct {
	h      *Handler
	c      *websocket.Conn
	lease  *runtime.Lease // nil until admitted; under mu
	model  string         // "" until admitted (admission.go); under mu
	hs     *http.Request  // the handshake: its admission timeout admits a late session
	ga     bool           // the handshake speaks the GA API (session.created)
	log    *slog.Logger
	reqID  string // the handshake's request ID, the engine calls'
	q      *liveQueue
	ctx    context.Context // ends when the session is cut
	cut    context.CancelCauseFunc
	events atomic.Int64

	activity chan struct{} // cap 1: a client message arrived (idle limit)
	drainReq chan struct{} // cap 1: a manager waits on the VAD model
	ended    chan struct{} // closed by finish
	admitted chan struct{} // closed once the session holds its model's lease
	start    time.Time

	// pushMu orders what goes into the transcriber's queue with the turn
	// count: an append's count and push, a commit's reset, committed event
	// and push, a clear's. Taken before mu, never while waiting on mu.
	pushMu sync.Mutex

	mu          sync.Mutex
	language    string
	engineOn    bool
	openItem    string         // the turn in progress's item
	lastItem    string         // the last committed turn's item
	commits     int            // turns committed so far
	items       map[int]string // committed turns whose final has not come
	sent        map[int]string // the text the deltas of each turn have said
	prev        map[int]string // each turn's last partial hypothesis
	turnSamples int
	received    int64 // samples received in all
	items0      int   // item counter
	closeCode   websocket.StatusCode
	closeReason string
	ending      bool
	pending     bool     // counted in Sessions' unadmitted sessions
	vad         *vadSide // server_vad turn detection, nil when off
}

// send writes one server event with a fresh event_id under the write
// timeout; a failed write cuts the session.
func (ls *liveSession) send(ev map[string]any) error {
	ev["event_id"] = fmt.Sprintf("event_%d", ls.events.Add(1))
	b, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	ctx := ls.ctx
	if wt := ls.h.d.Config.WriteTimeout; wt > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, wt)
		defer cancel()
	}
	if err := ls.c.Write(ctx, websocket.MessageText, b); err != nil {
		err = fmt.Errorf("realtime: write: %w", err)
		ls.cut(err)
		return err
	}
	return nil
}

// newItemLocked starts the item of the next turn.
func (ls *liveSession) newItemLocked() string {
	ls.items0++
	ls.openItem = fmt.Sprintf("item_%d", ls.items0)
	return ls.openItem
}

// finish ends the session's input once, with the close code and reason
// the socket will be closed with. graceful commits the turn in progress
// first (when it has enough audio), so its transcript is still sent.
func (ls *liveSession) finish(code websocket.StatusCode, reason string, graceful bool) {
	ls.mu.Lock()
	if ls.ending {
		ls.mu.Unlock()
		return
	}
	ls.ending = true
	ls.closeCode, ls.closeReason = code, reason
	commit := graceful && ls.turnSamples >= minCommitSamples
	ls.mu.Unlock()
	if commit {
		ls.commit("", true, false)
	}
	ls.q.close()
	close(ls.ended)
}

// ending reports whether finish was called.
func (ls *liveSession) isEnding() bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.ending
}

// commit ends the turn in progress (input_audio_buffer.commit, a full
// turn, or a graceful end): the committed event, then the piece that makes
// the engine finish the turn. final is set by finish, which pushes after
// the session stopped taking client events.
func (ls *liveSession) commit(clientEv string, final, auto bool) {
	ls.pushMu.Lock()
	defer ls.pushMu.Unlock()
	ls.mu.Lock()
	if ls.ending && !final {
		ls.mu.Unlock()
		return
	}
	if ls.turnSamples < minCommitSamples {
		n := ls.turnSamples
		ls.mu.Unlock()
		if auto {
			return // a turn too short to transcribe: the server does not commit it
		}
		_ = ls.send(errorEvent("input_audio_buffer_commit_empty", clientEv,
			"buffer too small: a commit needs at least 100ms of audio, the buffer holds %dms", n*1000/Rate))
		return
	}
	item, prev := ls.openItem, ls.lastItem
	ls.lastItem = item
	ls.items[ls.commits] = item
	ls.commits++
	ls.turnSamples = 0
	ls.newItemLocked()
	ls.mu.Unlock()
	ev := map[string]any{"type": "input_audio_buffer.committed", "item_id": item, "previous_item_id": nullable(prev)}
	if ls.send(ev) != nil {
		return
	}
	_ = ls.q.push(ls.ctx, backends.LivePiece{Commit: true})
}

// onEngine turns the engine's live events into server events. A partial
// hypothesis becomes a delta for its stable words: those it shares with
// the turn's previous hypothesis, less its last word (the one still
// changing), when they extend what the turn's deltas have said; a
// hypothesis that revises said words says nothing more (the completed
// transcript is authoritative). A final becomes the completed event.
func (ls *liveSession) onEngine(chunk json.RawMessage) error {
	var ev backends.LiveEvent
	if err := json.Unmarshal(chunk, &ev); err != nil {
		return fmt.Errorf("realtime: live engine event: %w", err)
	}
	ls.mu.Lock()
	item, committed := ls.items[ev.Turn]
	if !committed {
		item = ls.openItem
	}
	switch ev.Kind {
	case backends.LivePartial:
		words, prev := strings.Fields(ev.Text), strings.Fields(ls.prev[ev.Turn])
		ls.prev[ev.Turn] = ev.Text
		n := 0
		for n < len(words)-1 && n < len(prev) && words[n] == prev[n] {
			n++
		}
		stable, said := strings.Join(words[:n], " "), ls.sent[ev.Turn]
		if !strings.HasPrefix(stable, said) || len(stable) == len(said) || said != "" && stable[len(said)] != ' ' {
			ls.mu.Unlock()
			return nil
		}
		ls.sent[ev.Turn] = stable
		ls.mu.Unlock()
		return ls.send(map[string]any{"type": "conversation.item.input_audio_transcription.delta", "item_id": item,
			"content_index": 0, "delta": stable[len(said):]})
	case backends.LiveFinal:
		said := ls.sent[ev.Turn]
		delete(ls.items, ev.Turn)
		delete(ls.sent, ev.Turn)
		delete(ls.prev, ev.Turn)
		ls.mu.Unlock()
		// When the transcript extends what the deltas said (always so for
		// an engine whose partials carry only settled text, as whisper's
		// do), a last delta says the rest: the turn's deltas then
		// concatenate to its transcript's words (live.transcribe).
		if rest, ok := closingDelta(ev.Text, said); ok {
			if err := ls.send(map[string]any{"type": "conversation.item.input_audio_transcription.delta", "item_id": item,
				"content_index": 0, "delta": rest}); err != nil {
				return err
			}
		}
		return ls.send(map[string]any{"type": "conversation.item.input_audio_transcription.completed", "item_id": item,
			"content_index": 0, "transcript": ev.Text})
	}
	ls.mu.Unlock()
	return fmt.Errorf("realtime: live engine event of kind %q", ev.Kind)
}

// closingDelta is the text a turn's last delta says: the words of final
// (single spaces) after said, the deltas so far, when said is a prefix of
// them ending at a word; ok is false when there is nothing left or final
// revises what was said.
func closingDelta(final, said string) (string, bool) {
	words := strings.Join(strings.Fields(final), " ")
	if !strings.HasPrefix(words, said) || len(words) == len(said) || said != "" && words[len(said)] != ' ' {
		return "", false
	}
	return words[len(said):], true
}

// watch ends the session at its limits (CONTRACT.md live.limits,
// live.drain-unload, live.shutdown).
func (ls *liveSession) watch() {
	cfg := &ls.h.d.Config
	never := make(<-chan time.Time)
	timer := func(d time.Duration) (*time.Timer, <-chan time.Time) {
		if d <= 0 {
			return nil, never
		}
		t := time.NewTimer(d)
		return t, t.C
	}
	idle, idleC := timer(cfg.Idle)
	if idle != nil {
		defer idle.Stop()
	}
	maxT, maxC := timer(cfg.MaxSession)
	if maxT != nil {
		defer maxT.Stop()
	}
	// The model's managers are watched once the session holds its lease
	// (at once when the URL named the model).
	var mgr <-chan struct{}
	stop := func() {}
	defer func() { stop() }()
	admitted := ls.admitted
	// An unadmitted session has --realtime-idle from its opening to name
	// its model; messages do not move that deadline (live.late-admission).
	pendT, pendC := timer(cfg.Idle)
	if pendT != nil {
		defer pendT.Stop()
	}
	var drainT *time.Timer
	drainC := never
	startDrain := func() {
		mgr = nil
		drainT = time.NewTimer(cfg.Drain)
		drainC = drainT.C
		ls.log.Info("realtime session draining: a manager waits on its model", "model", ls.currentModel(), "drain", cfg.Drain)
	}
	defer func() {
		if drainT != nil {
			drainT.Stop()
		}
	}()
	for {
		select {
		case <-pendC:
			if !ls.isAdmitted() {
				ls.finish(closePolicy, "no model named", false)
				return
			}
			pendC = never
		case <-admitted:
			admitted = nil
			pendC = never
			model := ls.currentModel()
			mgr, stop = ls.h.d.Runtime.WatchManagers(model)
			if st, err := ls.h.d.Runtime.StatusOf(model); err == nil && st.QueuedManagers > 0 {
				startDrain()
			}
		case <-ls.activity:
			if idle != nil {
				idle.Reset(cfg.Idle)
			}
		case <-idleC:
			ls.finish(closePolicy, "idle limit passed", true)
			return
		case <-maxC:
			ls.finish(closePolicy, "maximum session length reached", true)
			return
		case <-mgr:
			startDrain()
		case <-ls.drainReq:
			if drainT == nil {
				startDrain()
			}
		case <-drainC:
			ls.finish(closeDrained, "the model is being changed or unloaded", true)
			return
		case <-ls.h.d.Sessions.stopping:
			ls.finish(closeShutdown, "server shutting down", true)
			return
		case <-ls.ended:
			return
		case <-ls.ctx.Done():
			return
		}
	}
}

// read reads client events until the socket fails or the session ends.
func (ls *liveSession) read() {
	for {
		typ, b, err := ls.c.Read(ls.ctx)
		if err != nil {
			var ce websocket.CloseError
			if errors.As(err, &ce) {
				ls.finish(ce.Code, "", false)
			} else {
				ls.finish(websocket.StatusAbnormalClosure, "", false)
				ls.cut(fmt.Errorf("realtime: read: %w", err))
			}
			return
		}
		// Only an event that takes effect counts as activity (the idle
		// limit, live.limits): a malformed, unknown or refused message,
		// or an append without audio, does not keep the session alive.
		if ls.isEnding() {
			continue // read on until the close handshake; nothing more is taken
		}
		if typ != websocket.MessageText {
			_ = ls.send(errorEvent("invalid_event", "", "binary messages are not client events; send JSON text"))
			continue
		}
		ls.handle(b)
	}
}

// handle applies one client event.
func (ls *liveSession) handle(b []byte) {
	var head clientEvent
	if err := json.Unmarshal(b, &head); err != nil {
		_ = ls.send(errorEvent("invalid_json", "", "the message is not a JSON client event: %v", err))
		return
	}
	// An event is decoded strictly: an unknown field is an error naming it
	// (live.events).
	strict := func(v any) bool {
		if err := httpapi.DecodeJSON(b, v); err != nil {
			_ = ls.send(errorEvent("invalid_event", head.EventID, "%s: %s", head.Type, errMessage(err)))
			return false
		}
		return true
	}
	switch head.Type {
	case "input_audio_buffer.append":
		var ev appendEvent
		if strict(&ev) {
			ls.appendAudio(ev)
		}
	case "input_audio_buffer.commit":
		var ev clientEvent
		if strict(&ev) {
			signal(ls.activity)
			ls.commit(ev.EventID, false, false)
		}
	case "input_audio_buffer.clear":
		var ev clientEvent
		if strict(&ev) {
			signal(ls.activity)
			ls.clear(ev.EventID)
		}
	case "transcription_session.update":
		var ev sessionUpdate
		if strict(&ev) {
			signal(ls.activity)
			ls.update(ev.EventID, false, ev.Session)
		}
	case "session.update":
		var ev gaSessionUpdate
		if strict(&ev) {
			signal(ls.activity)
			ls.updateGA(ev)
		}
	default:
		_ = ls.send(errorEvent("unknown_event", head.EventID, "unknown or unsupported client event type %q", head.Type))
	}
}

// appendAudio takes one append: the rate check (live.limits), the turn's
// length, then the push, which waits while the queue is full.
func (ls *liveSession) appendAudio(ev appendEvent) {
	samples, err := decodeAudio(ev.Audio)
	if err != nil {
		_ = ls.send(errorEvent("invalid_audio", ev.EventID, "%v", err))
		return
	}
	if len(samples) == 0 {
		return
	}
	if !ls.isAdmitted() {
		// Not buffered: an unadmitted session holds nothing
		// (live.late-admission).
		_ = ls.send(errorEvent("model_not_set", ev.EventID, "no transcription model yet: name one in session.update "+
			"(session.audio.input.transcription.model), transcription_session.update (session.input_audio_transcription.model) "+
			"or the URL's model parameter; this audio was dropped"))
		return
	}
	ls.pushMu.Lock()
	ls.mu.Lock()
	ls.received += int64(len(samples))
	ls.turnSamples += len(samples)
	full := ls.turnSamples >= maxTurnSamples
	received := ls.received
	ls.engineOn = true
	v := ls.vad
	ls.mu.Unlock()
	if r := ls.h.d.Config.MaxRate; r > 0 {
		allowed := r*time.Since(ls.start).Seconds()*Rate + ls.h.d.Config.Buffer.Seconds()*Rate
		if float64(received) > allowed {
			ls.pushMu.Unlock()
			_ = ls.send(errorEvent("audio_rate_exceeded", ev.EventID,
				"audio arrives faster than %g times real time (beyond a %s burst)", r, ls.h.d.Config.Buffer))
			ls.finish(closePolicy, "audio rate limit exceeded", false)
			return
		}
	}
	piece := backends.LivePiece{Samples: samples, Rate: Rate}
	err = ls.q.push(ls.ctx, piece)
	ls.pushMu.Unlock()
	if err != nil {
		return
	}
	if v != nil && v.q.push(ls.ctx, piece) != nil {
		return
	}
	signal(ls.activity) // a push that waited for the engine is not the client idling
	if full {
		ls.commit("", false, true)
	}
}

// clear drops the turn in progress (input_audio_buffer.clear).
func (ls *liveSession) clear(clientEv string) {
	ls.pushMu.Lock()
	defer ls.pushMu.Unlock()
	ls.mu.Lock()
	ls.turnSamples = 0
	delete(ls.sent, ls.commits)
	delete(ls.prev, ls.commits)
	on := ls.engineOn
	ls.mu.Unlock()
	if on {
		if ls.q.push(ls.ctx, backends.LivePiece{Clear: true}) != nil {
			return
		}
	}
	_ = ls.send(map[string]any{"type": "input_audio_buffer.cleared"})
}
