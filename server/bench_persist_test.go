package server

import (
	"bytes"
	"fmt"
	"hash/crc32"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// BenchmarkManagePut is the cost of one durable PUT /v1/models/{id} (a
// reconfigure that commits a new config_version, recorded in --state-dir
// before its 200) with 50 and with 4,000 registered models, in one run
// (the persistence target: 4,000 within 1.5x of 50). The other
// models are restored from a state dir written here in the snapshot's
// format 1, which every build reads, so the same benchmark measures the
// code before and after a change of the persistence. It reports p50-ms,
// the median of the timed PUTs, beside Go's mean ns/op. The aliases
// runs PUT a model with an alias (as OpenAI's whisper-1 or tts-1 are
// given), whose change the registry once wrote twice (its intent left the
// aliases out).
//
//	go test -run '^$' -bench BenchmarkManagePut -benchtime 400x ./server/
func BenchmarkManagePut(b *testing.B) {
	for _, run := range []struct {
		n       int
		aliases string
	}{{50, ""}, {4000, ""}, {50, `,"aliases":["bench-alias"]`}, {4000, `,"aliases":["bench-alias"]`}} {
		n, name := run.n, fmt.Sprintf("models=%d", run.n)
		if run.aliases != "" {
			name += ",aliases"
		}
		b.Run(name, func(b *testing.B) {
			dir := b.TempDir()
			writeBenchSnapshot(b, dir, n-1) // plus the one this benchmark PUTs
			cfg := DefaultConfig()
			cfg.ParallelJobs, cfg.UIManagement, cfg.Fixture = true, true, true
			cfg.StateDir, cfg.ModelsRoot, cfg.MaxModels = filepath.Join(dir, "state"), b.TempDir(), 0
			s, err := New(cfg, Options{Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Shutdown(b.Context())
			h := s.Handler()
			put := func(q int) time.Duration {
				body := fmt.Sprintf(`{"engine":"fixture","max_queue":%d%s}`, q, run.aliases)
				req := httptest.NewRequest("PUT", "/v1/models/bench", strings.NewReader(body))
				req.Host = "127.0.0.1"
				req.Header.Set("Content-Type", "application/json")
				rec := httptest.NewRecorder()
				t0 := time.Now()
				h.ServeHTTP(rec, req)
				d := time.Since(t0)
				if rec.Code != 200 {
					b.Fatalf("PUT: %d %s", rec.Code, rec.Body)
				}
				return d
			}
			put(1) // registers and loads it
			var times []time.Duration
			q := 1
			for b.Loop() {
				q = 3 - q // 2, 1, 2, ...: every PUT commits a new version
				times = append(times, put(q))
			}
			slices.Sort(times)
			b.ReportMetric(float64(times[len(times)/2])/float64(time.Millisecond), "p50-ms")
		})
	}
}

// writeBenchSnapshot writes a state dir under dir whose snapshot (format
// 1: header line, JSON body) registers n fixture models, unloaded.
func writeBenchSnapshot(b *testing.B, dir string, n int) {
	var body bytes.Buffer
	body.WriteString(`{"models":[`)
	for k := range n {
		if k > 0 {
			body.WriteByte(',')
		}
		fmt.Fprintf(&body, `{"id":"model-%d","config_version":1,"loaded":false,"task":"tts","engine":"fixture","checkpoint":"","options":{},"slots":1,"admission_timeout_ns":-1,"max_queue":0}`, k)
	}
	body.WriteString(`]}`)
	sum := crc32.Checksum(body.Bytes(), crc32.MakeTable(crc32.Castagnoli))
	file := fmt.Appendf(nil, "sluice-registry 1 crc32c=%08x len=%d\n", sum, body.Len())
	state := filepath.Join(dir, "state")
	if err := os.MkdirAll(state, 0o700); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(state, "registry.json"), append(file, body.Bytes()...), 0o600); err != nil {
		b.Fatal(err)
	}
}
