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
// embedded default models), runs INPUT (JSON; anything else is taken as a
// JSON string) and prints the output. With --stream each chunk is printed
// on its own line as it comes.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	configFile := fs.String("config", "", "YAML models file holding MODEL (default: the embedded default models)")
	specJSON := fs.String("spec", "", "model spec as JSON, instead of a models file")
	root := fs.String("models-root", server.DefaultConfig().ModelsRoot, "folder of checkpoints")
	stream := fs.Bool("stream", false, "stream the answer: print each chunk as it comes")
	out := fs.String("out", "", "write a binary result (for example audio) to this file")
	timeout := fs.Duration("timeout", 5*time.Minute, "bound of the whole run")
	verbose := fs.Bool("v", false, "log the runtime's steps to stderr")
	if err := parseFlags(fs, args, stderr, func(w io.Writer) {
		fmt.Fprintln(w, "usage: sluice run [flags] MODEL INPUT\n\nrun runs one inference of MODEL on INPUT (JSON, else taken as a JSON string) without a server.\n\nFlags:")
		printFlags(w, fs, nil)
	}); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		return &usageError{cmd: "run", err: fmt.Errorf("want MODEL and INPUT, got %d arguments", fs.NArg())}
	}
	id, input := fs.Arg(0), json.RawMessage(fs.Arg(1))
	if !json.Valid(input) {
		input, _ = json.Marshal(fs.Arg(1))
	}
	spec, err := runSpec(id, *specJSON, *configFile, *root)
	if err != nil {
		return err
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
	res, ierr := runOnce(ctx, rt, id, spec, input, *stream, stdout)
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
func runOnce(ctx context.Context, rt *runtime.Runtime, id string, spec runtime.ModelSpec, input json.RawMessage,
	stream bool, stdout io.Writer) (runtime.Result, error) {
	if _, err := rt.Apply(ctx, id, spec); err != nil {
		return runtime.Result{}, fmt.Errorf("run: loading %s: %w", id, err)
	}
	o := runtime.InferOptions{}
	if stream {
		o.Emit = func(chunk json.RawMessage) error {
			_, err := fmt.Fprintf(stdout, "%s\n", chunk)
			return err
		}
	}
	res, err := rt.Infer(ctx, id, backends.Request{ID: "run", Input: input, Stream: stream}, o)
	if err != nil {
		code := runtime.CodeOf(err)
		if code == core.CodeCancelled && ctx.Err() != nil {
			return res, fmt.Errorf("run: %s: timed out: %w", id, err)
		}
		return res, fmt.Errorf("run: %s: %w", id, err)
	}
	return res, nil
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
