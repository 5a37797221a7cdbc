package conformance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/backends/sherpa"
	"github.com/sluice-dev/sluice/backends/sherpa/synth"
	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/core/runtime"
)

// The sherpa checks run the real sherpa-onnx library on the synthetic
// checkpoints (backends/sherpa/synth: each family's real file layout,
// input and output names and metadata, seeded weights), built into a
// folder of the check's own, as the whisper checks do.

// sherpaRuntime builds names' synthetic checkpoints (plus damaged copies:
// broken maps a new name to the checkpoint it copies and the change made
// to one of its files) and a runtime serving the sherpa engine.
func sherpaRuntime(rr *runtimeRun, names []string, broken map[string]sherpaDamage) (*runtime.Runtime, string, func(), error) {
	engines, err := realEngines([]string{sherpa.Name})
	if err != nil {
		return nil, "", nil, err
	}
	if err := synth.Available(); err != nil {
		return nil, "", nil, fmt.Errorf("%w: %w", errUnavailable, err)
	}
	root, err := os.MkdirTemp("", "sluice-conformance-sherpa")
	if err != nil {
		return nil, "", nil, err
	}
	src := catalogue.DefaultSources("")
	var recipes []catalogue.Recipe
	for _, n := range names {
		r, err := sherpa.SyntheticRecipe(src, n, 4)
		if err != nil {
			os.RemoveAll(root)
			return nil, "", nil, err
		}
		recipes = append(recipes, r)
	}
	for name, d := range broken {
		r, err := sherpa.SyntheticRecipe(src, d.from, 4)
		if err != nil {
			os.RemoveAll(root)
			return nil, "", nil, err
		}
		r.Manifest.Name = name
		for i, f := range r.Files {
			if f.Dest == d.file {
				b := f.Content
				if f.Src != "" {
					if b, err = os.ReadFile(f.Src); err != nil {
						os.RemoveAll(root)
						return nil, "", nil, err
					}
				}
				r.Files[i] = catalogue.Source{Dest: f.Dest, Content: d.change(append([]byte(nil), b...))}
			}
		}
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

// sherpaDamage is a damaged copy of a synthetic checkpoint.
type sherpaDamage struct {
	from, file string
	change     func([]byte) []byte
}

func sherpaSpec(root, name, task string, slots int) runtime.ModelSpec {
	return runtime.ModelSpec{Engine: sherpa.Name, Task: task, Slots: slots, Checkpoint: filepath.Join(root, name), Options: []byte(`{"oversubscribe":true}`)}
}

// sherpaFamilies are the checkpoints the matched check serves, with their
// task and requests.
func sherpaFamilies() []struct {
	name, task string
	reqs       []backends.Request
} {
	tts := func(texts ...string) []backends.Request {
		var out []backends.Request
		for _, t := range texts {
			out = append(out, backends.Request{Input: []byte(`{"text":"` + t + `"}`)})
		}
		return out
	}
	asr := []backends.Request{{Data: tone(2, 4)}, {Data: tone(3, 5)}, {Data: tone(1.5, 6)}}
	// Diarization needs speech for its segmentation to find speakers:
	// jfk.wav (make deps), else a tone (no speakers found: empty answers).
	speech, err := os.ReadFile(catalogue.DefaultSources("").JFK())
	if err != nil {
		speech = tone(12, 4)
	}
	diar := []backends.Request{{Data: speech}, {Data: speech, Input: []byte(`{"num_speakers":2}`)}}
	return []struct {
		name, task string
		reqs       []backends.Request
	}{
		{sherpa.PiperSynthetic, "tts", tts("Hello there.", "Two sentences. Here they are.")},
		{sherpa.KokoroSynthetic, "tts", tts("Hello there.", "Two sentences. Here they are.")},
		{sherpa.MatchaSynthetic, "tts", tts("Hello there.", "Two sentences. Here they are.")},
		{sherpa.NemoCTCSynthetic, "asr", asr},
		{sherpa.TransducerSynthetic, "asr", asr},
		{sherpa.ParakeetSynthetic, "asr", asr},
		{sherpa.SenseVoiceSynthetic, "asr", asr},
		{sherpa.ParaformerSynthetic, "asr", asr},
		{sherpa.WhisperSynthetic, "asr", asr},
		{sherpa.MoonshineSynthetic, "asr", asr},
		{sherpa.CanarySynthetic, "asr", asr},
		{sherpa.StreamingSynthetic, "asr", asr},
		{sherpa.OnlineNemoCTCSynthetic, "asr", asr},
		{sherpa.OnlineParaformerSynthetic, "asr", asr},
		{sherpa.MoonshineV2Synthetic, "asr", asr},
		{sherpa.KittenSynthetic, "tts", tts("Hello there.", "Two sentences. Here they are.")},
		{sherpa.KokoroMultiSynthetic, "tts", tts("Hello there.", "Two sentences. Here they are.")},
		{sherpa.MatchaVocosSynthetic, "tts", tts("Hello there.", "Two sentences. Here they are.")},
		{sherpa.DiarizationSynthetic, "diarization", diar},
	}
}

// checkSherpaMatched (sherpa.matched-outputs): every family at 2 slots,
// with two concurrent callers taking the requests in different orders,
// answers byte for byte what one slot answers alone.
func checkSherpaMatched(ctx context.Context, rr *runtimeRun) error {
	fams := sherpaFamilies()
	var names []string
	for _, f := range fams {
		names = append(names, f.name)
	}
	rt, root, done, err := sherpaRuntime(rr, names, nil)
	if err != nil {
		return err
	}
	defer done()
	var errs []error
	for _, f := range fams {
		one, two := f.name+"1."+rr.tag, f.name+"2."+rr.tag
		if _, err := rt.Apply(ctx, one, sherpaSpec(root, f.name, f.task, 1)); err != nil {
			return fmt.Errorf("%s: %w", f.name, err)
		}
		if _, err := rt.Apply(ctx, two, sherpaSpec(root, f.name, f.task, 2)); err != nil {
			return fmt.Errorf("%s: %w", f.name, err)
		}
		want := make([][]byte, len(f.reqs))
		for i, req := range f.reqs {
			res, err := rt.Infer(ctx, one, req, runtime.InferOptions{})
			if err != nil {
				return fmt.Errorf("%s: %w", f.name, err)
			}
			want[i] = append(res.Output.JSON, res.Output.Data...)
		}
		errs = append(errs, twoCallers(ctx, rt, two, f.name, f.reqs, want, 1)...)
	}
	return errors.Join(errs...)
}

// checkSherpaMalformed (sherpa.malformed-checkpoint): damaged checkpoints
// are refused at registration as invalid, naming the damage, while a
// model registered before keeps serving: a truncated ONNX file, metadata
// the library would exit on, tokens its front end would abort on (all
// found in Go), and espeak-ng data that crashes the library (found by
// the load in a child process).
func checkSherpaMalformed(ctx context.Context, rr *runtimeRun) error {
	damage := map[string]sherpaDamage{
		"truncated":   {sherpa.NemoCTCSynthetic, "model.onnx", func(b []byte) []byte { return b[:len(b)/2] }},
		"no-pad":      {sherpa.PiperSynthetic, "tokens.txt", func(b []byte) []byte { return bytes.Replace(b, []byte("_ 0\n"), nil, 1) }},
		"no-prompt":   {sherpa.CanarySynthetic, "tokens.txt", func(b []byte) []byte { return bytes.Replace(b, []byte("<|nodiarize|>"), []byte("<|x|>"), 1) }},
		"espeak-data": {sherpa.PiperSynthetic, "espeak-ng-data/phontab", func(b []byte) []byte { return b[:16] }},
		// The BPE encoder exits the process on an empty vocabulary line.
		"bpe-vocab": {sherpa.TransducerBPESynthetic, "bpe.vocab", func(b []byte) []byte { return append(b, '\n') }},
	}
	want := map[string]string{"truncated": "not a valid ONNX model", "no-pad": `no "_"`, "no-prompt": "<|nodiarize|>", "espeak-data": "child process", "bpe-vocab": "bpe_vocab"}
	task := map[string]string{"truncated": "asr", "no-pad": "tts", "no-prompt": "asr", "espeak-data": "tts", "bpe-vocab": "asr"}
	rt, root, done, err := sherpaRuntime(rr, []string{sherpa.NemoCTCSynthetic}, damage)
	if err != nil {
		return err
	}
	defer done()
	id := "sherpa." + rr.tag
	if _, err := rt.Apply(ctx, id, sherpaSpec(root, sherpa.NemoCTCSynthetic, "asr", 1)); err != nil {
		return fmt.Errorf("register: %w", err)
	}
	for name := range damage {
		_, err := rt.Apply(ctx, id+"."+name, sherpaSpec(root, name, task[name], 1))
		if runtime.CodeOf(err) != core.CodeInvalid || !strings.Contains(err.Error(), want[name]) {
			return fmt.Errorf("damaged checkpoint %s: %v (code %v), want invalid naming %q", name, err, runtime.CodeOf(err), want[name])
		}
		if _, err := rt.Infer(ctx, id, backends.Request{Data: tone(1, 3)}, runtime.InferOptions{}); err != nil {
			return fmt.Errorf("the good model after %s: %w", name, err)
		}
	}
	return nil
}

// twoCallers sends reqs rounds times over from two concurrent callers in
// different orders to model id and reports every answer that is not
// byte for byte want's (the one-slot answer to the same request).
func twoCallers(ctx context.Context, rt *runtime.Runtime, id, what string, reqs []backends.Request, want [][]byte, rounds int) []error {
	var wg sync.WaitGroup
	got := make([]error, 2)
	for k := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range rounds * len(reqs) {
				i := (j*(k+1) + k) % len(reqs)
				res, err := rt.Infer(ctx, id, reqs[i], runtime.InferOptions{})
				if err != nil {
					got[k] = fmt.Errorf("%s: %w", what, err)
					return
				}
				if !bytes.Equal(append(res.Output.JSON, res.Output.Data...), want[i]) {
					got[k] = fmt.Errorf("%s: request %d at 2 slots after others differs from 1 slot", what, i)
					return
				}
			}
		}()
	}
	wg.Wait()
	return got
}
