package server

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/sluice-dev/sluice/core"
)

// TraceOptionsPath is where the machine options of the trace at path are
// written: <path without .ndjson>.options.json, where spec's trace
// validation (trace.OptionsFor) and `sluice sim --replay` look for them.
func TraceOptionsPath(path string) string {
	return strings.TrimSuffix(path, ".ndjson") + ".options.json"
}

// writeTraceOptions writes the scheduler options beside the --trace file: a
// trace replays only under the options it ran with.
func writeTraceOptions(path string, o core.Options) error {
	b, err := json.Marshal(o)
	if err != nil {
		return fmt.Errorf("trace options: %w", err)
	}
	if err := os.WriteFile(TraceOptionsPath(path), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("trace options: %w", err)
	}
	return nil
}
