package sdktest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sluice-dev/sluice/backends/audio"
	"github.com/sluice-dev/sluice/backends/audio/av"
)

// callTable is every SDK call the tests of this package made, in order,
// with its result: the one re-run table of make sdk-table.
type callTable struct {
	mu   sync.Mutex
	rows []callRow
}

// callRow is one SDK call.
type callRow struct {
	check, call, result string
	ok                  bool
}

// calls is the package's table.
var calls callTable

// add records one call.
func (c *callTable) add(check string, ok bool, call, result string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rows = append(c.rows, callRow{check: check, call: call, result: result, ok: ok})
}

// markdown is the table as a Markdown table: check, SDK call, pass, and
// the result (a refusal's status, param and code as the SDK saw them).
func (c *callTable) markdown() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	cell := func(s string) string {
		s = strings.ReplaceAll(strings.ReplaceAll(s, "\n", " "), "|", "\\|")
		if len(s) > 300 {
			s = s[:300] + "..."
		}
		return s
	}
	var b strings.Builder
	pass := 0
	for _, r := range c.rows {
		if r.ok {
			pass++
		}
	}
	fmt.Fprintf(&b, "# openai SDK calls against Sluice: %d of %d pass\n\n", pass, len(c.rows))
	b.WriteString("| check | SDK call | pass | result |\n|---|---|---|---|\n")
	for _, r := range c.rows {
		ok := "pass"
		if !r.ok {
			ok = "FAIL"
		}
		fmt.Fprintf(&b, "| %s | `%s` | %s | %s |\n", cell(r.check), cell(r.call), ok, cell(r.result))
	}
	return b.String()
}

// recordings writes text spoken by flite as a WebM/Opus file at 48 kHz
// with no stated duration (as browsers' MediaRecorder writes it) and an
// M4A/AAC file (as phones record), both encoded by FFmpeg through the
// repository's shim (backends/audio/av, as the conformance case
// audio.container-input builds its inputs), and returns their paths.
func recordings(t *testing.T, text string) (webm, m4a string) {
	t.Helper()
	s := speech24k(t, text)
	dir := t.TempDir()
	for _, f := range []struct {
		path *string
		name string
		o    av.EncodeOptions
		rate int
	}{
		{&webm, "speech.webm", av.EncodeOptions{Muxer: "webm", Encoder: "libopus", Rate: 48000, Streamable: true}, 48000},
		{&m4a, "speech.m4a", av.EncodeOptions{Muxer: "ipod", Encoder: "aac", Rate: 24000}, 24000},
	} {
		f.o.Limit = 1 << 24
		b, err := av.Encode(context.Background(), f.o, audio.Resample(s, 24000, f.rate))
		if err != nil {
			missing(t, "FFmpeg cannot write %s: %v", f.name, err)
		}
		*f.path = filepath.Join(dir, f.name)
		if err := os.WriteFile(*f.path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return webm, m4a
}
