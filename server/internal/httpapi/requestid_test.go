package httpapi

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestRequestID(t *testing.T) {
	var logs bytes.Buffer
	base := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h := RequestIDs(base, nil)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		Logger(r.Context()).Info("inside")
		w.WriteHeader(http.StatusTeapot)
	}))
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/x", nil)
	req.Header.Set(RequestIDHeader, "client-id-1")
	h.ServeHTTP(rec, req)
	if rec.Header().Get(RequestIDHeader) != "client-id-1" || !strings.Contains(logs.String(), "request_id=client-id-1") ||
		!strings.Contains(logs.String(), "status=418") {
		t.Fatalf("%v %s", rec.Header(), logs.String())
	}
	rec = httptest.NewRecorder()
	req = httptest.NewRequest("GET", "/x", nil)
	req.Header.Set(RequestIDHeader, "bad id with spaces")
	h.ServeHTTP(rec, req)
	if id := rec.Header().Get(RequestIDHeader); len(id) != 16 {
		t.Fatalf("generated id %q", id)
	}
}
