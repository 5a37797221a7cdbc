package server

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
)

// discardStream is a ResponseWriter that accepts and drops a stream; first
// is closed at its first write (the stream is subscribed).
type discardStream struct {
	h     http.Header
	first chan struct{}
	n     int
}

func (d *discardStream) Header() http.Header { return d.h }
func (d *discardStream) WriteHeader(int)     {}
func (d *discardStream) Flush()              {}
func (d *discardStream) Write(b []byte) (int, error) {
	if d.n == 0 {
		close(d.first)
	}
	d.n += len(b)
	return len(b), nil
}

// BenchmarkInferWatched is BenchmarkInferHandler while a GET /v1/events
// client watches: every request's steps are built with statuses, followed,
// translated and fanned out besides the metrics' lifecycle feed.
func BenchmarkInferWatched(b *testing.B) {
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
	ctx, cancel := context.WithCancel(b.Context())
	done := make(chan struct{})
	w := &discardStream{h: http.Header{}, first: make(chan struct{})}
	go func() {
		defer close(done)
		req := httptest.NewRequest("GET", "/v1/events", nil).WithContext(ctx)
		req.Host = "127.0.0.1"
		s.Handler().ServeHTTP(w, req)
	}()
	defer func() { cancel(); <-done }()
	select {
	case <-w.first:
	case <-done:
		b.Fatal("the event stream ended before it started")
	}
	benchServe(b, s.Handler())
}
