package runtime

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/sluice-dev/sluice/core"
)

// TraceDirEnv names the environment variable that makes test suites write
// one ndjson trace per runtime into a directory (see TraceFromEnv), for
// `make trace-check` to validate against the spec.
const TraceDirEnv = "SLUICE_TRACE_DIR"

// TraceFromEnv opens <$SLUICE_TRACE_DIR>/<name>.ndjson for Options.Trace and
// writes the machine options beside it as <name>.options.json, since a trace
// replays only under the options it ran with. It returns nil, nil when the
// variable is unset. name is sanitised into a file name; the caller closes
// the file after Shutdown.
func TraceFromEnv(name string, opts core.Options) (io.WriteCloser, error) {
	dir := os.Getenv(TraceDirEnv)
	if dir == "" {
		return nil, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("runtime: trace dir: %w", err)
	}
	base := filepath.Join(dir, sanitize(name))
	o, err := json.Marshal(opts)
	if err != nil {
		return nil, fmt.Errorf("runtime: trace options: %w", err)
	}
	if err := os.WriteFile(base+".options.json", append(o, '\n'), 0o644); err != nil {
		return nil, fmt.Errorf("runtime: trace options: %w", err)
	}
	f, err := os.Create(base + ".ndjson")
	if err != nil {
		return nil, fmt.Errorf("runtime: trace: %w", err)
	}
	return f, nil
}

func sanitize(name string) string {
	return strings.Map(func(c rune) rune {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' {
			return c
		}
		return '_'
	}, name)
}
