package realtime

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/fixture"
	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/core/runtime"
	"github.com/sluice-dev/sluice/server/internal/httpapi"
)

// muteEngine is the fixture without backends.LiveEngine: an engine that
// takes no live audio.
type muteEngine struct{ backends.Engine }

// hookedRuntime runs a hook once, inside StatusOf of a given model, after
// the status was read and before it is returned: exactly between a
// session's first look at a model and its lease.
type hookedRuntime struct {
	*runtime.Runtime
	mu    sync.Mutex
	hooks map[string]func()
}

func (h *hookedRuntime) StatusOf(id string) (core.ModelStatus, error) {
	st, err := h.Runtime.StatusOf(id)
	h.mu.Lock()
	f := h.hooks[id]
	delete(h.hooks, id)
	h.mu.Unlock()
	if f != nil {
		f()
	}
	return st, err
}

// onStatus makes the next StatusOf of id run f.
func (h *hookedRuntime) onStatus(id string, f func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.hooks[id] = f
}

// rtEnv is a runtime with the fixture (live) and "mute" (not live)
// engines, asr model "asr" and VAD model "vad" on the fixture, and the
// adapter served on loopback.
type rtEnv struct {
	t    *testing.T
	rt   *hookedRuntime
	addr string
}

func newRTEnv(t *testing.T, mutate ...func(*Config)) *rtEnv {
	t.Helper()
	engines := backends.Registry{fixture.Name: fixture.New(), "mute": muteEngine{fixture.New()}}
	r, err := runtime.New(runtime.Options{Engines: engines, CheckInvariants: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Shutdown(context.Background()) })
	e := &rtEnv{t: t, rt: &hookedRuntime{Runtime: r, hooks: map[string]func(){}}}
	e.apply("asr", fixture.Name, "asr")
	e.apply("vad", fixture.Name, "vad")
	cfg := Config{WriteTimeout: 10 * time.Second, Buffer: 10 * time.Second}
	for _, m := range mutate {
		m(&cfg)
	}
	h := New(Deps{
		Runtime:      e.rt,
		Engines:      engines,
		Sessions:     NewSessions(),
		Config:       cfg,
		ValidModelID: func(string) error { return nil },
		Lease: func(r *http.Request, id, task string) (*runtime.Lease, error) {
			l, err := e.rt.AcquireTask(r.Context(), id, task, nil)
			if err != nil {
				return nil, httpapi.FromRuntime(err)
			}
			return l, nil
		},
	})
	// The server's request-ID middleware: each session has its request ID
	// and a logger that discards.
	ids := httpapi.RequestIDs(slog.New(slog.DiscardHandler), nil)
	srv := httptest.NewServer(ids(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := h.Serve(w, r); err != nil {
			var he *httpapi.Error
			if !errors.As(err, &he) {
				he = &httpapi.Error{Status: http.StatusInternalServerError, Code: "internal", Message: err.Error()}
			}
			w.WriteHeader(he.Status)
			_ = json.NewEncoder(w).Encode(map[string]string{"code": he.Code, "message": he.Message})
		}
	})))
	t.Cleanup(srv.Close)
	e.addr = srv.Listener.Addr().String()
	return e
}

// apply registers or reconfigures id (one slot) and waits until it is done.
func (e *rtEnv) apply(id, engine, task string) {
	e.t.Helper()
	if _, err := e.rt.Apply(context.Background(), id, runtime.ModelSpec{Engine: engine, Task: task, Checkpoint: "ck", Slots: 1}); err != nil {
		e.t.Fatalf("apply %s: %v", id, err)
	}
}

func (e *rtEnv) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	e.t.Cleanup(cancel)
	return ctx
}

// dial opens a session on model.
func (e *rtEnv) dial(model string) (*websocket.Conn, *http.Response, error) {
	c, res, err := websocket.Dial(e.ctx(), "ws://"+e.addr+"/v1/realtime?intent=transcription&model="+model, nil)
	if c != nil {
		e.t.Cleanup(func() { _ = c.CloseNow() })
	}
	return c, res, err
}

// next reads one server event.
func (e *rtEnv) next(c *websocket.Conn) map[string]any {
	e.t.Helper()
	_, b, err := c.Read(e.ctx())
	if err != nil {
		e.t.Fatalf("read: %v", err)
	}
	var ev map[string]any
	if err := json.Unmarshal(b, &ev); err != nil {
		e.t.Fatalf("event %s: %v", b, err)
	}
	return ev
}

// idle fails the test unless model holds no slot and nothing waits on it.
func (e *rtEnv) idle(model string) {
	e.t.Helper()
	st, err := e.rt.Runtime.StatusOf(model)
	if err != nil {
		e.t.Fatal(err)
	}
	if st.ActiveSlots != 0 || st.QueuedRequests != 0 {
		e.t.Errorf("%s holds %d slots, %d queued; want none", model, st.ActiveSlots, st.QueuedRequests)
	}
}

// A handshake's eligibility (an asr model of an engine that takes live
// audio) is decided on its lease's own snapshot, not on the status read
// before it queued: a reconfigure committed in between, to an engine that
// takes no live audio or to another task, refuses the handshake with 400
// (live_unsupported, wrong_task) and leaves no slot held (CONTRACT.md
// live.handshake). A first look alone would have opened the session on
// the reconfigured model.
func TestHandshakeEligibilityOnTheLeasesSnapshot(t *testing.T) {
	for _, tc := range []struct {
		name, engine, task, code string
	}{
		{"engine", "mute", "asr", "live_unsupported"},
		{"task", fixture.Name, "tts", "invalid_request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newRTEnv(t)
			e.rt.onStatus("asr", func() { e.apply("asr", tc.engine, tc.task) })
			c, res, err := e.dial("asr")
			if err == nil {
				_ = c.CloseNow()
				t.Fatal("a session opened on a model reconfigured to one that takes no live audio")
			}
			if res == nil || res.StatusCode != http.StatusBadRequest {
				t.Fatalf("handshake answered %v (%v); want 400 %s", res, err, tc.code)
			}
			var body struct{ Code string }
			if err := json.NewDecoder(res.Body).Decode(&body); err != nil || body.Code != tc.code {
				t.Errorf("refusal code %q (%v); want %s", body.Code, err, tc.code)
			}
			if st, err := e.rt.Runtime.StatusOf("asr"); err != nil || st.Engine != tc.engine || st.Task != tc.task {
				t.Fatalf("the reconfigure did not happen: %+v %v", st, err)
			}
			e.idle("asr")
			// Once the model is a live asr model again, a handshake opens.
			e.apply("asr", fixture.Name, "asr")
			if c, _, err := e.dial("asr"); err != nil {
				t.Fatalf("dial on a live model: %v", err)
			} else if ev := e.next(c); ev["type"] != "transcription_session.created" {
				t.Fatalf("first event %v", ev)
			}
		})
	}
}

// server_vad's model (live.turn-detection) is leased for task vad and its
// engine checked on the lease's own snapshot: a reconfigure of V committed
// between the first look and the lease, to another task or to an engine
// that takes no live audio, is an error event naming
// session.turn_detection.model, turn detection stays off and V holds no
// slot. A first look alone would have run V's new config as the session's
// VAD.
func TestTurnDetectionEligibilityOnTheLeasesSnapshot(t *testing.T) {
	for _, tc := range []struct {
		name, engine, task, want string
	}{
		{"task", fixture.Name, "asr", `serves task "asr"`},
		{"engine", "mute", "vad", `engine "mute"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newRTEnv(t)
			c, _, err := e.dial("asr")
			if err != nil {
				t.Fatal(err)
			}
			if ev := e.next(c); ev["type"] != "transcription_session.created" {
				t.Fatalf("first event %v", ev)
			}
			e.rt.onStatus("vad", func() { e.apply("vad", tc.engine, tc.task) })
			b, _ := json.Marshal(map[string]any{"type": "transcription_session.update", "event_id": "u1",
				"session": map[string]any{"turn_detection": map[string]any{"type": "server_vad", "model": "vad"}}})
			if err := c.Write(e.ctx(), websocket.MessageText, b); err != nil {
				t.Fatal(err)
			}
			ev := e.next(c)
			er, _ := ev["error"].(map[string]any)
			if ev["type"] != "error" || er["param"] != "session.turn_detection.model" || er["event_id"] != "u1" {
				t.Fatalf("update answered %v; want an error event naming session.turn_detection.model", ev)
			}
			if msg, _ := er["message"].(string); !strings.Contains(msg, tc.want) {
				t.Errorf("message %q does not say %s", msg, tc.want)
			}
			if st, err := e.rt.Runtime.StatusOf("vad"); err != nil || st.Engine != tc.engine || st.Task != tc.task {
				t.Fatalf("the reconfigure did not happen: %+v %v", st, err)
			}
			e.idle("vad")
			// The session goes on without turn detection.
			b, _ = json.Marshal(map[string]any{"type": "transcription_session.update", "session": map[string]any{}})
			if err := c.Write(e.ctx(), websocket.MessageText, b); err != nil {
				t.Fatal(err)
			}
			if ev := e.next(c); ev["type"] != "transcription_session.updated" {
				t.Fatalf("update answered %v", ev)
			} else if s, _ := ev["session"].(map[string]any); s["turn_detection"] != nil {
				t.Errorf("turn detection on after a refusal: %v", s["turn_detection"])
			}
			if err := c.Close(websocket.StatusNormalClosure, ""); err != nil {
				t.Fatal(err)
			}
		})
	}
}
