package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/sluice-dev/sluice/internal/baseurl"
	"github.com/sluice-dev/sluice/server"
)

// models runs `sluice models`: it lists the models of a running server
// (GET /v1/models of --target) as a table, like `ollama ps`.
func models(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("models", flag.ContinueOnError)
	target := fs.String("target", "http://127.0.0.1:8080", "the server: a base URL, or host:port for http://host:port")
	key := fs.String("api-key", os.Getenv("SLUICE_API_KEY"), "Bearer key (default $SLUICE_API_KEY)")
	timeout := fs.Duration("timeout", 10*time.Second, "request timeout")
	if err := parseFlags(fs, args, stderr, func(w io.Writer) {
		fmt.Fprintln(w, "usage: sluice models [flags]\n\nmodels lists the models of a running server (GET /v1/models) as a table.\n\nFlags:")
		printFlags(w, fs, nil)
	}); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return &usageError{cmd: "models", err: fmt.Errorf("unexpected arguments %q", fs.Args())}
	}
	base, err := targetURL(*target)
	if err != nil {
		return &usageError{cmd: "models", err: fmt.Errorf("--target: %w", err)}
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/models", nil)
	if err != nil {
		return fmt.Errorf("models: %w", err)
	}
	if *key != "" {
		req.Header.Set("Authorization", "Bearer "+*key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("models: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("models: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error struct{ Message, Type string }
		}
		if json.Unmarshal(body, &e) == nil && e.Error.Message != "" {
			return fmt.Errorf("models: %s: %s (%s)", resp.Status, e.Error.Message, e.Error.Type)
		}
		return fmt.Errorf("models: %s", resp.Status)
	}
	var list server.ModelList
	if err := json.Unmarshal(body, &list); err != nil {
		return fmt.Errorf("models: decoding the answer: %w", err)
	}
	return printModels(stdout, list.Data)
}

// targetURL turns a --target into a base URL (baseurl.Parse: host:port
// is http://host:port).
func targetURL(t string) (string, error) { return baseurl.Parse(t) }

// printModels writes the model table.
func printModels(w io.Writer, ms []server.Model) error {
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSTATE\tLOADED\tSLOTS\tACTIVE\tQUEUED\tMANAGERS\tMAX PARALLEL\tVERSION\tENGINE\tTASK")
	for _, m := range ms {
		if m.AliasOf != "" {
			continue // an alias's entry, not a model
		}
		maxPar := "-"
		if m.MaxParallelSlots != nil {
			maxPar = strconv.Itoa(*m.MaxParallelSlots)
		}
		fmt.Fprintf(tw, "%s\t%s\t%v\t%d\t%d\t%d\t%d\t%s\t%d\t%s\t%s\n", m.ID, m.State, m.Loaded, m.Slots, m.ActiveSlots,
			m.QueuedRequests, m.QueuedManagers, maxPar, m.ConfigVersion, m.Engine, m.Task)
	}
	return tw.Flush()
}
