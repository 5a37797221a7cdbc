package conformance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio"
	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/backends/whisper"
	"github.com/sluice-dev/sluice/backends/whisper/synth"
	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/core/runtime"
)

// The whisper checks run the real whisper.cpp library on its tiny
// synthetic model (backends/whisper/synth: the real file layout with
// seeded weights), built into a folder of the check's own: a models root
// is scanned whole, and a server without the whisper engine would refuse
// one holding it.

// whisperRuntime builds the tiny checkpoint (plus the damaged copies
// named in broken) and a runtime serving the whisper engine.
func whisperRuntime(rr *runtimeRun, broken map[string]func([]byte) []byte) (*runtime.Runtime, string, func(), error) {
	engines, err := realEngines([]string{whisper.Name})
	if err != nil {
		return nil, "", nil, err
	}
	root, err := os.MkdirTemp("", "sluice-conformance-whisper")
	if err != nil {
		return nil, "", nil, err
	}
	good, err := whisper.Recipe("tiny", synth.Tiny, whisper.Seed, 2)
	if err != nil {
		os.RemoveAll(root)
		return nil, "", nil, err
	}
	recipes := []catalogue.Recipe{good}
	for name, damage := range broken {
		r := good
		r.Manifest.Name = name
		r.Files = []catalogue.Source{{Dest: whisper.ModelFile, Content: damage(append([]byte(nil), good.Files[0].Content...))}}
		recipes = append(recipes, r)
	}
	if _, err := catalogue.Build(root, recipes); err != nil {
		os.RemoveAll(root)
		return nil, "", nil, err
	}
	rt, err := runtime.New(runtime.Options{Engines: engines, CheckInvariants: os.Getenv(runtime.MutantsEnv) == ""})
	if err != nil {
		os.RemoveAll(root)
		return nil, "", nil, err
	}
	done := func() {
		sctx, cancel := context.WithTimeout(context.Background(), 4*rr.timeout)
		defer cancel()
		_ = rt.Shutdown(sctx)
		os.RemoveAll(root)
	}
	return rt, root, done, nil
}

func whisperSpec(root, name string, slots int) runtime.ModelSpec {
	return runtime.ModelSpec{Engine: whisper.Name, Task: "asr", Slots: slots, Checkpoint: filepath.Join(root, name), Options: []byte(`{"oversubscribe":true}`)}
}

// tone returns seconds of a rising tone and noise as a 16 kHz WAV: input
// whose decode depends on its content.
func tone(seconds float64, seed int) []byte {
	n := int(seconds * 16000)
	s := make([]int16, n)
	x := uint32(seed*7919 + 1)
	for i := range s {
		x = x*1664525 + 1013904223
		s[i] = int16((i*(seed+3))%4000-2000) + int16(x>>20) - 2048
	}
	return audio.WAV(16000, s)
}

// checkWhisperCancel (whisper.cancel-mid-decode): a one-slot whisper model
// decodes 60 s of audio; its caller goes away once whisper is decoding
// (the engine's decode-start event, NotifyDecodes). The abort callback
// stops whisper_full, the request ends cancelled, and the slot serves the
// next request.
func checkWhisperCancel(ctx context.Context, rr *runtimeRun) error {
	rt, root, done, err := whisperRuntime(rr, nil)
	if err != nil {
		return err
	}
	defer done()
	id := "whisper." + rr.tag
	if _, err := rt.Apply(ctx, id, whisperSpec(root, "tiny", 1)); err != nil {
		return fmt.Errorf("register: %w", err)
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return err
	}
	defer pr.Close()
	defer pw.Close()
	defer whisper.NotifyDecodes(filepath.Join(root, "tiny", whisper.ModelFile), pw)()
	began := make(chan struct{})
	go func() {
		var b [1]byte
		if _, err := pr.Read(b[:]); err == nil {
			close(began)
		}
	}()
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ended := make(chan error, 1)
	go func() {
		_, err := rt.Infer(rctx, id, backends.Request{Data: tone(60, 1)}, runtime.InferOptions{})
		ended <- err
	}()
	if err := rr.await("whisper to begin decoding", began); err != nil {
		return err
	}
	if err := rr.cancelled("decode", cancel, ended); err != nil {
		return err
	}
	st, err := rt.StatusOf(id)
	if err != nil {
		return err
	}
	if st.ActiveSlots != 0 {
		return fmt.Errorf("%d active slots after the cancelled decode, want 0", st.ActiveSlots)
	}
	if _, err := rt.Infer(ctx, id, backends.Request{Data: tone(1, 2)}, runtime.InferOptions{}); err != nil {
		return fmt.Errorf("the next request: %w", err)
	}
	return nil
}

// checkWhisperCorrupt (whisper.corrupt-model): model files damaged in
// their header, vocabulary and tensors are refused at registration as
// invalid, naming the damage, before whisper.cpp reads them; a model
// registered before keeps serving.
func checkWhisperCorrupt(ctx context.Context, rr *runtimeRun) error {
	damage := map[string]func([]byte) []byte{
		"truncated":  func(b []byte) []byte { return b[:len(b)-1000] },
		"bad-vocab":  func(b []byte) []byte { b[4] = 7; return b },
		"bad-tensor": func(b []byte) []byte { return append(b, 'x') },
	}
	rt, root, done, err := whisperRuntime(rr, damage)
	if err != nil {
		return err
	}
	defer done()
	id := "whisper." + rr.tag
	if _, err := rt.Apply(ctx, id, whisperSpec(root, "tiny", 1)); err != nil {
		return fmt.Errorf("register: %w", err)
	}
	for name := range damage {
		_, err := rt.Apply(ctx, id+"."+name, whisperSpec(root, name, 1))
		if runtime.CodeOf(err) != core.CodeInvalid {
			return fmt.Errorf("damaged model %s: %v (code %v), want invalid", name, err, runtime.CodeOf(err))
		}
		if _, err := rt.Infer(ctx, id, backends.Request{Data: tone(1, 3)}, runtime.InferOptions{}); err != nil {
			return fmt.Errorf("the good model after %s: %w", name, err)
		}
	}
	return nil
}

// checkWhisperMatched (whisper.matched-outputs): two states over one
// context, with two concurrent callers, answer byte for byte what one
// slot answers alone.
func checkWhisperMatched(ctx context.Context, rr *runtimeRun) error {
	rt, root, done, err := whisperRuntime(rr, nil)
	if err != nil {
		return err
	}
	defer done()
	one, two := "whisper1."+rr.tag, "whisper2."+rr.tag
	if _, err := rt.Apply(ctx, one, whisperSpec(root, "tiny", 1)); err != nil {
		return err
	}
	if _, err := rt.Apply(ctx, two, whisperSpec(root, "tiny", 2)); err != nil {
		return err
	}
	inputs := [][]byte{tone(2, 4), tone(3, 5), tone(1.5, 6), tone(2.5, 7)}
	want := make([][]byte, len(inputs))
	for i, in := range inputs {
		res, err := rt.Infer(ctx, one, backends.Request{Data: in}, runtime.InferOptions{})
		if err != nil {
			return err
		}
		want[i] = res.Output.JSON
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for k := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range inputs {
				i := (j + 2*k) % len(inputs)
				res, err := rt.Infer(ctx, two, backends.Request{Data: inputs[i]}, runtime.InferOptions{})
				if err != nil {
					errs[k] = err
					return
				}
				if !bytes.Equal(res.Output.JSON, want[i]) {
					errs[k] = fmt.Errorf("input %d at 2 slots: %s, at 1 slot: %s", i, res.Output.JSON, want[i])
					return
				}
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
