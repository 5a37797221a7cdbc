package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/sluice-dev/sluice/server/internal/httpapi"
)

// The server's own cost per inference, without the network: the whole
// handler stack (middleware, decoding, runtime admission and release,
// encoding) against a bare chi handler that only decodes and encodes the
// same JSON. `make bench-http` measures the same comparison over loopback.
// Each reports server-allocs/op, the handler's allocations per warm
// request without the harness's.

const benchBody = `{"input":"the quick brown fox","stream":false}`

func benchServe(b *testing.B, h http.Handler) {
	b.ReportAllocs()
	body := []byte(benchBody)
	serve := func(h http.Handler) {
		// A request's context is cancellable, as net/http's is (and ends
		// with the request).
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		req := httptest.NewRequestWithContext(ctx, "POST", "/v1/models/bench/infer", bytes.NewReader(body))
		req.Host = "127.0.0.1:8080"
		req.Header.Set("Content-Type", "application/json")
		rec := deadlineRecorder{httptest.NewRecorder()}
		h.ServeHTTP(rec, req)
		if rec.Code != 200 {
			b.Fatalf("%d %s", rec.Code, rec.Body)
		}
	}
	for b.Loop() {
		serve(h)
	}
	// server-allocs/op is the handler's own allocations per warm request:
	// the total less what this harness allocates around a handler that
	// does nothing (the request, the recorder). A tracked number, not an
	// assertion.
	harness := testing.AllocsPerRun(200, func() { serve(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})) })
	total := testing.AllocsPerRun(200, func() { serve(h) })
	b.ReportMetric(total-harness, "server-allocs/op")
}

// deadlineRecorder is a recorder that takes read and write deadlines, as
// a connection's response writer does: on the bare recorder the body
// reader's deadline calls fail, and their errors would count as the
// server's allocations.
type deadlineRecorder struct{ *httptest.ResponseRecorder }

func (deadlineRecorder) SetReadDeadline(time.Time) error  { return nil }
func (deadlineRecorder) SetWriteDeadline(time.Time) error { return nil }

func BenchmarkInferHandler(b *testing.B) {
	cfg := DefaultConfig()
	cfg.ParallelJobs, cfg.Fixture = true, true
	s, err := New(cfg, Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Shutdown(b.Context())
	var ms ModelSpec
	_ = DecodeModelSpec([]byte(`{"engine":"fixture","slots":4}`), &ms)
	if err := s.RegisterModels(b.Context(), []ModelEntry{{ID: "bench", Spec: ms}}); err != nil {
		b.Fatal(err)
	}
	benchServe(b, s.Handler())
}

func BenchmarkInferBare(b *testing.B) {
	type answer struct {
		ID            string          `json:"id"`
		Output        json.RawMessage `json:"output"`
		ConfigVersion uint64          `json:"config_version"`
		Slot          int             `json:"slot"`
	}
	out := json.RawMessage(`{"model":"bench","slot":0,"session":"bench/v1/0#1","config_version":1}`)
	r := chi.NewRouter()
	r.Post("/v1/models/{id}/infer", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 25<<20))
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		var req InferRequest
		if err := httpapi.DecodeJSON(body, &req); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		b, _ := json.Marshal(answer{ID: "0123456789abcdef", Output: out, ConfigVersion: 1})
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(append(b, '\n'))
	})
	benchServe(b, r)
}
