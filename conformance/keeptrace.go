package conformance

import (
	"fmt"
	"os"
	"strings"
)

// TraceKeepEnv names a folder: when set, every case on a server of its own
// runs it with --trace, and the trace (with its options file) is kept there
// as <case>.ndjson (<case>.2.ndjson after a restart, ...) when the server
// stops, for `sluice sim --replay` (make replay-check).
const TraceKeepEnv = "SLUICE_CONFORMANCE_TRACE_DIR"

// keepTrace copies a stopped server's trace and its options to the first
// free name at dest ("" does nothing).
func keepTrace(trace, dest string) error {
	if trace == "" || dest == "" {
		return nil
	}
	b, err := os.ReadFile(trace)
	if err != nil {
		return fmt.Errorf("keep trace: %w", err)
	}
	base := strings.TrimSuffix(dest, ".ndjson")
	for n := 1; ; n++ {
		name := base
		if n > 1 {
			name = fmt.Sprintf("%s.%d", base, n)
		}
		f, err := os.OpenFile(name+".ndjson", os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if os.IsExist(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("keep trace: %w", err)
		}
		_, werr := f.Write(b)
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return fmt.Errorf("keep trace: %w", werr)
		}
		if o, err := os.ReadFile(strings.TrimSuffix(trace, ".ndjson") + ".options.json"); err == nil {
			if err := os.WriteFile(name+".options.json", o, 0o644); err != nil {
				return fmt.Errorf("keep trace: %w", err)
			}
		}
		return nil
	}
}
