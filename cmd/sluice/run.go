package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/fixture"
	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/core/runtime"
	"github.com/sluice-dev/sluice/server"
)

// run runs `sluice run MODEL INPUT`: one inference without a server. It
// builds a runtime with the fixture engine and the real engines
// (realEngines), registers MODEL from --spec (a model spec as JSON, the body
// of PUT /v1/models/{id}) or from the models file (--config, default the
// embedded default models), runs INPUT and prints the output. INPUT is
// the request's JSON input (anything that is not JSON is taken as a JSON
// string); for a tts model, plain text (or a JSON string) is the text to
// speak, {"text": INPUT}. An asr, vad or diarization model takes its audio
// from --audio FILE, and INPUT, then optional, holds the request's other
// fields. With --stream each chunk is printed on its own line as it comes.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	configFile := fs.String("config", "", "YAML models file holding MODEL (default: the embedded default models)")
	specJSON := fs.String("spec", "", "model spec as JSON, instead of a models file")
	root := fs.String("models-root", server.DefaultConfig().ModelsRoot, "folder of checkpoints")
	stream := fs.Bool("stream", false, "stream the answer: print each chunk as it comes")
	out := fs.String("out", "", "write a binary result (for example audio) to this file")
	audioFile := fs.String("audio", "", "the audio (WAV, FLAC, Ogg, MP3) of an asr, vad or diarization MODEL; INPUT is then optional")
	timeout := fs.Duration("timeout", 5*time.Minute, "bound of the whole run")
	verbose := fs.Bool("v", false, "log the runtime's steps to stderr")
	if err := parseFlags(fs, args, stderr, func(w io.Writer) {
		fmt.Fprintln(w, "usage: sluice run [flags] MODEL INPUT\n       sluice run [flags] --audio FILE MODEL [INPUT]\n\n"+
			"run runs one inference of MODEL without a server. INPUT is the request's JSON input (anything else is\n"+
			"taken as a JSON string); for a tts model, plain text is the text to speak. An asr, vad or diarization\n"+
			"model takes its audio from --audio FILE, and INPUT, then optional, holds its other fields\n"+
			"(for example '{\"language\":\"en\"}').\n\nFlags:")
		printFlags(w, fs, nil)
	}); err != nil {
		return err
	}
	if n := fs.NArg(); n != 2 && (*audioFile == "" || n != 1) {
		return &usageError{cmd: "run", err: fmt.Errorf("want MODEL and INPUT (or --audio FILE MODEL), got %d arguments", n)}
	}
	id := fs.Arg(0)
	spec, err := runSpec(id, *specJSON, *configFile, *root)
	if err != nil {
		return err
	}
	input := runInput(spec.Task, fs.Arg(1))
	var data []byte
	switch {
	case *audioFile != "":
		if data, err = os.ReadFile(*audioFile); err != nil {
			return fmt.Errorf("run: --audio: %w", err)
		}
	case audioTask(spec.Task):
		return &usageError{cmd: "run", err: fmt.Errorf("model %q serves %s: give its audio with --audio FILE (INPUT then holds its other fields, if any)", id, spec.Task)}
	}
	engines := backends.Registry{fixture.Name: fixture.New()}
	for name, e := range realEngines() {
		engines[name] = e
	}
	log := slog.New(slog.DiscardHandler)
	if *verbose {
		log = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	rt, err := runtime.New(runtime.Options{Engines: engines, Logger: log})
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	res, ierr := runOnce(ctx, rt, id, spec, backends.Request{ID: "run", Input: input, Data: data, Stream: *stream}, stdout)
	sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer scancel()
	if err := rt.Shutdown(sctx); err != nil && ierr == nil {
		ierr = fmt.Errorf("run: %w", err)
	}
	if ierr != nil {
		return ierr
	}
	return printResult(res, *stream, *out, stdout, stderr)
}

// runSpec finds MODEL's spec: --spec, else its entry in the models file.
func runSpec(id, specJSON, configFile, root string) (runtime.ModelSpec, error) {
	var ms server.ModelSpec
	if specJSON != "" {
		if err := server.DecodeModelSpec([]byte(specJSON), &ms); err != nil {
			return runtime.ModelSpec{}, fmt.Errorf("run: --spec: %w", err)
		}
	} else {
		var entries []server.ModelEntry
		var err error
		if configFile != "" {
			entries, err = server.LoadModelsFile(configFile)
		} else {
			entries, err = server.ParseModelsYAML(defaultModelsYAML)
		}
		if err != nil {
			return runtime.ModelSpec{}, fmt.Errorf("run: %w", err)
		}
		found := false
		for _, e := range entries {
			if e.ID == id {
				ms, found = e.Spec, true
			}
		}
		if !found {
			return runtime.ModelSpec{}, fmt.Errorf("run: model %q is not in the models file; give --spec or --config", id)
		}
	}
	spec, err := ms.ToRuntime(true, root)
	if err != nil {
		return runtime.ModelSpec{}, fmt.Errorf("run: model %q: %w", id, err)
	}
	return spec, nil
}

// runOnce registers the model, loads it and runs one request.
func runOnce(ctx context.Context, rt *runtime.Runtime, id string, spec runtime.ModelSpec, req backends.Request,
	stdout io.Writer) (runtime.Result, error) {
	if _, err := rt.Apply(ctx, id, spec); err != nil {
		return runtime.Result{}, fmt.Errorf("run: loading %s: %w", id, err)
	}
	o := runtime.InferOptions{}
	if req.Stream {
		o.Emit = func(chunk json.RawMessage) error {
			_, err := fmt.Fprintf(stdout, "%s\n", chunk)
			return err
		}
	}
	res, err := rt.Infer(ctx, id, req, o)
	if err != nil {
		code := runtime.CodeOf(err)
		if code == core.CodeCancelled && ctx.Err() != nil {
			return res, fmt.Errorf("run: %s: timed out: %w", id, err)
		}
		return res, fmt.Errorf("run: %s: %w", id, err)
	}
	return res, nil
}

// runInput is the request input of the INPUT argument arg for a model of
// task: JSON as it is, anything else as a JSON string, except that for tts
// a string (plain or JSON) is the text to speak. No INPUT: no input.
func runInput(task, arg string) json.RawMessage {
	if arg == "" {
		return nil
	}
	in := json.RawMessage(arg)
	if task == "tts" {
		text := arg
		if json.Valid(in) && json.Unmarshal(in, &text) != nil {
			return in // JSON, not a string: the request as it is
		}
		in, _ = json.Marshal(map[string]string{"text": text})
		return in
	}
	if !json.Valid(in) {
		in, _ = json.Marshal(arg)
	}
	return in
}

// audioTask reports whether a model of task takes its request from audio.
func audioTask(task string) bool {
	return task == "asr" || task == "vad" || task == "diarization"
}

// printResult prints the JSON output (unless it was streamed) and writes a
// binary result to out.
func printResult(res runtime.Result, streamed bool, out string, stdout, stderr io.Writer) error {
	if !streamed && res.Output.JSON != nil {
		if _, err := fmt.Fprintf(stdout, "%s\n", res.Output.JSON); err != nil {
			return err
		}
	}
	if len(res.Output.Data) > 0 {
		if out == "" {
			fmt.Fprintf(stderr, "binary result of %d bytes (%s) not written: give --out FILE\n", len(res.Output.Data), res.Output.ContentType)
			return nil
		}
		if err := os.WriteFile(out, res.Output.Data, 0o644); err != nil {
			return fmt.Errorf("run: %w", err)
		}
		fmt.Fprintf(stderr, "wrote %d bytes (%s) to %s\n", len(res.Output.Data), res.Output.ContentType, out)
	}
	return nil
}
