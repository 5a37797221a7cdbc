package flite_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/backends/engines"
	"github.com/sluice-dev/sluice/backends/flite"
	"github.com/sluice-dev/sluice/backends/internal/native"
	"github.com/sluice-dev/sluice/server"
)

// Hostile text over HTTP (CONTRACT.md engine.cost-bound, engine.cancel):
// the bounds flite keeps in process (units.go, stream.go) hold for a
// request that comes through the server on loopback. Cost is read from
// the engine's own accounting, the units its native calls get (unit
// hook), never from a clock; the slot's release from the server's event
// stream.

// waitLimit bounds every wait for something that must come: a safety net
// against hangs, never a timing assertion.
const waitLimit = 60 * time.Second

// units records every unit flite synthesises, and signals the chunk a
// test waits for.
type units struct {
	mu      sync.Mutex
	all     []string
	chunkAt int           // the vocoder chunk that closes reached (0: none)
	reached chan struct{} // closed at chunkAt
	once    sync.Once
}

func (u *units) unit(s string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.all = append(u.all, s)
}

func (u *units) chunk(n int) {
	u.mu.Lock()
	at, reached := u.chunkAt, u.reached
	u.mu.Unlock()
	if at > 0 && n >= at {
		u.once.Do(func() { close(reached) })
	}
}

// arm makes the next request's chunk at close the returned channel.
func (u *units) arm(at int) <-chan struct{} {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.chunkAt, u.reached, u.once = at, make(chan struct{}), sync.Once{}
	return u.reached
}

// since returns the units recorded after the first n.
func (u *units) since(n int) []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.all[n:]...)
}

func (u *units) count() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.all)
}

// checkBounded fails unless every unit is within flite's bound on one
// native call: at most MaxUnitWords estimated words, or one token of at
// most MaxToken characters (a cut piece of a longer one).
func checkBounded(t *testing.T, what string, us []string) {
	t.Helper()
	for _, u := range us {
		f := strings.Fields(u)
		if flite.UnitWords(u) > flite.MaxUnitWords && (len(f) != 1 || len(f[0]) > flite.MaxToken) {
			t.Fatalf("%s: a native call got %q (%d estimated words, bound %d)", what, u, flite.UnitWords(u), flite.MaxUnitWords)
		}
	}
}

// fliteServer serves a one-slot flite model "tts" on loopback, and an
// event stream subscribed before it returns.
type fliteServer struct {
	url    string
	client *http.Client
	events <-chan server.Event
}

func startFlite(t *testing.T, u *units) *fliteServer {
	t.Helper()
	native.SkipUnavailable(t, flite.Available())
	// The hooks are cleared last, after the server's shutdown joined
	// every request (cleanups run in reverse order).
	t.Cleanup(flite.SetHooks(u.unit, u.chunk))
	cfg := server.DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.ParallelJobs = true
	cfg.ModelsRoot = t.TempDir()
	cfg.ShutdownTimeout = 10 * time.Second
	if err := engines.BuildDefaultRoot(cfg.ModelsRoot, "", catalogue.FliteSLT); err != nil {
		t.Fatal(err)
	}
	s, err := server.New(cfg, server.Options{Engines: engines.Registry(engines.Config{}),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	fs := &fliteServer{url: "http://" + ln.Addr().String(), client: &http.Client{Transport: &http.Transport{}}}
	ectx, stopEvents := context.WithCancel(context.Background())
	t.Cleanup(func() {
		stopEvents()
		fs.client.CloseIdleConnections()
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	if err := s.RegisterModels(context.Background(), []server.ModelEntry{{ID: "tts",
		Spec: server.ModelSpec{Engine: flite.Name, Task: "tts", Checkpoint: catalogue.FliteSLT, Slots: json.RawMessage("1")}}}); err != nil {
		t.Fatal(err)
	}
	fs.events = fs.subscribe(t, ectx)
	return fs
}

// subscribe opens GET /v1/events and returns its events. The server
// subscribes the stream before it sends the response's header, so once
// the header is here no later event is missed.
func (fs *fliteServer) subscribe(t *testing.T, ctx context.Context) <-chan server.Event {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", fs.url+"/v1/events", nil)
	resp, err := fs.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("GET /v1/events: %d", resp.StatusCode)
	}
	ch := make(chan server.Event, 1024)
	go func() {
		defer resp.Body.Close()
		defer close(ch)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<16), 1<<20)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var ev server.Event
			if json.Unmarshal([]byte(data), &ev) == nil {
				select {
				case ch <- ev:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return ch
}

// await reads events until match, failing after waitLimit.
func (fs *fliteServer) await(t *testing.T, what string, ch <-chan server.Event, match func(server.Event) bool) server.Event {
	t.Helper()
	limit := time.NewTimer(waitLimit)
	defer limit.Stop()
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("the event stream ended before %s", what)
			}
			if match(ev) {
				return ev
			}
		case <-limit.C:
			t.Fatalf("no %s within the wait limit", what)
		}
	}
}

// speech posts one /v1/audio/speech request under ctx.
func (fs *fliteServer) speech(ctx context.Context, input string, speed float64) (int, []byte, error) {
	body, _ := json.Marshal(map[string]any{"model": "tts", "input": input, "speed": speed})
	req, _ := http.NewRequestWithContext(ctx, "POST", fs.url+"/v1/audio/speech", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := fs.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// hostile are the inputs whose cost in one native call was unbounded
// before units.go: one huge token, and thousands of digits.
var hostile = map[string]func(n int) string{
	"one token": func(n int) string { return strings.Repeat("abcdefghij", n/10) },
	"digits":    func(n int) string { return strings.Repeat("1234567890", n/10) },
}

// TestHTTPHostileTextBounded: over loopback, a hostile text over the
// 4,096-character limit is a 400 naming input before any native call;
// a hostile text within it is answered, and every native call it made was
// within the unit bound (and it was cut into several).
func TestHTTPHostileTextBounded(t *testing.T) {
	u := &units{}
	fs := startFlite(t, u)
	ctx := context.Background()
	for name, gen := range hostile {
		before := u.count()
		code, b, err := fs.speech(ctx, gen(4100), 1)
		if err != nil {
			t.Fatal(err)
		}
		var e struct {
			Error struct{ Param, Type string }
		}
		if code != 400 || json.Unmarshal(b, &e) != nil || e.Error.Param != "input" || e.Error.Type != "invalid_request_error" {
			t.Fatalf("%s of 4,100 characters: %d %s, want 400 naming input", name, code, b)
		}
		if n := u.count() - before; n != 0 {
			t.Fatalf("%s of 4,100 characters: %d native calls before the refusal", name, n)
		}

		before = u.count()
		code, b, err = fs.speech(ctx, gen(240), 1)
		if err != nil {
			t.Fatal(err)
		}
		if code != 200 || len(b) < 44 || string(b[:4]) != "RIFF" {
			t.Fatalf("%s of 240 characters: %d %.80q", name, code, b)
		}
		made := u.since(before)
		checkBounded(t, name, made)
		if len(made) < 2 {
			t.Fatalf("%s of 240 characters: %d native call(s), want it cut into several", name, len(made))
		}
	}
}

// TestHTTPHostileTextCancel: a client that leaves during a 4,000-character
// hostile text at speed 0.25 (a minute or more of work whole) frees the
// model's one slot: the server's release event for it comes with the
// slot free, no native call of the cancelled request runs after it (the
// next request's are the only new ones), and the next request is served.
func TestHTTPHostileTextCancel(t *testing.T) {
	u := &units{}
	fs := startFlite(t, u)
	for name, gen := range hostile {
		before := u.count()
		reached := u.arm(3)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, _, err := fs.speech(ctx, gen(4000), 0.25)
			done <- err
		}()
		limit := time.NewTimer(waitLimit)
		select {
		case <-reached:
		case <-limit.C:
			cancel()
			t.Fatalf("%s: the vocoder never reached its third chunk", name)
		}
		limit.Stop()
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("%s: the client's cancelled request ended with %v", name, err)
		}
		rel := fs.await(t, name+": the release of the cancelled request", fs.events,
			func(ev server.Event) bool { return ev.Type == "release" && ev.Model == "tts" })
		if !rel.Failed || rel.Status == nil || rel.Status.ActiveSlots != 0 {
			t.Fatalf("%s: release event failed=%v status %+v, want a failed request and no active slot", name, rel.Failed, rel.Status)
		}
		cut := u.since(before)
		checkBounded(t, name, cut)
		if len(cut) == 0 {
			t.Fatalf("%s: no native call recorded before the release", name)
		}

		after := u.count()
		code, b, err := fs.speech(context.Background(), "Turn on the kitchen lights.", 1)
		if err != nil || code != 200 {
			t.Fatalf("%s: the next request: %d %.200s %v", name, code, b, err)
		}
		if got := u.since(after); len(got) != 1 || !strings.Contains(got[0], "kitchen") {
			t.Fatalf("%s: native calls after the release: %q, want only the next request's", name, got)
		}
		fs.await(t, name+": the next request's release", fs.events,
			func(ev server.Event) bool { return ev.Type == "release" && ev.Model == "tts" && !ev.Failed })
	}
}
