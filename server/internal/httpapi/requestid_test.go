package httpapi

import (
	"bytes"
	"context"
	"errors"
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

// HeaderValue reads a canonical key as Header.Get does, and the keys the
// request path reads with it are canonical (a key that is not would never
// be found: net/http stores every key it receives in canonical form).
func TestHeaderValue(t *testing.T) {
	h := http.Header{}
	h.Set("content-type", "application/json")
	h.Add("X-Request-Id", "a")
	h.Add("X-Request-Id", "b")
	for _, k := range []string{"Content-Type", RequestIDHeader, "Authorization", "Sec-Fetch-Site", "Origin"} {
		if http.CanonicalHeaderKey(k) != k {
			t.Errorf("%q is not canonical", k)
		}
		if got, want := HeaderValue(h, k), h.Get(k); got != want {
			t.Errorf("HeaderValue(%q) = %q, Get %q", k, got, want)
		}
	}
	if got := HeaderValue(nil, "Origin"); got != "" {
		t.Errorf("a nil header gave %q", got)
	}
}

// The request's context is its parent's with the request state: values,
// cancellation and its cause pass through, as context.WithValue's would.
func TestRequestContextIsTheParents(t *testing.T) {
	type key struct{}
	parent, cancel := context.WithCancelCause(context.WithValue(context.Background(), key{}, "v"))
	var got context.Context
	h := RequestIDs(slog.New(slog.DiscardHandler), nil)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Context()
	}))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/x", nil).WithContext(parent))
	if got.Value(key{}) != "v" || RequestID(got) == "" {
		t.Fatalf("values: %v, request ID %q", got.Value(key{}), RequestID(got))
	}
	child, stop := context.WithCancel(got)
	defer stop()
	cause := errors.New("gone")
	cancel(cause)
	<-child.Done()
	if !errors.Is(context.Cause(child), cause) || !errors.Is(context.Cause(got), cause) {
		t.Fatalf("causes: %v, %v", context.Cause(child), context.Cause(got))
	}
}

// Under WithRequestState, RequestIDs fills the state in place: the
// handler gets the very request the middleware got (no copy), the
// router's value is in the same context, and nothing of the state shows
// before RequestIDs has run; cancellation passes through as before.
func TestRequestStateInPlace(t *testing.T) {
	type key struct{}
	routerKey := new(int)
	parent, cancel := context.WithCancelCause(context.WithValue(context.Background(), key{}, "v"))
	ctx := WithRequestState(parent, routerKey, "route")
	if RequestID(ctx) != "" || ctx.Value(routerKey) != "route" || ctx.Value(key{}) != "v" {
		t.Fatalf("before RequestIDs: id %q, router %v, parent's %v", RequestID(ctx), ctx.Value(routerKey), ctx.Value(key{}))
	}
	// A slot set above RequestIDs (the edge's connection) stays.
	if !SetLocal(ctx, SlotConn, "c") {
		t.Fatal("no slots before RequestIDs")
	}
	in := httptest.NewRequest("GET", "/x", nil).WithContext(ctx)
	var got *http.Request
	h := RequestIDs(slog.New(slog.DiscardHandler), nil)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		if !SetLocal(r.Context(), SlotBody, "b") {
			t.Error("SetLocal found no state")
		}
	}))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, in)
	if got != in {
		t.Fatalf("the handler got a copy of the request")
	}
	id := rec.Header().Get(RequestIDHeader)
	if id == "" || RequestID(got.Context()) != id || Local(got.Context(), SlotBody) != "b" || Local(got.Context(), SlotConn) != "c" ||
		got.Context().Value(routerKey) != "route" {
		t.Fatalf("after: header %q, context %q, slot %v, router %v", id, RequestID(got.Context()), Local(got.Context(), SlotBody), got.Context().Value(routerKey))
	}
	child, stop := context.WithCancel(got.Context())
	defer stop()
	cause := errors.New("gone")
	cancel(cause)
	<-child.Done()
	if !errors.Is(context.Cause(child), cause) {
		t.Fatalf("cause: %v", context.Cause(child))
	}
	// A second RequestIDs (a nested chain) makes a state of its own.
	h2 := RequestIDs(slog.New(slog.DiscardHandler), nil)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = r }))
	h2.ServeHTTP(httptest.NewRecorder(), in)
	if got == in || RequestID(got.Context()) == id {
		t.Fatalf("a second pass reused the filled state")
	}
}
