package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/core"
)

func aliased(task string, aliases ...string) ModelSpec {
	s := spec(1, "{}")
	s.Task, s.Aliases = task, aliases
	return s
}

// nameErr returns err's *NameError, failing the test without one.
func nameErr(t *testing.T, err error) *NameError {
	t.Helper()
	var ne *NameError
	if !errors.As(err, &ne) || CodeOf(err) != core.CodeInvalid {
		t.Fatalf("want a NameError (invalid), got %v", err)
	}
	return ne
}

// A request may name a model by an alias: the lease, the result and the
// engine's session are the model's (CONTRACT.md names.alias-resolve).
func TestAliasResolves(t *testing.T) {
	e := newEnv(t, core.Options{})
	e.apply("a", aliased("asr", "whisper-1", "gpt-4o-transcribe"))
	ctx := context.Background()
	l, err := e.rt.AcquireTask(ctx, "whisper-1", "asr", nil)
	if err != nil {
		t.Fatal(err)
	}
	if l.Model() != "a" {
		t.Errorf("lease on %q, want a", l.Model())
	}
	out, err := l.Infer(ctx, backends.Request{Input: json.RawMessage(`{}`)}, nil)
	l.Release(err != nil)
	if err != nil || decodeOut(t, out.JSON).Model != "a" {
		t.Fatalf("%s %v", out.JSON, err)
	}
	res, err := e.rt.Infer(ctx, "gpt-4o-transcribe", backends.Request{Input: json.RawMessage(`{}`)}, InferOptions{})
	if err != nil || res.Model != "a" {
		t.Fatalf("%+v %v", res, err)
	}
	if id, ok := e.rt.Resolve("whisper-1"); !ok || id != "a" {
		t.Errorf("Resolve: %q %v", id, ok)
	}
	if id, ok := e.rt.Resolve("a"); !ok || id != "a" {
		t.Errorf("Resolve(id): %q %v", id, ok)
	}
	if _, ok := e.rt.Resolve("tts-1"); ok {
		t.Error("an unknown name resolved")
	}
	if _, err := e.rt.Acquire(ctx, "tts-1", nil); CodeOf(err) != core.CodeNotFound {
		t.Errorf("unknown name: %v", err)
	}
	if _, err := e.rt.AcquireTask(ctx, "whisper-1", "tts", nil); err == nil {
		t.Error("the alias's model is asr; a tts lease was given")
	}
	st := e.status("a")
	if st.Aliases != "gpt-4o-transcribe,whisper-1" {
		t.Errorf("status aliases %q", st.Aliases)
	}
	cfg, _, _ := e.rt.ConfigOf("a")
	if got := SpecOf(&cfg).Aliases; !slices.Equal(got, []string{"gpt-4o-transcribe", "whisper-1"}) {
		t.Errorf("SpecOf aliases %q", got)
	}
}

// A name is one model's: an alias that is another model's ID or alias,
// or a new ID that is another model's alias, is refused before anything
// changes (CONTRACT.md names.alias-conflict); the spec validator refuses
// malformed, repeated, too many or self-naming aliases.
func TestAliasConflicts(t *testing.T) {
	e := newEnv(t, core.Options{})
	e.apply("a", aliased("asr", "x"))
	e.apply("b", aliased("tts"))
	ctx := context.Background()
	ne := nameErr(t, func() error { _, err := e.rt.Apply(ctx, "b", aliased("tts", "x")); return err }())
	if ne.Field != FieldAliases || ne.Owner != "a" || ne.IsID {
		t.Errorf("%+v", ne)
	}
	ne = nameErr(t, func() error { _, err := e.rt.Apply(ctx, "b", aliased("tts", "a")); return err }())
	if ne.Field != FieldAliases || ne.Owner != "a" || !ne.IsID {
		t.Errorf("%+v", ne)
	}
	ne = nameErr(t, func() error { _, err := e.rt.Apply(ctx, "x", aliased("tts")); return err }())
	if ne.Field != "model" || ne.Owner != "a" {
		t.Errorf("%+v", ne)
	}
	if _, err := e.rt.StatusOf("x"); err == nil {
		t.Error("a refused registration registered")
	}
	if v := e.status("b").ConfigVersion; v != 1 {
		t.Errorf("a refused reconfigure changed b: version %d", v)
	}
	for _, bad := range [][]string{{"b"}, {"a b"}, {""}, {"y", "y"},
		{"1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", "13", "14", "15", "16", "17"}} {
		_, err := e.rt.Apply(ctx, "b", aliased("tts", bad...))
		var se *SpecError
		if !errors.As(err, &se) || se.Field != FieldAliases {
			t.Errorf("aliases %q: %v", bad, err)
		}
	}
	// Re-applying a model's own aliases is no conflict.
	e.apply("a", aliased("asr", "x"))
}

// Moving an alias: once a reconfigure drops it, another model may take
// it, and requests follow it; changing aliases alone commits a new
// version without rebuilding the pool.
func TestAliasMoves(t *testing.T) {
	e := newEnv(t, core.Options{})
	e.apply("a", aliased("tts", "x"))
	e.apply("b", aliased("tts"))
	session := func(name string) string {
		res, err := e.rt.Infer(context.Background(), name, backends.Request{Input: json.RawMessage(`{}`)}, InferOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return decodeOut(t, res.Output.JSON).Session
	}
	before := session("a")
	st := e.apply("a", aliased("tts", "y"))
	if after := session("y"); st.ConfigVersion != 2 || after != before {
		t.Errorf("aliases alone: version %d, session %q -> %q", st.ConfigVersion, before, after)
	}
	if _, ok := e.rt.Resolve("x"); ok {
		t.Error("a dropped alias still resolves")
	}
	e.apply("b", aliased("tts", "x"))
	res, err := e.rt.Infer(context.Background(), "x", backends.Request{Input: json.RawMessage(`{}`)}, InferOptions{})
	if err != nil || res.Model != "b" {
		t.Fatalf("%+v %v", res, err)
	}
	if _, err := e.rt.Unregister(context.Background(), "b"); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.rt.Resolve("x"); ok {
		t.Error("an unregistered model's alias still resolves")
	}
	e.apply("a", aliased("tts", "x", "y"))
	if id, ok := e.rt.Resolve("x"); !ok || id != "a" {
		t.Errorf("%q %v", id, ok)
	}
}

// An Apply in flight claims its aliases: a second Apply of another model
// that asks for one of them is refused even though the first has not
// committed yet, so one alias is never committed twice.
func TestAliasClaimedInFlight(t *testing.T) {
	e := newEnv(t, core.Options{})
	gated := aliased("tts", "x")
	gated.Options = json.RawMessage(`{"gates":{"load":"l"}}`)
	ctx := context.Background()
	first := start(func() (core.ModelStatus, error) { return e.rt.Apply(ctx, "a", gated) })
	if err := e.fx.Gates().AwaitWaiting(ctx, "l", 1); err != nil {
		t.Fatal(err)
	}
	_, err := e.rt.Apply(ctx, "b", aliased("tts", "x"))
	if ne := nameErr(t, err); ne.Owner != "a" {
		t.Errorf("%+v", ne)
	}
	e.fx.Gates().Open("l")
	if _, err := first.wait(); err != nil {
		t.Fatal(err)
	}
	if id, ok := e.rt.Resolve("x"); !ok || id != "a" {
		t.Errorf("%q %v", id, ok)
	}
	// A refused Apply's claim ends with it: the alias is free again.
	if _, err := e.rt.Apply(ctx, "c", ModelSpec{Engine: "nope", Slots: 1, Aliases: []string{"z"}}); err == nil {
		t.Fatal("an unknown engine was accepted")
	}
	e.apply("b", aliased("tts", "z"))
}

// A PUT that moves an alias between models of different tasks never
// gives a request a lease on the wrong model: every lease a request for
// alias x of task tts gets is on the tts model, however the alias moves
// while it is admitted (names.alias-resolve).
func TestAliasMoveNeverLeasesTheWrongModel(t *testing.T) {
	e := newEnv(t, core.Options{})
	e.apply("a", aliased("tts", "x"))
	e.apply("b", aliased("asr"))
	ctx := context.Background()
	const moves, requesters = 30, 4
	done := make(chan struct{})
	errs := make(chan error, requesters)
	for range requesters {
		go func() {
			for {
				select {
				case <-done:
					errs <- nil
					return
				default:
				}
				l, err := e.rt.AcquireTask(ctx, "x", "tts", nil)
				if err == nil {
					m := l.Model()
					l.Release(false)
					if m != "a" {
						errs <- errors.New("a tts lease on " + m)
						return
					}
				}
				// Without a task: the lease is on a model whose committed
				// config has x while the lease is held (a reconfigure
				// that drops x waits for it).
				l, err = e.rt.Acquire(ctx, "x", nil)
				if err != nil {
					continue // x is nowhere for a moment
				}
				cfg, _, cerr := e.rt.ConfigOf(l.Model())
				l.Release(false)
				if cerr != nil || !hasAlias(cfg.Aliases, "x") {
					errs <- errors.New("a lease for x on " + l.Model() + ", whose aliases are " + cfg.Aliases)
					return
				}
			}
		}()
	}
	for range moves {
		e.apply("a", aliased("tts"))
		e.apply("b", aliased("asr", "x"))
		e.apply("b", aliased("asr"))
		e.apply("a", aliased("tts", "x"))
	}
	close(done)
	for range requesters {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
